import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import type { SessionUpdate, SessionUpdateParams } from '../src/protocol';
import { Action, apply as applyAction, foldAll as foldActions } from '../src/state';
import { initialState, type Change, type ChatState, type Item } from '../src/stateModel';
import { activeSession, displayPath, questionTarget } from '../src/stateSelectors';
import { MAX_OUTPUT_CHARS, outputText } from '../src/stateTools';

const SID = '2026-11-23T10-15-02-7f3a';

/**
 * Messages as a case writes them: only the fields it is about (the protocol's types,
 * generated from the server's, say what a real server always sends; the reducer must
 * also take what is missing in its stride). `type` and `sessionUpdate` stay required.
 */
type Loose<T> = T extends (infer E)[] ? Loose<E>[] : T extends object ? { [K in keyof T]?: Loose<T[K]> } : T;
type LooseOf<T, Tag extends keyof T> = T extends unknown ? Loose<T> & Pick<T, Tag> : never;
type LooseUpdate = LooseOf<SessionUpdate, 'sessionUpdate'>;
type LooseAction = LooseOf<Action, 'type'>;

const apply = (state: ChatState, action: LooseAction): Change => applyAction(state, action as Action);
const foldAll = (actions: Iterable<LooseAction>, state?: ChatState): ChatState =>
  foldActions(actions as Iterable<Action>, state);

function u(loose: LooseUpdate, replay = false, sessionId = SID): Action {
  const update = loose as SessionUpdate;
  const params: SessionUpdateParams = { sessionId, update };
  if (replay) params.replay = true;
  return { type: 'update', params };
}

const text = (t: string): { type: 'text'; text: string } => ({ type: 'text', text: t });

