/**
 * A tool call's card: the summary line (icon, title, +/− counts, exit code, status),
 * the permission question with its buttons, and the body — command, locations,
 * inline diffs, output tail, meta line and a sub-agent's own transcript.
 */

import type { ToolKind, ToolStatus } from '../protocol';
import type { Item, SessionState, ToolCallState } from '../stateModel';
import { countsText, displayPath } from '../stateSelectors';
import { diffView } from './diffView';
import { MarkdownBlock, countsEl, h, icon } from './dom';
import { highlight } from './markdown';
import type { UiState } from './messages';

const OUTPUT_TAIL_LINES = 40;

/** Codicon per ACP tool kind. */
const KIND_ICONS: Record<ToolKind, string> = {
  read: 'file',
  edit: 'edit',
  delete: 'trash',
  move: 'arrow-swap',
  search: 'search',
  execute: 'terminal',
  think: 'lightbulb',
  fetch: 'globe',
  other: 'tools',
};

const STATUS_LABELS: Record<ToolStatus, string> = {
  pending: 'pending',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
  denied: 'denied',
};

/** What the cards need from the chat view. */
export interface ToolCardsHost {
  /** The user's choices per card (open, whole output, whole diff); saved with the view. */
  readonly ui: UiState;
  activeSession(): SessionState | null;
  /** Save the UI state soon. */
  persist(): void;
}

export class ToolCards {
  constructor(private readonly host: ToolCardsHost) {}

  /** An empty card for a tool call; `render` fills it. */
  skeleton(toolCallId: string): HTMLDetailsElement {
    const details = h('details', { class: 'tool' });
    details.dataset.toolCallId = toolCallId;
    const summary = h('summary', { class: 'tool-summary' });
    summary.append(
      icon('tools', 'tool-icon'),
      h('span', { class: 'tool-title' }),
      h('span', { class: 'tool-diffstat', hidden: '' }),
      h('span', { class: 'tool-exit' }),
      h('span', { class: 'tool-status' }),
    );
    const body = h('div', { class: 'tool-body' });
    const command = h('pre', { class: 'tool-command' });
    command.appendChild(h('code', { class: 'hljs language-bash' }));
    body.append(
      command,
      h('div', { class: 'tool-locations' }),
      h('div', { class: 'tool-diffs', hidden: '' }),
      h('pre', { class: 'tool-output' }),
      h('div', { class: 'tool-more' }),
      h('div', { class: 'tool-meta' }),
      h('div', { class: 'tool-children' }),
    );
    details.append(summary, body);
    details.addEventListener('toggle', () => {
      const id = details.dataset.toolCallId!;
      const session = this.host.activeSession();
      const tool = session?.tools[id];
      if (details.open && details.dataset.bodyStale === '1' && session && tool) {
        this.renderBody(session, details, tool);
      }
      if (details.dataset.rendering === '1') return;
      this.host.ui.expanded[id] = details.open;
      this.host.persist();
    });
    return details;
  }

  render(session: SessionState, el: HTMLDetailsElement, tool: ToolCallState): void {
    el.dataset.rendering = '1';
    el.className = `tool kind-${tool.kind} status-${tool.status}`;
    el.dataset.status = tool.status;
    const q = <T extends HTMLElement>(sel: string): T => el.querySelector(`:scope > ${sel}`) as T;
    const summary = q<HTMLElement>('summary');
    (summary.querySelector('.tool-icon') as HTMLElement).className =
      `codicon codicon-${KIND_ICONS[tool.kind] ?? KIND_ICONS.other} tool-icon`;
    const title = summary.querySelector('.tool-title') as HTMLElement;
    const titleText = tool.title || tool.command || 'Tool call';
    if (title.dataset.src !== titleText) {
      setCodeSpans(title, titleText);
      title.dataset.src = titleText;
    }
    title.title = tool.command;
    const exit = summary.querySelector('.tool-exit') as HTMLElement;
    // A denied command never ran: its 126 is not an exit code worth showing in red.
    const denied = tool.status === 'denied';
    exit.textContent = denied || tool.exitCode === null || tool.exitCode === undefined ? '' : `exit ${tool.exitCode}`;
    exit.classList.toggle('nonzero', !denied && tool.exitCode !== null && tool.exitCode !== 0);
    const status = summary.querySelector('.tool-status') as HTMLElement;
    status.textContent = tool.question ? 'waiting for your answer' : STATUS_LABELS[tool.status];
    status.className = `tool-status badge badge-${tool.question ? 'waiting' : tool.status}`;
    el.classList.toggle('waiting', tool.question !== null);
    renderQuestion(el, tool);
    const diffs = tool.diffs ?? [];
    const diffstat = summary.querySelector('.tool-diffstat') as HTMLElement;
    diffstat.hidden = diffs.length === 0;
    if (diffs.length > 0) {
      const added = diffs.reduce((n, d) => n + d.added, 0);
      const removed = diffs.reduce((n, d) => n + d.removed, 0);
      diffstat.textContent = '';
      diffstat.appendChild(countsEl(added, removed));
      diffstat.title = diffs.map((d) => `${displayPath(d.path, session.workspaceUri)} ${countsText(d.added, d.removed)}`).join('\n');
    }
    el.classList.toggle('has-diff', diffs.length > 0);

    const choice = this.host.ui.expanded[tool.id];
    // A question waiting for an answer keeps its card open, whatever the user chose before;
    // an edit card opens on its diff.
    const wantOpen =
      tool.question !== null ||
      (choice ?? (tool.status === 'in_progress' || tool.status === 'pending' || tool.status === 'failed' || diffs.length > 0));
    if (el.open !== wantOpen) el.open = wantOpen;
    // `toggle` fires asynchronously; clear the flag after it.
    setTimeout(() => {
      delete el.dataset.rendering;
    }, 0);
    // A closed card's body is rendered when it is opened.
    if (el.open) this.renderBody(session, el, tool);
    else el.dataset.bodyStale = '1';
  }

