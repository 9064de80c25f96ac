/**
 * Against the real server: spawn `python -m synapse_lsp` (src/launch.ts) with
 * the fake Anthropic server, speak LSP, run prompts with tool calls, fold the
 * real notifications through src/state.ts and check the result.
 *
 * The recorded stream (the actions the extension would dispatch) is written
 * to test-output/recorded-stream.json, and to test/fixtures/ when
 * UPDATE_FIXTURES=1 (or when the fixture is missing): the webview test replays it,
 * and the VS Code and Neovim state tests fold it to test/fixtures/recorded-stream.facts.json.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  Commands,
  PROTOCOL_VERSION,
  protocolMismatch,
  serverProtocolVersion,
  type PromptResult,
  type SessionInfo,
  type SessionNewResult,
  type SessionUpdateParams,
} from '../src/protocol';
import { apply, foldAll, type Action } from '../src/state';
import { initialState, type ChatState } from '../src/stateModel';
import { activeSession } from '../src/stateSelectors';
import { outputText } from '../src/stateTools';
import { CLIENT_DIR, serverUnavailable, startFakeApi, startServer, tempDir, type FakeApi, type LspClient } from './harness';

const skipReason = serverUnavailable();
const FIXTURE = path.join(CLIENT_DIR, 'test', 'fixtures', 'recorded-stream.json');
const OUTPUT = path.join(CLIENT_DIR, 'test-output', 'recorded-stream.json');

const PLAN_JSON = JSON.stringify({
  explanation: 'Look, fix, test',
  plan: [
    { step: 'Look at the files', status: 'completed' },
    { step: 'Fix parse()', status: 'in_progress' },
    { step: 'Run the tests', status: 'pending' },
  ],
});

export const MALICIOUS = '<img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script>';

const SCRIPT = {
  responses: [
    {
      thinking: 'The user wants the files listed.',
      text: "I'll look around first.",
      commands: ["printf 'alpha\\nbeta\\n'; echo oops >&2", 'cat missing.txt'],
      chunk_size: 7,
    },
    { text: 'Here is the plan.', commands: [`plan '${PLAN_JSON}'`], chunk_size: 7 },
    {
      text:
        'Found **alpha** and `beta`; `missing.txt` does not exist.\n\n' +
        '```python\ndef parse(s):\n    return s.split()\n```\n\n' +
        `Raw HTML stays text: ${MALICIOUS}\n\nSee [the docs](https://example.com/docs).`,
      chunk_size: 7,
    },
    { text: 'Sleeping as asked.', commands: ['sleep 30'], chunk_size: 7 },
  ],
  fallback: { text: 'fallback answer' },
};

describe.skipIf(skipReason !== null)('real Synapse server over LSP', () => {
  let api: FakeApi;
  let client: LspClient;
  let workspace: string;
  const recorded: Action[] = [];
  const state: ChatState = initialState();
  let sessionId = '';

  const record = (action: Action): void => {
    recorded.push(action);
    apply(state, action);
  };

  beforeAll(async () => {
    const dir = tempDir('synapse-vscode-');
    workspace = path.join(dir, 'proj');
    fs.mkdirSync(workspace);
    fs.writeFileSync(path.join(workspace, 'parse.py'), 'def parse(s):\n    return s\n');
    api = await startFakeApi(SCRIPT, dir);
    client = await startServer({
      workspace,
      env: {
        ANTHROPIC_BASE_URL: api.baseUrl,
        ANTHROPIC_API_KEY: 'sk-test-dummy',
        SYNAPSE_HOME: path.join(dir, 'home'),
      },
      // No reminder about the plan's pending steps: the script's next answer is the cancel test's.
      settings: { permission: 'auto', commandTimeout: 60, todoReminder: false },
    });
    // Replayed history is recorded by the replay test, after its loadStarted.
    client.onUpdate((params: SessionUpdateParams) => {
      if (process.env.SYNAPSE_TRACE) console.log(Date.now() % 100000, JSON.stringify(params).slice(0, 150));
      if (!params.replay) record({ type: 'update', params });
    });
    record({ type: 'server', phase: 'running' });
  });

  afterAll(async () => {
    if (process.env.SYNAPSE_TRACE) console.log(client?.logs.join('\n'), client?.stderr());
    await client?.close();
    await api?.close();
  });

  it('advertises the protocol commands and speaks the protocol version this extension expects', () => {
    const commands = client.initializeResult.capabilities.executeCommandProvider?.commands ?? [];
    for (const c of Object.values(Commands)) expect(commands).toContain(c);
    expect(serverProtocolVersion(client.initializeResult)).toBe(PROTOCOL_VERSION);
    expect(protocolMismatch(client.initializeResult)).toBeNull();
  });

  it('creates a session and runs a prompt with tool calls, plan and Markdown', async () => {
    const session = await client.execute<SessionNewResult>(Commands.sessionNew, {});
    sessionId = session.sessionId;
    record({ type: 'sessionCreated', session });
    record({ type: 'promptStarted', sessionId, text: 'List the files and plan the fix' });
    const result = await client.execute<PromptResult>(Commands.sessionPrompt, {
      sessionId,
      text: 'List the files and plan the fix',
      context: { activeFile: `${session.workspaceUri ?? ''}/parse.py` },
    });
    record({ type: 'promptFinished', sessionId, result });
    expect(result.stopReason).toBe('end_turn');

    const s = activeSession(state)!;
    expect(s.running).toBe(false);
    expect(s.items[0]).toMatchObject({ kind: 'user', text: 'List the files and plan the fix' });
    const agentText = s.items.filter((i) => i.kind === 'agent').map((i) => ('text' in i ? i.text : ''));
    expect(agentText.join('')).toContain("I'll look around first.");
    expect(agentText.join('')).toContain('Found **alpha** and `beta`');
    expect(agentText.join('')).toContain(MALICIOUS);
    expect(s.items.some((i) => i.kind === 'thought')).toBe(true);

    const tools = Object.values(s.tools);
    expect(tools).toHaveLength(3);
    const [printf, cat, plan] = tools;
    expect(printf).toMatchObject({ status: 'completed', exitCode: 0, started: true });
    expect(printf.command).toContain('printf');
    expect(outputText(printf)).toContain('alpha\nbeta\n');
    expect(printf.output.some((seg) => seg.stream === 'stderr' && seg.text.includes('oops'))).toBe(true);
    expect(cat).toMatchObject({ status: 'failed', isError: true });
    expect(cat.exitCode).not.toBe(0);
    expect(plan.status).toBe('completed');
    for (const t of tools) {
      expect(t.title).not.toBe('');
      expect(t.kind).toMatch(/^(read|edit|delete|move|search|execute|think|fetch|other)$/);
    }
    expect(s.plan?.entries.map((e) => [e.content, e.status])).toEqual([
      ['Look at the files', 'completed'],
      ['Fix parse()', 'in_progress'],
      ['Run the tests', 'pending'],
    ]);
    expect(s.plan?.explanation).toBe('Look, fix, test');
    expect(s.items.filter((i) => i.kind === 'turn')).toEqual([expect.objectContaining({ stopReason: 'end_turn' })]);
    expect(s.totalUsage.outputTokens).toBeGreaterThan(0);
  });

  it('cancels a running command and the turn ends cancelled', async () => {
    record({ type: 'promptStarted', sessionId, text: 'Sleep for a while' });
    let cancelSent: Promise<unknown> | null = null;
    client.onUpdate((p) => {
      if (!cancelSent && p.update.sessionUpdate === 'tool_call' && JSON.stringify(p.update).includes('sleep 30')) {
        record({ type: 'cancelRequested', sessionId });
        cancelSent = client.execute(Commands.sessionCancel, { sessionId });
      }
    });
    const started = Date.now();
    const result = await client.execute<PromptResult>(Commands.sessionPrompt, { sessionId, text: 'Sleep for a while' });
    record({ type: 'promptFinished', sessionId, result });
    expect(cancelSent).not.toBeNull();
    expect(await cancelSent).toEqual({ cancelled: true });
    expect(result.stopReason).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(25_000); // the 30 s sleep was interrupted
    const s = activeSession(state)!;
    const sleep = Object.values(s.tools).find((t) => t.command === 'sleep 30')!;
    expect(sleep.status).toBe('cancelled');
    expect(s.running).toBe(false);
    expect(s.cancelling).toBe(false);
    expect(s.items.at(-1)).toMatchObject({ kind: 'turn', stopReason: 'cancelled' });
  });

  it('lists the session and replays it into the same transcript', async () => {
    const list = await client.execute<{ sessions: SessionInfo[] }>(Commands.sessionList, {});
    expect(list.sessions.map((x) => x.sessionId)).toContain(sessionId);
    record({ type: 'sessions', sessions: list.sessions });

    const replayActions: Action[] = [{ type: 'loadStarted', sessionId }];
    const collect = (p: SessionUpdateParams): void => {
      if (p.replay) replayActions.push({ type: 'update', params: p });
    };
    client.onUpdate(collect);
    const loaded = await client.execute<SessionNewResult>(Commands.sessionLoad, { sessionId });
    replayActions.push({ type: 'sessionLoaded', session: loaded });
    expect(loaded.sessionId).toBe(sessionId);
    expect(replayActions.length).toBeGreaterThan(10);

    const replayed = foldAll(replayActions);
    for (const action of replayActions) recorded.push(action);
    const live = state.byId[sessionId];
    const again = replayed.byId[sessionId];
    expect(again.running).toBe(false);
    const shape = (items: typeof live.items): string[] =>
      items.map((i) => (i.kind === 'tool' ? `tool:${again.tools[i.toolCallId]?.command ?? live.tools[i.toolCallId]?.command}` : i.kind));
    // Same conversation: user turns, tool calls (by command) and turn ends in the same order.
    const keep = (k: string): boolean => k === 'user' || k.startsWith('tool:') || k === 'turn';
    expect(shape(again.items).filter(keep)).toEqual(shape(live.items).filter(keep));
    expect(Object.values(again.tools).map((t) => [t.command, t.status])).toEqual(
      Object.values(live.tools).map((t) => [t.command, t.status]),
    );
    expect(again.plan?.entries).toEqual(live.plan?.entries);

    // The webview test replays exactly what the extension would have dispatched.
    fs.mkdirSync(path.dirname(OUTPUT), { recursive: true });
    fs.writeFileSync(OUTPUT, JSON.stringify(recorded, null, 1));
    if (process.env.UPDATE_FIXTURES === '1' || !fs.existsSync(FIXTURE)) {
      fs.mkdirSync(path.dirname(FIXTURE), { recursive: true });
      fs.writeFileSync(FIXTURE, JSON.stringify(recorded, null, 1) + '\n');
    }
  });

  it('reports a busy session without losing the running turn', async () => {
    const session = await client.execute<SessionNewResult>(Commands.sessionNew, {});
    const first = client.execute<PromptResult>(Commands.sessionPrompt, { sessionId: session.sessionId, text: 'one' });
    await new Promise((r) => setTimeout(r, 50));
    type RpcError = { code?: number; data?: { reason?: string } };
    const error = await client.execute(Commands.sessionPrompt, { sessionId: session.sessionId, text: 'two' }).then(
      () => null,
      (e: unknown) => e as RpcError,
    );
    await first;
    // Either the first turn was still running (busy) or it had already finished.
    if (error) {
      expect(error.code).toBe(-32803);
      expect(error.data?.reason).toBe('session_busy');
    }
  });
});

if (skipReason !== null) {
  describe('real Synapse server', () => {
    it.skip(`skipped: ${skipReason}`, () => undefined);
  });
}

describe.skipIf(skipReason !== null)('real server: edits and permission questions as VS Code gets them', () => {
  let asked = 0;
  let shownWhenDenied: string | null = null; // the question the card showed as its call was denied
  let api: FakeApi;
  let client: LspClient;
  let workspace: string;
  const state: ChatState = initialState();

  beforeAll(async () => {
    const dir = tempDir('synapse-vscode-perm-');
    workspace = path.join(dir, 'proj');
    fs.mkdirSync(workspace);
    fs.writeFileSync(path.join(workspace, 'parse.py'), 'def parse(s):\n    return s\n');
    api = await startFakeApi(
      {
        responses: [
          { text: 'Editing.', commands: ["edit parse.py 'return s' 'return s.split()'"] },
          { text: 'Now a command.', commands: ['echo hello > out.txt'] },
          { text: 'Done.' },
        ],
      },
      dir,
    );
    client = await startServer({
      workspace,
      env: { ANTHROPIC_BASE_URL: api.baseUrl, ANTHROPIC_API_KEY: 'sk-test-dummy', SYNAPSE_HOME: path.join(dir, 'home') },
      settings: { permission: 'ask-all-native' },
      applyEdit: true,
      // The question as data, as the extension gets it: shown in the card of the call it
      // names by id (folded here as the extension does), then the user clicks "Deny".
      onRequestPermission: (params) => {
        const question = { id: `q${++asked}`, message: params.message, actions: params.options.map((o) => o.title) };
        if (params.toolCallId !== null) apply(state, { type: 'permissionAsked', toolCallId: params.toolCallId, question });
        return { optionId: params.options.find((o) => o.kind === 'reject_once')?.optionId };
      },
      onApplyEdit: () => ({ applied: true }),
    });
    client.onUpdate((params) => {
      const update = params.update;
      if (update.sessionUpdate === 'tool_call_update' && update.status === 'denied') {
        shownWhenDenied = state.byId[params.sessionId]?.tools[update.toolCallId]?.question?.id ?? null;
      }
      apply(state, { type: 'update', params });
    });
  });

  afterAll(async () => {
    await client?.close();
    await api?.close();
  });

  it('sends the edit as workspace/applyEdit and asks before a native command with three buttons', async () => {
    const session = await client.execute<SessionNewResult>(Commands.sessionNew, {});
    apply(state, { type: 'sessionCreated', session });
    const result = await client.execute<PromptResult>(Commands.sessionPrompt, { sessionId: session.sessionId, text: 'fix it' });
    apply(state, { type: 'promptFinished', sessionId: session.sessionId, result });
    expect(result.stopReason).toBe('end_turn');

    // The edit: a versioned TextDocumentEdit against parse.py; nothing written behind the editor's back.
    expect(client.applyEdits).toHaveLength(1);
    const change = client.applyEdits[0].edit.documentChanges?.[0] as { textDocument: { uri: string }; edits: { newText: string }[] };
    expect(change.textDocument.uri).toMatch(/parse\.py$/);
    expect(change.edits.map((e) => e.newText).join('')).toContain('split()');
    expect(fs.readFileSync(path.join(workspace, 'parse.py'), 'utf8')).toBe('def parse(s):\n    return s\n');

    // The question, as data with the three buttons; denied → not run, exit 126.
    expect(client.messageRequests).toHaveLength(0);
    expect(client.permissionRequests).toHaveLength(1);
    const ask = client.permissionRequests[0];
    expect(ask).toMatchObject({ command: 'echo hello > out.txt', steps: ['echo hello > out.txt'], cwd: workspace });
    expect(ask.reason).toContain('native command');
    expect(ask.message).toContain('echo hello > out.txt');
    expect(ask.options.map((o) => [o.title, o.kind])).toEqual([
      ['Allow once', 'allow_once'],
      ['Allow for this session', 'allow_always'],
      ['Deny', 'reject_once'],
    ]);
    expect(fs.existsSync(path.join(workspace, 'out.txt'))).toBe(false);

    const s = state.byId[session.sessionId];
    const [edit, echo] = Object.values(s.tools);
    // Matched by id: the question named the echo's tool call, and its card showed it.
    expect(ask.toolCallId).toBe(echo.id);
    expect(shownWhenDenied).toBe('q1');
    expect(state.waitingQuestions).toEqual({});
    expect(edit).toMatchObject({ status: 'completed', kind: 'edit' });
    expect(edit.edit).toMatchObject({ applied: true });
    expect(echo).toMatchObject({ status: 'denied', exitCode: 126, category: 'permission_denied' });
    expect(echo.result ?? '').toContain('denied by the user');
  });
});