/** One realistic turn, as docs/protocol.md describes it. */
function recordedTurn(): LooseAction[] {
  return [
    { type: 'sessionCreated', session: { sessionId: SID, title: 'New chat', workspaceUri: 'file:///p' } },
    { type: 'promptStarted', sessionId: SID, text: 'Why does test_parse fail?' },
    u({ sessionUpdate: 'user_message_chunk', content: text('Why does test_parse fail?') }),
    u({ sessionUpdate: 'agent_thought_chunk', content: text('Let me look') }),
    u({ sessionUpdate: 'agent_message_chunk', content: text('The test ') }),
    u({ sessionUpdate: 'agent_message_chunk', content: text('fails because') }),
    u({
      sessionUpdate: 'tool_call',
      toolCallId: 'toolu_01A',
      title: 'Search `TODO` in src',
      kind: 'search',
      status: 'in_progress',
      rawInput: { command: 'rg -n TODO src', restart: false },
      locations: [{ path: '/p/src' }],
    }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_01A', output: { stream: 'stdout', text: 'src/a.py:3: # TODO\n' } }),
    u({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_01A', output: { stream: 'stderr', text: 'warn\n' } }),
    u({
      sessionUpdate: 'tool_call_update',
      toolCallId: 'toolu_01A',
      status: 'completed',
      content: [{ type: 'content', content: text('src/a.py:3: # TODO\n') }],
      rawOutput: { exitCode: 0, isError: false, layer: 'native', category: null },
    }),
    u({
      sessionUpdate: 'plan',
      explanation: 'Fix then test',
      entries: [
        { content: 'Reproduce the failure', priority: 'medium', status: 'completed' },
        { content: 'Fix parse()', priority: 'medium', status: 'in_progress' },
      ],
    }),
    u({ sessionUpdate: 'usage_update', usage: { inputTokens: 10, outputTokens: 5 } }),
    u({ sessionUpdate: 'agent_message_chunk', content: text(' a TODO is left.') }),
    u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn', usage: { inputTokens: 12, outputTokens: 7 } }),
    { type: 'promptFinished', sessionId: SID, result: { stopReason: 'end_turn', usage: { inputTokens: 12, outputTokens: 7 } } },
  ];
}

function kinds(items: Item[]): string[] {
  return items.map((i) => i.kind);
}

describe('state: a live turn', () => {
  it('folds chunks, tool calls, plan and usage into the transcript', () => {
    const state = foldAll(recordedTurn());
    const s = activeSession(state)!;
    expect(s.sessionId).toBe(SID);
    expect(kinds(s.items)).toEqual(['user', 'thought', 'agent', 'tool', 'agent', 'turn']);
    expect(s.items[0]).toMatchObject({ kind: 'user', text: 'Why does test_parse fail?' });
    expect(s.items[2]).toMatchObject({ kind: 'agent', text: 'The test fails because' });
    expect(s.items[4]).toMatchObject({ kind: 'agent', text: ' a TODO is left.' });
    const tool = s.tools['toolu_01A'];
    expect(tool).toMatchObject({
      title: 'Search `TODO` in src',
      kind: 'search',
      status: 'completed',
      command: 'rg -n TODO src',
      exitCode: 0,
      isError: false,
      layer: 'native',
      result: 'src/a.py:3: # TODO\n',
    });
    expect(tool.output).toEqual([
      { stream: 'stdout', text: 'src/a.py:3: # TODO\n' },
      { stream: 'stderr', text: 'warn\n' },
    ]);
    expect(s.plan?.entries.map((e) => e.status)).toEqual(['completed', 'in_progress']);
    expect(s.plan?.explanation).toBe('Fix then test');
    expect(s.running).toBe(false);
    expect(s.lastStopReason).toBe('end_turn');
    // turn_finished and the prompt result end the turn once, usage counted once.
    expect(s.items.filter((i) => i.kind === 'turn')).toHaveLength(1);
    expect(s.totalUsage.inputTokens).toBe(12);
    expect(s.totalUsage.outputTokens).toBe(7);
  });

  it('is running from the prompt until the turn ends', () => {
    const actions = recordedTurn();
    const state = initialState();
    const running: boolean[] = [];
    for (const a of actions) {
      apply(state, a);
      running.push(activeSession(state)?.running ?? false);
    }
    expect(running[0]).toBe(false); // created
    expect(running.slice(1, -2).every(Boolean)).toBe(true);
    expect(running.at(-1)).toBe(false);
  });

  it('reports what changed so a renderer patches only that', () => {
    const state = foldAll(recordedTurn().slice(0, 5));
    const s = activeSession(state)!;
    const agent = s.items.at(-1)!;
    const change = apply(state, u({ sessionUpdate: 'agent_message_chunk', content: text('more') }));
    expect(change.structure).toBe(false);
    expect([...change.items]).toEqual([agent.key]);
    const change2 = apply(
      state,
      u({ sessionUpdate: 'tool_call', toolCallId: 't9', title: 'ls', kind: 'execute', rawInput: { command: 'ls' } }),
    );
    expect(change2.structure).toBe(true);
    const change3 = apply(state, u({ sessionUpdate: 'plan', entries: [] }));
    expect(change3.plan).toBe(true);
    expect(change3.structure).toBe(false);
  });

  it('is plain JSON (posted to the webview, kept with setState)', () => {
    const state = foldAll(recordedTurn());
    expect(JSON.parse(JSON.stringify(state))).toEqual(state);
  });

  it('replaces the plan each time rather than merging', () => {
    const state = foldAll([
      ...recordedTurn(),
      u({ sessionUpdate: 'plan', entries: [{ content: 'Only step', status: 'pending' }] }),
    ]);
    expect(activeSession(state)!.plan?.entries).toEqual([{ content: 'Only step', status: 'pending' }]);
    expect(activeSession(state)!.plan?.explanation).toBeNull();
  });
});

describe('state: out-of-order tool updates', () => {
  it('keeps output that arrives before its tool_call, in order', () => {
    const state = foldAll([
      { type: 'promptStarted', sessionId: SID, text: 'go' },
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'x', output: { stream: 'stdout', text: 'one\n' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'x', output: { stream: 'stdout', text: 'two\n' } }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'x', title: 'Run make', kind: 'execute', status: 'in_progress', rawInput: { command: 'make' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'x', output: { stream: 'stdout', text: 'three\n' } }),
    ]);
    const s = state.byId[SID];
    expect(kinds(s.items)).toEqual(['user', 'tool']);
    const tool = s.tools['x'];
    expect(tool.started).toBe(true);
    expect(tool.title).toBe('Run make');
    expect(tool.status).toBe('in_progress');
    expect(outputText(tool)).toBe('one\ntwo\nthree\n');
  });

  it('shows a call that ended before it was announced as ended, and never regresses', () => {
    const state = foldAll([
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'y', status: 'failed', rawOutput: { exitCode: 2, isError: true } }),
    ]);
    expect(state.byId[SID].tools['y']).toMatchObject({ status: 'failed', started: false, exitCode: 2, title: '' });
    apply(state, u({ sessionUpdate: 'tool_call', toolCallId: 'y', title: 'Run false', kind: 'execute', status: 'in_progress', rawInput: { command: 'false' } }));
    // not a status of a tool_call_update: a foreign server's
    apply(state, u({ sessionUpdate: 'tool_call_update', toolCallId: 'y', status: 'in_progress' as never }));
    const tool = state.byId[SID].tools['y'];
    expect(tool).toMatchObject({ status: 'failed', started: true, title: 'Run false', command: 'false', isError: true });
    expect(state.byId[SID].items.filter((i) => i.kind === 'tool')).toHaveLength(1);
  });

  it('folds a refused command as denied (the denied status, or failed with permission_denied), and the turn end keeps it', () => {
    const state = foldAll([
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'd', title: 'Run echo', kind: 'execute', status: 'in_progress', rawInput: { command: 'echo x > /tmp/y' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'd', status: 'denied', rawOutput: { exitCode: 126, isError: true, category: 'permission_denied' } }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'o', title: 'Run rm', kind: 'execute', status: 'in_progress', rawInput: { command: 'rm /x' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'o', status: 'failed', rawOutput: { exitCode: 126, isError: true, category: 'permission_denied' } }),
      u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
    ]);
    expect(state.byId[SID].tools['d']).toMatchObject({ status: 'denied', exitCode: 126 });
    expect(state.byId[SID].tools['o']).toMatchObject({ status: 'denied', exitCode: 126 });
  });

  it('keeps interleaved calls apart', () => {
    const state = foldAll([
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'a', title: 'A', kind: 'execute', rawInput: { command: 'a' } }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'b', title: 'B', kind: 'execute', rawInput: { command: 'b' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'b', output: { stream: 'stdout', text: 'B1' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'a', output: { stream: 'stdout', text: 'A1' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'b', status: 'completed', rawOutput: { exitCode: 0 } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'a', output: { stream: 'stdout', text: 'A2' } }),
    ]);
    const s = state.byId[SID];
    expect(outputText(s.tools['a'])).toBe('A1A2');
    expect(outputText(s.tools['b'])).toBe('B1');
    expect(s.tools['a'].status).toBe('in_progress');
    expect(s.tools['b'].status).toBe('completed');
  });

  it('bounds live output, keeping the tail and counting what it dropped', () => {
    const chunk = 'x'.repeat(16 * 1024 - 1) + '\n';
    const actions: Action[] = [u({ sessionUpdate: 'tool_call', toolCallId: 'big', title: 'yes', kind: 'execute', rawInput: { command: 'yes' } })];
    const n = Math.ceil(MAX_OUTPUT_CHARS / chunk.length) + 5;
    for (let i = 0; i < n; i++) actions.push(u({ sessionUpdate: 'tool_call_update', toolCallId: 'big', output: { stream: 'stdout', text: chunk } }));
    actions.push(u({ sessionUpdate: 'tool_call_update', toolCallId: 'big', output: { stream: 'stderr', text: 'END' } }));
    const tool = foldAll(actions).byId[SID].tools['big'];
    const out = outputText(tool);
    expect(out.length).toBe(MAX_OUTPUT_CHARS);
    expect(tool.outputChars).toBe(MAX_OUTPUT_CHARS);
    expect(tool.outputDropped + MAX_OUTPUT_CHARS).toBe(n * chunk.length + 3);
    expect(out.endsWith('\nEND')).toBe(true);
  });

  it('nests sub-agent updates under the task card that started them', () => {
    const state = foldAll([
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'task1', title: 'Sub-agent: explore', kind: 'think', rawInput: { command: 'task:explore "find it"' } }),
      u({ sessionUpdate: 'agent_message_chunk', content: text('looking'), parentToolCallId: 'task1' }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'sub1', title: 'List', kind: 'search', rawInput: { command: 'ls' }, parentToolCallId: 'task1' }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'sub1', status: 'completed', rawOutput: { exitCode: 0 }, parentToolCallId: 'task1' }),
      u({ sessionUpdate: 'agent_message_chunk', content: text('Found it.') }),
    ]);
    const s = state.byId[SID];
    expect(kinds(s.items)).toEqual(['user', 'tool', 'agent']);
    const task = s.tools['task1'];
    expect(kinds(task.children)).toEqual(['agent', 'tool']);
    expect(s.tools['sub1'].rootKey).toBe(task.rootKey);
    const change = apply(state, u({ sessionUpdate: 'tool_call_update', toolCallId: 'sub1', output: { stream: 'stdout', text: 'late' }, parentToolCallId: 'task1' }));
    expect([...change.items]).toEqual([task.rootKey]);
    expect(change.structure).toBe(false);
  });

  it('ignores update kinds it does not know', () => {
    const state = initialState();
    apply(state, { type: 'update', params: { sessionId: SID, update: { sessionUpdate: 'future_thing' } as unknown as SessionUpdate } });
    expect(state.byId[SID].items).toEqual([]);
  });
});

