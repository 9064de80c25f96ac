/**
 * One file of an edit card's inline diff: its name (a link), +/− counts, "Open diff"
 * and "Revert this edit", and the unified diff (its first lines unless shown whole).
 */

import { hunks } from '../diff';
import type { FileDiffState, SessionState, ToolCallState } from '../stateModel';
import { displayPath } from '../stateSelectors';
import { countsEl, h } from './dom';

/** Diff lines an edit card shows before "Show all". */
const DIFF_PREVIEW_LINES = 30;

export function diffView(session: SessionState, tool: ToolCallState, d: FileDiffState, index: number, full: boolean): HTMLElement {
  const file = h('div', { class: 'diff-file', 'data-testid': 'diff-file' });
  const head = h('div', { class: 'diff-head' });
  const shown = displayPath(d.path, session.workspaceUri);
  head.appendChild(h('a', { class: 'location diff-path', href: '#', 'data-path': d.path, title: d.path }, shown));
  head.appendChild(countsEl(d.added, d.removed));
  if (d.oldText === null) head.appendChild(h('span', { class: 'diff-new' }, 'new file'));
  const actions = h('span', { class: 'diff-actions' });
  const button = (action: string, label: string, testId: string, title: string): HTMLElement =>
    h('button', { class: 'link-button', 'data-action': action, 'data-tool': tool.id, 'data-index': String(index), 'data-testid': testId, title }, label);
  actions.append(
    button('openDiff', 'Open diff', 'open-diff', 'Compare the text before this edit with the file as it is now'),
    button(
      'revertEdit',
      'Revert this edit',
      'revert-edit',
      d.oldText === null
        ? 'Delete the file this edit created (asks first; refused if it changed since)'
        : 'Put the text from before this edit back in the editor (refused if that part changed since)',
    ),
  );
  head.appendChild(actions);
  file.appendChild(head);

  const pre = h('pre', { class: 'diff-body' });
  let total = 0;
  let shownLines = 0;
  const all = hunks(d.oldText, d.newText);
  for (const hunk of all) total += hunk.lines.length + 1;
  for (const hunk of all) {
    if (!full && shownLines >= DIFF_PREVIEW_LINES) break;
    pre.appendChild(h('span', { class: 'diff-line diff-hunk' }, `@@ -${hunk.oldStart},${hunk.oldCount} +${hunk.newStart},${hunk.newCount} @@`));
    shownLines++;
    for (const line of hunk.lines) {
      if (!full && shownLines >= DIFF_PREVIEW_LINES) break;
      const mark = line.kind === 'add' ? '+' : line.kind === 'del' ? '-' : ' ';
      pre.appendChild(h('span', { class: `diff-line diff-${line.kind}` }, `${mark}${line.text}`));
      shownLines++;
    }
  }
  if (all.length === 0) pre.appendChild(h('span', { class: 'diff-line diff-hunk' }, d.newText === '' ? '(empty file)' : '(no line changed)'));
  file.appendChild(pre);
  if (total > DIFF_PREVIEW_LINES) {
    const more = h('div', { class: 'diff-more' });
    if (full) {
      more.appendChild(h('button', { class: 'link-button', 'data-action': 'diffLess', 'data-tool': tool.id, 'data-index': String(index) }, 'Show less'));
    } else {
      more.appendChild(h('span', {}, `${(total - shownLines).toLocaleString()} more lines. `));
      more.appendChild(h('button', { class: 'link-button', 'data-action': 'diffMore', 'data-tool': tool.id, 'data-index': String(index) }, 'Show all'));
    }
    file.appendChild(more);
  }
  return file;
}