  private renderBody(session: SessionState, el: HTMLDetailsElement, tool: ToolCallState): void {
    delete el.dataset.bodyStale;
    const body = el.querySelector(':scope > .tool-body') as HTMLElement;
    const code = body.querySelector('.tool-command > code') as HTMLElement;
    if (code.dataset.src !== tool.command) {
      code.innerHTML = highlight(tool.command, 'bash');
      code.dataset.src = tool.command;
      // Long commands are clipped to a few lines: a click shows them whole (and again clips).
      const pre = code.parentElement as HTMLElement;
      pre.title = tool.command.length > 200 ? 'Click to show the whole command' : '';
      pre.dataset.action = 'toggleCommand';
    }
    (body.querySelector('.tool-command') as HTMLElement).hidden = !tool.command;

    const locations = body.querySelector('.tool-locations') as HTMLElement;
    // A file the card's diffs show already has its link there.
    const diffPaths = new Set((tool.diffs ?? []).map((d) => d.path));
    const shownLocations = tool.locations.filter((loc) => loc.line || !diffPaths.has(loc.path));
    const locKey = JSON.stringify(shownLocations);
    if (locations.dataset.src !== locKey) {
      locations.textContent = '';
      for (const loc of shownLocations) {
        const shown = displayPath(loc.path, session.workspaceUri);
        const a = h('a', { class: 'location', href: '#', 'data-path': loc.path, title: loc.path }, shown + (loc.line ? `:${loc.line}` : ''));
        if (loc.line) a.dataset.line = String(loc.line);
        locations.appendChild(a);
      }
      locations.dataset.src = locKey;
    }

    this.renderDiffs(session, body, tool);
    this.renderOutput(body, tool);

    const meta = body.querySelector('.tool-meta') as HTMLElement;
    const parts: string[] = [];
    if (tool.status === 'denied') parts.push('not run: permission denied');
    else if (tool.exitCode !== null && tool.exitCode !== undefined) parts.push(`exit code ${tool.exitCode}`);
    if (tool.layer) parts.push(tool.layer);
    if (tool.category && tool.status !== 'denied') parts.push(tool.category.replace(/_/g, ' '));
    if (tool.restart) parts.push('shell restarted');
    if (tool.edit) {
      const shown = displayPath(tool.edit.path, session.workspaceUri);
      parts.push(tool.edit.applied ? `edit applied in the editor: ${shown}` : `the editor refused the edit: ${shown}`);
    }
    meta.textContent = parts.join(' · ');
    meta.hidden = parts.length === 0;

    const children = body.querySelector('.tool-children') as HTMLElement;
    if (tool.children.length > 0) {
      children.hidden = false;
      this.renderChildren(session, children, tool.children);
    } else {
      children.hidden = true;
    }
  }

  /** An edit card's diffs: per file its name, +/− counts, buttons and a unified diff. */
  private renderDiffs(session: SessionState, body: HTMLElement, tool: ToolCallState): void {
    const box = body.querySelector(':scope > .tool-diffs') as HTMLElement;
    const diffs = tool.diffs ?? [];
    const full = this.host.ui.fullDiff ?? {};
    const key = `${diffs.length}:${diffs.map((_, i) => (full[`${tool.id}:${i}`] ? 1 : 0)).join('')}`;
    if (box.dataset.src === key) return;
    box.dataset.src = key;
    box.textContent = '';
    box.hidden = diffs.length === 0;
    diffs.forEach((d, i) => box.appendChild(diffView(session, tool, d, i, full[`${tool.id}:${i}`] === true)));
  }