describe('state: cancellation and errors', () => {
  function startedTurn(): ChatState {
    return foldAll([
      { type: 'sessionCreated', session: { sessionId: SID, title: 'New chat' } },
      { type: 'promptStarted', sessionId: SID, text: 'sleep' },
      u({ sessionUpdate: 'user_message_chunk', content: text('sleep') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 's', title: 'Run sleep 30', kind: 'execute', status: 'in_progress', rawInput: { command: 'sleep 30' } }),
    ]);
  }

  it('cancels: Stop marks cancelling, the end cancels open tool calls once', () => {
    const state = startedTurn();
    apply(state, { type: 'cancelRequested', sessionId: SID });
    expect(state.byId[SID].cancelling).toBe(true);
    expect(state.byId[SID].running).toBe(true);
    apply(state, u({ sessionUpdate: 'tool_call_update', toolCallId: 's', status: 'cancelled', rawOutput: { exitCode: 130, isError: true, category: 'cancelled' } }));
    apply(state, u({ sessionUpdate: 'turn_finished', stopReason: 'cancelled', usage: { inputTokens: 3, outputTokens: 1 } }));
    apply(state, { type: 'promptFinished', sessionId: SID, result: { stopReason: 'cancelled' } });
    const s = state.byId[SID];
    expect(s.running).toBe(false);
    expect(s.cancelling).toBe(false);
    expect(s.tools['s']).toMatchObject({ status: 'cancelled', exitCode: 130, category: 'cancelled' });
    expect(s.items.filter((i) => i.kind === 'turn')).toEqual([
      expect.objectContaining({ stopReason: 'cancelled', usage: expect.objectContaining({ inputTokens: 3 }) }),
    ]);
  });

  it('a turn that ends without closing its calls marks them cancelled', () => {
    const state = startedTurn();
    apply(state, { type: 'promptFinished', sessionId: SID, result: { stopReason: 'cancelled' } });
    expect(state.byId[SID].tools['s'].status).toBe('cancelled');
  });

  it('cancel when nothing runs changes nothing', () => {
    const state = foldAll([{ type: 'sessionCreated', session: { sessionId: SID, title: 'x' } }, { type: 'cancelRequested', sessionId: SID }]);
    expect(state.byId[SID].cancelling).toBe(false);
  });

  it('keeps the error of a failed turn', () => {
    const state = startedTurn();
    apply(state, { type: 'promptFinished', sessionId: SID, result: { stopReason: 'error', error: 'No API key: set ANTHROPIC_API_KEY' } });
    apply(state, u({ sessionUpdate: 'turn_finished', stopReason: 'error', error: 'No API key: set ANTHROPIC_API_KEY' }));
    const s = state.byId[SID];
    const turns = s.items.filter((i) => i.kind === 'turn');
    expect(turns).toEqual([expect.objectContaining({ stopReason: 'error', error: 'No API key: set ANTHROPIC_API_KEY' })]);
    expect(s.tools['s'].status).toBe('failed');
    expect(s.running).toBe(false);
  });

  it('a busy session refusal keeps the running turn and says the text is kept', () => {
    const state = startedTurn();
    apply(state, { type: 'promptFailed', sessionId: SID, message: 'session busy', busy: true, text: 'again' });
    const s = state.byId[SID];
    expect(s.running).toBe(true);
    expect(s.items.at(-1)).toMatchObject({ kind: 'error', message: expect.stringContaining('back in the input') });
  });

  it('a failed request ends the running state with its message', () => {
    const state = startedTurn();
    apply(state, { type: 'promptFailed', sessionId: SID, message: 'Unknown session', busy: false, text: 'x' });
    expect(state.byId[SID].running).toBe(false);
    expect(state.byId[SID].items.at(-1)).toMatchObject({ kind: 'error', message: 'Unknown session' });
  });

  it('a server crash ends running turns with a visible error', () => {
    const state = startedTurn();
    const change = apply(state, { type: 'server', phase: 'restarting', message: 'crashed' });
    expect(change.server).toBe(true);
    const s = state.byId[SID];
    expect(s.running).toBe(false);
    expect(s.items.at(-1)).toMatchObject({ kind: 'turn', stopReason: 'error', error: expect.stringContaining('server stopped') });
    expect(s.tools['s'].status).toBe('failed');
    expect(state.server).toEqual({ phase: 'restarting', message: 'crashed' });
  });

  it('notices are shown in place', () => {
    const state = startedTurn();
    apply(state, u({ sessionUpdate: 'notice', level: 'warning', message: 'Rate limited; retrying in 2 s' }));
    expect(state.byId[SID].items.at(-1)).toMatchObject({ kind: 'notice', level: 'warning', message: 'Rate limited; retrying in 2 s' });
  });
});

