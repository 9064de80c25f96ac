/**
 * Line diffs of an edit's whole old and new text (the server's `diff` content
 * blocks), and the revert check.
 *
 * Pure TypeScript (no `vscode`): the state counts lines with it, the webview
 * renders the unified diff, the extension host decides whether a revert is
 * still safe.
 */

export type DiffLine = { kind: 'ctx' | 'add' | 'del'; text: string; oldLine: number; newLine: number };

export interface Hunk {
  /** 1-based first line on each side (0 when that side is empty), as `@@ -a,b +c,d @@`. */
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  lines: DiffLine[];
}

/** Lines of `text` without their ends; "" has none, a last line without "\n" counts. */
export function splitLines(text: string | null): string[] {
  if (!text) return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Past this many edit steps the middle is shown as all removed then all added. */
const MAX_EDIT_STEPS = 2000;

type Op = { kind: 'ctx' | 'add' | 'del'; a: number; b: number };

/**
 * The edit script from `a` to `b` (Myers' O(ND) algorithm on the lines left
 * between the common head and tail).
 */
function editScript(a: string[], b: string[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const ops: Op[] = [];
  for (let i = 0; i < head; i++) ops.push({ kind: 'ctx', a: i, b: i });
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  for (const op of middleScript(am, bm)) ops.push({ kind: op.kind, a: op.a + head, b: op.b + head });
  for (let i = tail; i > 0; i--) ops.push({ kind: 'ctx', a: a.length - i, b: b.length - i });
  return ops;
}

function middleScript(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  const wholesale = (): Op[] => [
    ...a.map((_, i) => ({ kind: 'del' as const, a: i, b: 0 })),
    ...b.map((_, j) => ({ kind: 'add' as const, a: n, b: j })),
  ];
  if (n === 0 || m === 0) return wholesale();
  const max = Math.min(n + m, MAX_EDIT_STEPS);
  const offset = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = false;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice());
    const next = v.slice();
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      next[offset + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
    v = next;
  }
  if (!found) return wholesale();
  // Walk back through the saved frontiers (trace[d]: the frontier before step d).
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const prev = trace[d];
    const k = x - y;
    const down = k === -d || (k !== d && prev[offset + k - 1] < prev[offset + k + 1]);
    const pk = down ? k + 1 : k - 1;
    const px = prev[offset + pk];
    const py = px - pk;
    while (x > px && y > py) {
      x--;
      y--;
      ops.push({ kind: 'ctx', a: x, b: y });
    }
    if (d === 0) break;
    if (down) ops.push({ kind: 'add', a: px, b: py });
    else ops.push({ kind: 'del', a: px, b: py });
    x = px;
    y = py;
  }
  return ops.reverse();
}

/** (lines added, lines removed), as `git diff --numstat` counts them. */
export function lineCounts(oldText: string | null, newText: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const op of editScript(splitLines(oldText), splitLines(newText))) {
    if (op.kind === 'add') added++;
    else if (op.kind === 'del') removed++;
  }
  return { added, removed };
}

/** Unified-diff hunks with `context` lines around each change. */
export function hunks(oldText: string | null, newText: string, context = 3): Hunk[] {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  const ops = editScript(a, b);
  const lines: DiffLine[] = ops.map((op) => ({
    kind: op.kind,
    text: op.kind === 'add' ? b[op.b] : a[op.a],
    oldLine: op.kind === 'add' ? 0 : op.a + 1,
    newLine: op.kind === 'del' ? 0 : op.b + 1,
  }));
  const out: Hunk[] = [];
  let i = 0;
  while (i < lines.length) {
    if (lines[i].kind === 'ctx') {
      i++;
      continue;
    }
    // A change: take context before, then changes and short gaps, then context after.
    const start = Math.max(0, i - context);
    let end = i;
    for (;;) {
      while (end < lines.length && lines[end].kind !== 'ctx') end++;
      let gap = end;
      while (gap < lines.length && lines[gap].kind === 'ctx') gap++;
      if (gap < lines.length && gap - end <= 2 * context) end = gap;
      else {
        end = Math.min(lines.length, end + context);
        break;
      }
    }
    const slice = lines.slice(start, end);
    const oldLines = slice.filter((l) => l.kind !== 'add');
    const newLines = slice.filter((l) => l.kind !== 'del');
    const firstOld = oldLines[0]?.oldLine ?? countBefore(lines, start, 'old');
    const firstNew = newLines[0]?.newLine ?? countBefore(lines, start, 'new');
    out.push({
      oldStart: oldLines.length ? firstOld : countBefore(lines, start, 'old'),
      oldCount: oldLines.length,
      newStart: newLines.length ? firstNew : countBefore(lines, start, 'new'),
      newCount: newLines.length,
      lines: slice,
    });
    i = end;
  }
  return out;
}

