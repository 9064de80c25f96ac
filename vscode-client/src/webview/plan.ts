/**
 * The plan panel between the transcript and the composer: the shown chat's plan
 * entries (☐ ◐ ☑) with "done/total" in its title; hidden while there is no plan.
 */

import type { PlanEntry } from '../protocol';
import type { SessionState } from '../stateModel';
import { h } from './dom';

export class PlanPanel {
  readonly el: HTMLElement = h('section', { class: 'plan', hidden: '', 'aria-label': 'Plan' });

  render(session: SessionState | null): void {
    const plan = session?.plan;
    const el = this.el;
    if (!plan || plan.entries.length === 0) {
      el.hidden = true;
      el.textContent = '';
      return;
    }
    el.hidden = false;
    el.textContent = '';
    const done = plan.entries.filter((e) => e.status === 'completed').length;
    const details = h('details', { class: 'plan-details', open: '' });
    const summary = h('summary', { class: 'plan-title' }, `Plan · ${done}/${plan.entries.length}`);
    details.appendChild(summary);
    if (plan.explanation) details.appendChild(h('p', { class: 'plan-explanation' }, plan.explanation));
    const list = h('ul', { class: 'plan-list', role: 'list' });
    for (const entry of plan.entries) list.appendChild(planItem(entry));
    details.appendChild(list);
    el.appendChild(details);
  }
}

function planItem(entry: PlanEntry): HTMLElement {
  const li = h('li', { class: `plan-entry plan-${entry.status}`, 'data-status': entry.status });
  const mark = entry.status === 'completed' ? '☑' : entry.status === 'in_progress' ? '◐' : '☐';
  li.setAttribute('role', 'checkbox');
  li.setAttribute('aria-checked', entry.status === 'completed' ? 'true' : entry.status === 'in_progress' ? 'mixed' : 'false');
  li.append(h('span', { class: 'plan-mark', 'aria-hidden': 'true' }, mark), h('span', { class: 'plan-text' }, entry.content));
  if (entry.priority === 'high') li.appendChild(h('span', { class: 'plan-priority' }, 'high'));
  return li;
}