describe('state: sessions and replay', () => {
  it('replays a stored session into the same transcript as the live turn, not running', () => {
    const live = foldAll(recordedTurn());
    const liveSession = live.byId[SID];
    const updates = recordedTurn().filter((a): a is Extract<Action, { type: 'update' }> => a.type === 'update');
    const replayed = foldAll([
      { type: 'sessions', sessions: [{ sessionId: SID, title: 'Fix the failing test' }] },
      { type: 'loadStarted', sessionId: SID },
      ...updates.map((a) => u(a.params.update, true)),
    ]);
    const mid = replayed.byId[SID];
    expect(mid.running).toBe(false);
    apply(replayed, { type: 'sessionLoaded', session: { sessionId: SID, title: 'Fix the failing test', workspaceUri: 'file:///p' } });
    const s = replayed.byId[SID];
    expect(replayed.activeSessionId).toBe(SID);
    expect(s.title).toBe('Fix the failing test');
    expect(s.loaded).toBe(true);
    expect(s.running).toBe(false);
    expect(kinds(s.items)).toEqual(kinds(liveSession.items));
    expect(s.tools).toEqual(liveSession.tools);
    expect(s.plan).toEqual(liveSession.plan);
    expect(s.totalUsage).toEqual(liveSession.totalUsage);
  });

  it('loading again resets the transcript instead of doubling it', () => {
    const updates = recordedTurn().filter((a): a is Extract<Action, { type: 'update' }> => a.type === 'update');
    const load = (): Action[] => [{ type: 'loadStarted', sessionId: SID }, ...updates.map((a) => u(a.params.update, true))];
    const state = foldAll([...load(), ...load()]);
    const s = state.byId[SID];
    expect(s.items.filter((i) => i.kind === 'user')).toHaveLength(1);
    // keys keep growing so a renderer never confuses old and new nodes
    expect(Math.min(...s.items.map((i) => i.key))).toBeGreaterThan(updates.length / 2);
  });

  it('lists sessions, keeps titles in sync and moves on after a delete', () => {
    const state = foldAll([
      { type: 'sessionCreated', session: { sessionId: 'a', title: 'New chat' } },
      { type: 'sessions', sessions: [{ sessionId: 'b', title: 'Other' }, { sessionId: 'a', title: 'Renamed' }] },
    ]);
    expect(state.byId['a'].title).toBe('Renamed');
    expect(state.activeSessionId).toBe('a');
    apply(state, { type: 'sessionDeleted', sessionId: 'a' });
    expect(state.activeSessionId).toBe('b');
    expect(state.byId['a']).toBeUndefined();
    expect(state.sessions.map((s) => s.sessionId)).toEqual(['b']);
  });

  it('keeps a just-created session when a racing list does not have it yet', () => {
    const state = foldAll([
      { type: 'sessionCreated', session: { sessionId: 'new', title: 'New chat' } },
      { type: 'sessions', sessions: [{ sessionId: 'old', title: 'Old' }] },
    ]);
    expect(state.activeSessionId).toBe('new');
    expect(state.sessions.map((s) => s.sessionId)).toEqual(['new', 'old']);
  });

  it('updates for several sessions stay apart', () => {
    const state = foldAll([
      u({ sessionUpdate: 'user_message_chunk', content: text('one') }, false, 's1'),
      u({ sessionUpdate: 'user_message_chunk', content: text('two') }, false, 's2'),
      u({ sessionUpdate: 'agent_message_chunk', content: text('A') }, false, 's1'),
      u({ sessionUpdate: 'agent_message_chunk', content: text('B') }, false, 's2'),
      u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }, false, 's1'),
    ]);
    expect(state.byId['s1'].items.map((i) => ('text' in i ? i.text : i.kind))).toEqual(['one', 'A', 'turn']);
    expect(state.byId['s2'].items.map((i) => ('text' in i ? i.text : i.kind))).toEqual(['two', 'B']);
    expect(state.byId['s1'].running).toBe(false);
    expect(state.byId['s2'].running).toBe(true);
  });
});