function countBefore(lines: DiffLine[], index: number, side: 'old' | 'new'): number {
  let n = 0;
  for (let i = 0; i < index; i++) if (side === 'old' ? lines[i].kind !== 'add' : lines[i].kind !== 'del') n++;
  return n;
}

export type RevertPlan =
  | { ok: true; start: number; end: number; text: string }
  | { ok: false; reason: 'changed' | 'already' | 'ambiguous' };

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

function commonSuffix(a: string, b: string, limit: number): number {
  const n = Math.min(a.length, b.length, limit);
  let i = 0;
  while (i < n && a.charCodeAt(a.length - 1 - i) === b.charCodeAt(b.length - 1 - i)) i++;
  return i;
}

/**
 * How to take an edit back out of `current` (what the file holds now): the
 * range of `current` to replace and its replacement, or why not.
 *
 * The edit's region is where `oldText` and `newText` differ (their common head
 * and tail set aside). The revert goes ahead when `current` still holds the
 * edit's new text there: it is `newText` itself, or whatever else changed since
 * lies wholly before or after the region, or the region with its whole lines
 * around it occurs exactly once in `current`. A new file (`oldText` null)
 * reverts only when it still holds exactly `newText` (replaced with "": the
 * caller deletes the file).
 */
export function planRevert(current: string, oldText: string | null, newText: string): RevertPlan {
  if (current === newText) return { ok: true, start: 0, end: current.length, text: oldText ?? '' };
  if (oldText === null) return { ok: false, reason: 'changed' };
  if (current === oldText) return { ok: false, reason: 'already' };
  const p = commonPrefix(oldText, newText);
  const s = commonSuffix(oldText, newText, Math.min(oldText.length, newText.length) - p);
  const oldMid = oldText.slice(p, oldText.length - s);
  const regionEnd = newText.length - s; // the edit's region in newText: [p, regionEnd)
  // What changed since, seen as one span of newText: [cp, newText.length - cs).
  const cp = commonPrefix(current, newText);
  const cs = commonSuffix(current, newText, Math.min(current.length, newText.length) - cp);
  if (cp >= regionEnd) {
    // Changes after the region only: it sits where it was.
    return { ok: true, start: p, end: regionEnd, text: oldMid };
  }
  if (newText.length - cs <= p) {
    // Changes before the region only: it sits as far from the end as it did.
    const end = current.length - s;
    return { ok: true, start: end - (regionEnd - p), end, text: oldMid };
  }
  // Changes on both sides: find the region with its whole lines around it.
  const lineStart = p === 0 ? 0 : newText.lastIndexOf('\n', p - 1) + 1;
  const nl = newText.indexOf('\n', regionEnd);
  const lineEnd = nl < 0 ? newText.length : nl + 1;
  const block = newText.slice(lineStart, lineEnd);
  if (block.length === 0) return { ok: false, reason: 'changed' };
  const at = current.indexOf(block);
  if (at < 0) return { ok: false, reason: 'changed' };
  if (current.indexOf(block, at + 1) >= 0) return { ok: false, reason: 'ambiguous' };
  const start = at + (p - lineStart);
  return { ok: true, start, end: start + (regionEnd - p), text: oldMid };
}

/** The refusal the user sees, e.g. "a.py changed since this edit; not reverted". */
export function revertRefusal(name: string, reason: Exclude<RevertPlan, { ok: true }>['reason']): string {
  switch (reason) {
    case 'already':
      return `${name} already holds the text from before this edit; nothing to revert`;
    case 'ambiguous':
      return `${name} changed since this edit and the edited lines now occur more than once; not reverted`;
    case 'changed':
      return `${name} changed since this edit; not reverted`;
  }
}
