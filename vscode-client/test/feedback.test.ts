import { describe, expect, it } from 'vitest';

import { SETTLE_MAX_MS, SETTLE_QUIET_MS, Settle, editedPaths } from '../src/feedback';
import type { SessionUpdate } from '../src/protocol';

describe('editedPaths', () => {
  it('takes the diff blocks and an applied edit of a final update, once each', () => {
    const update: SessionUpdate = {
      sessionUpdate: 'tool_call_update',
      toolCallId: 't1',
      status: 'completed',
      content: [
        { type: 'diff', path: '/p/a.json', oldText: null, newText: '{' },
        { type: 'content', content: { type: 'text', text: 'wrote' } },
        { type: 'diff', path: '/p/b.ts', oldText: 'x', newText: 'y' },
      ],
      rawOutput: { exitCode: 0, isError: false, layer: 'agent', category: null, edit: { path: '/p/a.json', applied: true } },
    };
    expect(editedPaths(update)).toEqual(['/p/a.json', '/p/b.ts']);
  });

  it('ignores live output, refused edits and other kinds', () => {
    expect(editedPaths({ sessionUpdate: 'tool_call_update', toolCallId: 't', output: { stream: 'stdout', text: 'x' } })).toEqual([]);
    expect(
      editedPaths({
        sessionUpdate: 'tool_call_update',
        toolCallId: 't',
        status: 'failed',
        rawOutput: { exitCode: 1, isError: true, layer: 'agent', category: null, edit: { path: '/p/a', applied: false } },
      }),
    ).toEqual([]);
    const call: SessionUpdate = {
      sessionUpdate: 'tool_call',
      toolCallId: 't',
      title: 'Edit a',
      kind: 'edit',
      status: 'in_progress',
      rawInput: { command: 'edit a x y', restart: false },
      locations: [{ path: '/p/a' }],
    };
    expect(editedPaths(call)).toEqual([]);
  });
});

describe('Settle', () => {
  it('sends once the diagnostics were quiet for the quiet time after a change', () => {
    const s = new Settle(1000, 1200);
    expect(s.decide(1300, false)).toBe('wait');
    s.changed(1400);
    expect(s.decide(1400 + SETTLE_QUIET_MS - 1, true)).toBe('wait');
    s.changed(1700); // still changing: the quiet time starts again
    expect(s.decide(1400 + SETTLE_QUIET_MS, true)).toBe('wait');
    expect(s.nextCheck(1900)).toBe(1700 + SETTLE_QUIET_MS - 1900);
    expect(s.decide(1700 + SETTLE_QUIET_MS, true)).toBe('send');
  });

  it('counts a change after the call started that came before the result (a fast language server)', () => {
    const s = new Settle(1000, 1200, 1100);
    expect(s.decide(1100 + SETTLE_QUIET_MS, false)).toBe('send'); // e.g. the edit fixed every problem
  });

  it('ignores changes from before the tool call', () => {
    const s = new Settle(1000, 1200, 900);
    expect(s.decide(2000, true)).toBe('wait');
  });

  it('caps the wait: sends what is there, or nothing when no language feature spoke', () => {
    const busy = new Settle(0, 100);
    for (let t = 100; t < 100 + SETTLE_MAX_MS; t += 200) busy.changed(t);
    expect(busy.decide(100 + SETTLE_MAX_MS, true)).toBe('send');
    const stale = new Settle(0, 100);
    expect(stale.decide(100 + SETTLE_MAX_MS, true)).toBe('send');
    const silent = new Settle(0, 100);
    expect(silent.nextCheck(100)).toBe(SETTLE_MAX_MS);
    expect(silent.decide(100 + SETTLE_MAX_MS, false)).toBe('skip');
  });
});