describe('permission questions in the tool card', () => {
  const ALLOW = ['Allow once', 'Allow for this session', 'Deny'];
  const calls = (): LooseAction[] => [
    { type: 'promptStarted', sessionId: SID, text: 'go' },
    u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
    u({ sessionUpdate: 'tool_call', toolCallId: 'a', title: 'Run ls', kind: 'execute', status: 'in_progress', rawInput: { command: 'ls' } }),
    u({ sessionUpdate: 'tool_call', toolCallId: 'b', title: 'Run echo', kind: 'execute', status: 'in_progress', rawInput: { command: 'echo hi > /tmp/x' } }),
  ];
  it('finds the call the question names by id, shows it, and clears it on the answer or the end', () => {
    const state = foldAll(calls());
    expect(questionTarget(state, 'b')).toEqual({ sessionId: SID, toolCallId: 'b' });
    expect(questionTarget(state, 'nope')).toBeNull();
    expect(questionTarget(state, null)).toBeNull();
    // The prose names the other call's command, in a wording no pattern knows: the id decides.
    apply(state, { type: 'permissionAsked', toolCallId: 'b', question: { id: 'q1', message: 'May I run `ls`? (reworded)', actions: ALLOW } });
    expect(state.byId[SID].tools['b'].question?.actions).toEqual(ALLOW);
    expect(state.byId[SID].tools['a'].question).toBeNull();
    apply(state, { type: 'permissionAnswered', id: 'q1' });
    expect(state.byId[SID].tools['b'].question).toBeNull();
    apply(state, { type: 'permissionAsked', toolCallId: 'b', question: { id: 'q2', message: 'x', actions: ['Deny'] } });
    apply(state, u({ sessionUpdate: 'tool_call_update', toolCallId: 'b', status: 'denied', rawOutput: { exitCode: 126, category: 'permission_denied' } }));
    expect(state.byId[SID].tools['b']).toMatchObject({ status: 'denied', question: null });
  });
  it('keeps a question that came before its tool call, and shows it when the call arrives', () => {
    const [started, user, first, second] = calls();
    const state = foldAll([started, user, first]);
    apply(state, { type: 'permissionAsked', toolCallId: 'b', question: { id: 'q3', message: 'early', actions: ALLOW } });
    expect(state.byId[SID].tools['b']).toBeUndefined();
    apply(state, second);
    expect(state.byId[SID].tools['b'].question).toMatchObject({ id: 'q3', message: 'early' });
    expect(state.waitingQuestions).toEqual({});
    // Answered before its call arrived: nothing is left to show.
    apply(state, { type: 'permissionAsked', toolCallId: 'c', question: { id: 'q4', message: 'gone', actions: ALLOW } });
    apply(state, { type: 'permissionAnswered', id: 'q4' });
    apply(state, u({ sessionUpdate: 'tool_call', toolCallId: 'c', title: 'Run x', kind: 'execute', status: 'in_progress', rawInput: { command: 'x' } }));
    expect(state.byId[SID].tools['c'].question).toBeNull();
  });
});