  private renderOutput(body: HTMLElement, tool: ToolCallState): void {
    const pre = body.querySelector('.tool-output') as HTMLElement;
    const more = body.querySelector('.tool-more') as HTMLElement;
    const full = this.host.ui.fullOutput[tool.id] === true;
    const segments = tool.output;
    if (segments.length === 0) {
      pre.hidden = true;
      more.hidden = true;
      pre.textContent = '';
      return;
    }
    pre.hidden = false;
    // Count lines; take the tail unless the user asked for all of it.
    let lines = 0;
    for (const s of segments) for (let i = s.text.indexOf('\n'); i >= 0; i = s.text.indexOf('\n', i + 1)) lines++;
    const lastText = segments[segments.length - 1].text;
    const totalLines = lines + (lastText.endsWith('\n') ? 0 : 1);
    let shown = segments;
    let hiddenLines = 0;
    if (!full && totalLines > OUTPUT_TAIL_LINES) {
      hiddenLines = totalLines - OUTPUT_TAIL_LINES;
      shown = tailSegments(segments, OUTPUT_TAIL_LINES);
    }
    pre.textContent = '';
    for (const s of shown) {
      if (s.stream === 'stderr') pre.appendChild(h('span', { class: 'stderr' }, s.text));
      else pre.appendChild(document.createTextNode(s.text));
    }
    more.textContent = '';
    const dropped = tool.outputDropped > 0 ? `${tool.outputDropped.toLocaleString()} earlier characters were not kept. ` : '';
    if (hiddenLines > 0) {
      more.hidden = false;
      more.appendChild(h('span', {}, `${dropped}${hiddenLines.toLocaleString()} earlier lines hidden. `));
      more.appendChild(h('button', { class: 'link-button show-more', 'data-action': 'showMore', 'data-tool': tool.id }, 'Show more'));
    } else if (full && totalLines > OUTPUT_TAIL_LINES) {
      more.hidden = false;
      if (dropped) more.appendChild(h('span', {}, dropped));
      more.appendChild(h('button', { class: 'link-button show-less', 'data-action': 'showLess', 'data-tool': tool.id }, 'Show less'));
    } else {
      more.hidden = !dropped;
      if (dropped) more.appendChild(h('span', {}, dropped));
    }
  }

  private renderChildren(session: SessionState, container: HTMLElement, items: Item[]): void {
    // Sub-agent transcripts are small: re-render them whole.
    container.textContent = '';
    for (const child of items) {
      if (child.kind === 'tool') {
        const tool = session.tools[child.toolCallId];
        if (!tool) continue;
        const el = this.skeleton(child.toolCallId);
        container.appendChild(el);
        this.render(session, el, tool);
      } else if (child.kind === 'agent') {
        const md = new MarkdownBlock('markdown');
        md.set(child.text);
        const wrap = h('div', { class: 'msg agent sub' });
        wrap.appendChild(md.el);
        container.appendChild(wrap);
      } else if (child.kind === 'thought' || child.kind === 'user') {
        container.appendChild(h('div', { class: 'msg sub muted' }, child.text));
      } else if (child.kind === 'notice') {
        container.appendChild(h('div', { class: `notice notice-${child.level}` }, child.message));
      }
    }
  }
}

/** The permission question in the card: the server's message and its three buttons. */
function renderQuestion(el: HTMLDetailsElement, tool: ToolCallState): void {
  const body = el.querySelector(':scope > .tool-body') as HTMLElement;
  let box = body.querySelector(':scope > .tool-question') as HTMLElement | null;
  const q = tool.question;
  if (!q) {
    box?.remove();
    return;
  }
  if (box?.dataset.question === q.id) return;
  box?.remove();
  box = h('div', { class: 'tool-question', role: 'alert', 'data-testid': 'permission-question' });
  box.dataset.question = q.id;
  box.appendChild(h('div', { class: 'tool-question-text' }, q.message));
  const buttons = h('div', { class: 'tool-question-buttons' });
  const testIds: Record<string, string> = {
    'Allow once': 'permission-allow-once',
    'Allow for this session': 'permission-allow-session',
    Deny: 'permission-deny',
  };
  for (const title of q.actions) {
    const button = h(
      'button',
      {
        class: title === 'Deny' ? 'secondary' : 'primary',
        'data-action': 'answerPermission',
        'data-question': q.id,
        'data-answer': title,
        'data-testid': testIds[title] ?? 'permission-answer',
      },
      title,
    );
    buttons.appendChild(button);
  }
  box.appendChild(buttons);
  body.prepend(box);
}

/** Tool titles are plain text with `code` spans: built as nodes, never parsed as HTML. */
function setCodeSpans(el: HTMLElement, text: string): void {
  el.textContent = '';
  const parts = text.split('`');
  if (parts.length % 2 === 0) {
    el.textContent = text; // an unmatched backtick: show it as it is
    return;
  }
  parts.forEach((part, i) => {
    if (part) el.appendChild(i % 2 === 1 ? h('code', {}, part) : document.createTextNode(part));
  });
}

/** The last `n` lines of segmented output, keeping stream boundaries. */
export function tailSegments(segments: ToolCallState['output'], n: number): ToolCallState['output'] {
  const full = segments.map((s) => s.text).join('');
  let pos = full.endsWith('\n') ? full.length - 1 : full.length;
  let count = 0;
  while (count < n) {
    const nl = pos > 0 ? full.lastIndexOf('\n', pos - 1) : -1;
    if (nl < 0) break;
    pos = nl;
    count++;
  }
  const start = count < n ? 0 : pos + 1;
  const out: ToolCallState['output'] = [];
  let offset = 0;
  for (const s of segments) {
    const end = offset + s.text.length;
    if (end > start) out.push({ stream: s.stream, text: s.text.slice(Math.max(0, start - offset)) });
    offset = end;
  }
  return out;
}
