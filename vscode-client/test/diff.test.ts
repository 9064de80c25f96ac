import { describe, expect, it } from 'vitest';

import { hunks, lineCounts, planRevert, revertRefusal } from '../src/diff';

/** Apply a revert plan the way the extension applies its WorkspaceEdit. */
function reverted(current: string, oldText: string | null, newText: string): string | { refused: string } {
  const plan = planRevert(current, oldText, newText);
  if (!plan.ok) return { refused: plan.reason };
  return current.slice(0, plan.start) + plan.text + current.slice(plan.end);
}

describe('line counts (as git diff --numstat)', () => {
  it('counts a replaced line as one added and one removed', () => {
    expect(lineCounts('x = 1\ny = 2\n', 'x = 1\ny = 3\n')).toEqual({ added: 1, removed: 1 });
  });
  it('counts a new file as all added, an emptied one as all removed', () => {
    expect(lineCounts(null, 'a\nb\nc\n')).toEqual({ added: 3, removed: 0 });
    expect(lineCounts('a\nb\n', '')).toEqual({ added: 0, removed: 2 });
  });
  it('finds the smallest change in the middle of repeated lines', () => {
    const old = ['a', 'b', 'c', 'a', 'b', 'b', 'a'].join('\n') + '\n';
    const now = ['c', 'b', 'a', 'b', 'a', 'c'].join('\n') + '\n';
    // Myers' classic example: 5 edits.
    const { added, removed } = lineCounts(old, now);
    expect(added + removed).toBe(5);
  });
  it('agrees with the server on a multi-line edit', () => {
    // events.FileDiff.line_counts gives (3, 1) for this one.
    expect(lineCounts('def f():\n    return 1\n', 'def f():\n    x = 2\n    y = 3\n    return x + y\n')).toEqual({ added: 3, removed: 1 });
  });
});

describe('unified hunks', () => {
  it('has @@ ranges and three lines of context', () => {
    const old = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const now = old.replace('line 10\n', 'LINE TEN\n');
    const hs = hunks(old, now);
    expect(hs).toHaveLength(1);
    const h = hs[0];
    expect([h.oldStart, h.oldCount, h.newStart, h.newCount]).toEqual([7, 7, 7, 7]);
    expect(h.lines.map((l) => (l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : ' ') + l.text)).toEqual([
      ' line 7',
      ' line 8',
      ' line 9',
      '-line 10',
      '+LINE TEN',
      ' line 11',
      ' line 12',
      ' line 13',
    ]);
  });
  it('makes separate hunks of far-apart changes and one of close ones', () => {
    const old = Array.from({ length: 40 }, (_, i) => `l${i}`).join('\n') + '\n';
    expect(hunks(old, old.replace('l2\n', 'X\n').replace('l30\n', 'Y\n'))).toHaveLength(2);
    expect(hunks(old, old.replace('l2\n', 'X\n').replace('l6\n', 'Y\n'))).toHaveLength(1);
  });
  it('shows a new file as one hunk from nothing', () => {
    const [h] = hunks(null, 'hello\n');
    expect([h.oldStart, h.oldCount, h.newStart, h.newCount]).toEqual([0, 0, 1, 1]);
    expect(h.lines).toEqual([{ kind: 'add', text: 'hello', oldLine: 0, newLine: 1 }]);
  });
});

describe('revert of an edit', () => {
  const old = 'alpha\nbeta\ngamma\n';
  const edited = 'alpha\nBETA\ngamma\n';

  it('restores the old text when the file still holds the new text', () => {
    expect(reverted(edited, old, edited)).toBe(old);
  });
  it('keeps what the user changed before or after the edited region', () => {
    expect(reverted('zero\nalpha\nBETA\ngamma\n', old, edited)).toBe('zero\nalpha\nbeta\ngamma\n');
    expect(reverted('alpha\nBETA\ngamma\ndelta\n', old, edited)).toBe('alpha\nbeta\ngamma\ndelta\n');
    expect(reverted('Alpha\nBETA\ngamma!\n', old, edited)).toBe('Alpha\nbeta\ngamma!\n');
  });
  it('refuses when the user typed in the region', () => {
    const plan = planRevert('alpha\nBExTA\ngamma\n', old, edited);
    expect(plan).toEqual({ ok: false, reason: 'changed' });
    expect(revertRefusal('a.txt', 'changed')).toBe('a.txt changed since this edit; not reverted');
  });
  it('refuses when the region was deleted or replaced', () => {
    expect(reverted('alpha\ngamma\n', old, edited)).toEqual({ refused: 'changed' });
    expect(reverted('something else entirely\n', old, edited)).toEqual({ refused: 'changed' });
  });
  it('says so when the file already holds the old text', () => {
    expect(reverted(old, old, edited)).toEqual({ refused: 'already' });
  });
  it('refuses when changes on both sides leave the edited lines twice', () => {
    expect(reverted('BETA\nalpha\nBETA\ngamma!\n', old, edited)).toEqual({ refused: 'ambiguous' });
  });
  it('reverts a pure insertion and a pure deletion', () => {
    expect(reverted('a\nb\nNEW\nc\n', 'a\nb\nc\n', 'a\nb\nNEW\nc\n')).toBe('a\nb\nc\n');
    expect(reverted('x\na\nc\n', 'a\nb\nc\n', 'a\nc\n')).toBe('x\na\nb\nc\n');
  });
  it('a new file reverts (to nothing: deleted) only while it holds exactly its text', () => {
    expect(planRevert('hello\n', null, 'hello\n')).toEqual({ ok: true, start: 0, end: 6, text: '' });
    expect(planRevert('hello world\n', null, 'hello\n')).toEqual({ ok: false, reason: 'changed' });
  });
});