describe('paths as the chat shows them', () => {
  it('are normalised and workspace-relative when inside it', () => {
    expect(displayPath('/home/me/ws/src/a.py', 'file:///home/me/ws')).toBe('src/a.py');
    expect(displayPath('/home/me/ws/../outside.txt', 'file:///home/me/ws')).toBe('/home/me/outside.txt');
    expect(displayPath('/home/me/ws/./src//b.py', 'file:///home/me/ws/')).toBe('src/b.py');
    expect(displayPath('src/../c.py', 'file:///home/me/ws')).toBe('c.py');
    expect(displayPath('/home/me/ws', 'file:///home/me/ws')).toBe('.');
    expect(displayPath('/home/me/wsx/a', 'file:///home/me/ws')).toBe('/home/me/wsx/a');
    expect(displayPath('/tmp/My%20File', 'file:///home/me/my%20ws')).toBe('/tmp/My%20File');
    expect(displayPath('/home/me/my ws/a', 'file:///home/me/my%20ws')).toBe('a');
    expect(displayPath('/a/b', null)).toBe('/a/b');
  });
});

describe('state: edit diffs and the turn summary', () => {
  const diff = (path: string, oldText: string | null, newText: string) => ({ type: 'diff' as const, path, oldText, newText });
  function editTurn(): LooseAction[] {
    return [
      { type: 'sessionCreated', session: { sessionId: SID, title: 'New chat', workspaceUri: 'file:///p' } },
      { type: 'promptStarted', sessionId: SID, text: 'edit' },
      u({ sessionUpdate: 'user_message_chunk', content: text('edit') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'e1', title: 'Edit a.py', kind: 'edit', status: 'in_progress', rawInput: { command: "edit a.py '1' '2'" } }),
      u({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'e1',
        status: 'completed',
        content: [diff('/p/a.py', 'x = 1\ny = 1\n', 'x = 2\ny = 1\nz = 3\n'), { type: 'content', content: text('edited a.py') }],
        rawOutput: { exitCode: 0, isError: false },
      }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'e2', title: 'Write files', kind: 'edit', status: 'in_progress', rawInput: { command: 'write new.txt hi && edit a.py y Y' } }),
      u({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'e2',
        status: 'completed',
        content: [diff('/p/new.txt', null, 'hi\n'), diff('/p/a.py', 'x = 2\ny = 1\nz = 3\n', 'x = 2\nY = 1\nz = 3\n'), { type: 'content', content: text('ok') }],
      }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'r1', title: 'List', kind: 'execute', status: 'in_progress', rawInput: { command: 'ls' } }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'r1', status: 'completed', content: [{ type: 'content', content: text('a.py\n') }] }),
      u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
      { type: 'promptFinished', sessionId: SID, result: { stopReason: 'end_turn' } },
    ];
  }

  it('keeps each call\'s diffs with their +/- counts; the result text leaves them out', () => {
    const session = activeSession(foldAll(editTurn()))!;
    expect(session.tools.e1.diffs).toEqual([{ path: '/p/a.py', oldText: 'x = 1\ny = 1\n', newText: 'x = 2\ny = 1\nz = 3\n', added: 2, removed: 1 }]);
    expect(session.tools.e1.result).toBe('edited a.py');
    expect(session.tools.e2.diffs?.map((d) => [d.path, d.oldText, d.added, d.removed])).toEqual([
      ['/p/new.txt', null, 1, 0],
      ['/p/a.py', 'x = 2\ny = 1\nz = 3\n', 1, 1],
    ]);
    expect(session.tools.r1.diffs).toEqual([]);
  });

  it('ends a turn that changed files with the changed files, merged per file from first to last text', () => {
    const session = activeSession(foldAll(editTurn()))!;
    const turn = session.items.at(-1);
    expect(turn?.kind).toBe('turn');
    // a.py: 'x = 1\ny = 1\n' -> 'x = 2\nY = 1\nz = 3\n' is +3 -2; the turn end is folded once.
    expect(turn?.kind === 'turn' && turn.changes).toEqual([
      { path: '/p/a.py', created: false, added: 3, removed: 2 },
      { path: '/p/new.txt', created: true, added: 1, removed: 0 },
    ]);
    expect(session.items.filter((i) => i.kind === 'turn')).toHaveLength(1);
  });

  it('counts only the turn\'s own calls, and none for a turn that changed nothing', () => {
    const state = foldAll(editTurn());
    foldAll(
      [
        { type: 'promptStarted', sessionId: SID, text: 'again' },
        u({ sessionUpdate: 'user_message_chunk', content: text('again') }),
        u({ sessionUpdate: 'tool_call', toolCallId: 'e3', title: 'Edit b', kind: 'edit', status: 'in_progress' }),
        u({ sessionUpdate: 'tool_call_update', toolCallId: 'e3', status: 'completed', content: [diff('/p/b.txt', 'b\n', 'B\n')] }),
        u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
        { type: 'promptStarted', sessionId: SID, text: 'talk' },
        u({ sessionUpdate: 'user_message_chunk', content: text('talk') }),
        u({ sessionUpdate: 'agent_message_chunk', content: text('nothing to change') }),
        u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
      ],
      state,
    );
    const turns = activeSession(state)!.items.filter((i) => i.kind === 'turn');
    expect(turns.map((t) => (t.kind === 'turn' ? (t.changes ?? []).map((c) => c.path) : null))).toEqual([['/p/a.py', '/p/new.txt'], ['/p/b.txt'], []]);
    expect(turns[2].kind === 'turn' && 'changes' in turns[2]).toBe(false);
  });

  it('counts a sub-agent\'s edits in its parent turn and leaves out a file changed and changed back', () => {
    const state = foldAll([
      { type: 'sessionCreated', session: { sessionId: SID, title: 'New chat', workspaceUri: 'file:///p' } },
      { type: 'promptStarted', sessionId: SID, text: 'go' },
      u({ sessionUpdate: 'user_message_chunk', content: text('go') }),
      u({ sessionUpdate: 'tool_call', toolCallId: 't1', title: 'Task', kind: 'other', status: 'in_progress' }),
      u({ sessionUpdate: 'tool_call', toolCallId: 's1', parentToolCallId: 't1', title: 'Edit', kind: 'edit', status: 'in_progress' }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 's1', parentToolCallId: 't1', status: 'completed', content: [diff('/p/c.txt', 'c\n', 'C\n'), diff('/p/d.txt', 'd\n', 'D\n')] }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 't1', status: 'completed' }),
      u({ sessionUpdate: 'tool_call', toolCallId: 'e9', title: 'Edit', kind: 'edit', status: 'in_progress' }),
      u({ sessionUpdate: 'tool_call_update', toolCallId: 'e9', status: 'completed', content: [diff('/p/d.txt', 'D\n', 'd\n')] }),
      u({ sessionUpdate: 'turn_finished', stopReason: 'end_turn' }),
    ]);
    const turn = activeSession(state)!.items.at(-1);
    expect(turn?.kind === 'turn' && turn.changes).toEqual([{ path: '/p/c.txt', created: false, added: 1, removed: 1 }]);
  });
});

describe('state: the recorded real-server stream (the Neovim state spec folds it too)', () => {
  // Recorded by test/server.test.ts; the facts are shared with nvim-client/tests/state_spec.lua.
  const fixture = (name: string): unknown =>
    JSON.parse(fs.readFileSync(fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url)), 'utf8'));
  const stream = fixture('recorded-stream.json') as Action[];
  const facts = fixture('recorded-stream.facts.json') as {
    title: string;
    prompts: string[];
    thoughts: string[];
    agentText: string[];
    tools: { id: string; title: string; kind: string; command?: string; status: string; exitCode?: number; outputLines?: string[] }[];
    plan: { explanation: string; entries: { content: string; status: string }[] };
    stopReasons: string[];
  };
  const loadAt = stream.findIndex((a) => a.type === 'loadStarted');
  const sessionId = stream.find((a): a is Extract<Action, { type: 'sessionCreated' }> => a.type === 'sessionCreated')!.session.sessionId;

  function expectFacts(state: ChatState): void {
    const s = state.byId[sessionId];
    const texts = (kind: 'user' | 'agent' | 'thought'): string[] =>
      s.items.flatMap((i) => (i.kind === kind ? [i.text] : []));
    expect(texts('user')).toEqual(facts.prompts);
    for (const t of facts.thoughts) expect(texts('thought').join('\n')).toContain(t);
    for (const t of facts.agentText) expect(texts('agent').join('\n')).toContain(t);
    expect(Object.keys(s.tools)).toEqual(facts.tools.map((t) => t.id));
    for (const fact of facts.tools) {
      const tool = s.tools[fact.id];
      expect(tool).toMatchObject({ title: fact.title, kind: fact.kind, status: fact.status });
      if (fact.command !== undefined) expect(tool.command).toBe(fact.command);
      if (fact.exitCode !== undefined) expect(tool.exitCode).toBe(fact.exitCode);
      for (const line of fact.outputLines ?? []) expect(outputText(tool).split('\n')).toContain(line);
    }
    expect(s.plan?.explanation).toBe(facts.plan.explanation);
    expect(s.plan?.entries.map(({ content, status }) => ({ content, status }))).toEqual(facts.plan.entries);
    expect(s.items.flatMap((i) => (i.kind === 'turn' ? [i.stopReason] : []))).toEqual(facts.stopReasons);
    expect(s.running).toBe(false);
  }

  it('shows the facts after the live turns', () => {
    expect(loadAt).toBeGreaterThan(0);
    expectFacts(foldAll(stream.slice(0, loadAt)));
  });

  it('shows the same facts after the replay, and the stored title', () => {
    const state = foldAll(stream);
    expectFacts(state);
    expect(state.byId[sessionId].title).toBe(facts.title);
  });
});
