/**
 * Chat state: folds `synapse/sessionUpdate` notifications and command results
 * into what the chat view renders.
 *
 * Pure TypeScript: no `vscode` import, no I/O, no timers. The extension host
 * folds every action to keep the authoritative state (so nothing is lost while
 * the view is hidden), the webview folds the same actions to render, and the
 * tests fold recorded streams.
 *
 * `apply` mutates the state in place (streaming thousands of deltas must not
 * copy the transcript each time) and returns what changed, so a renderer can
 * patch only those parts. The state is plain JSON: it can be posted to a
 * webview and stored with `setState`.
 */

import { lineCounts } from './diff';
import type {
  DiffContent,
  PlanEntry,
  PromptResult,
  SessionInfo,
  SessionNewResult,
  SessionUpdate,
  SessionUpdateParams,
  StopReason,
  ToolCall,
  ToolKind,
  ToolLocation,
  ToolStatus,
  Usage,
} from './protocol';

/** Per tool call, the live output kept for display (the tail; the head is counted). */
export const MAX_OUTPUT_CHARS = 200_000;

export interface OutputSegment {
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ToolCallState {
  id: string;
  /** False until the `tool_call` itself arrived (its output may come first). */
  started: boolean;
  title: string;
  kind: ToolKind;
  status: ToolStatus;
  command: string;
  restart: boolean;
  locations: ToolLocation[];
  output: OutputSegment[];
  outputChars: number;
  /** Characters dropped from the head of `output` to respect MAX_OUTPUT_CHARS. */
  outputDropped: number;
  /** What the model was given (bounded by the server). */
  result: string | null;
  exitCode: number | null;
  isError: boolean;
  layer: string | null;
  category: string | null;
  edit: { path: string; applied: boolean } | null;
  /** Files the call changed, whole texts (absent in snapshots older than diffs). */
  diffs?: FileDiffState[];
  parentToolCallId: string | null;
  /** A permission question about this call waiting for the user's answer. */
  question: PermissionQuestion | null;
  /** Sub-agent transcript (updates whose parentToolCallId is this call). */
  children: Item[];
  /** Key of the top-level transcript item that displays this call. */
  rootKey: number;
}

/** What a tool call's built-ins changed in one file (the server's `diff` block), counted. */
export interface FileDiffState {
  path: string;
  /** The whole text before; null: the call created the file. */
  oldText: string | null;
  newText: string;
  added: number;
  removed: number;
}

/** One line of a turn's summary: a file the turn's tool calls changed. */
export interface ChangedFile {
  path: string;
  added: number;
  removed: number;
  created: boolean;
}

/**
 * The server's permission question (`synapse/requestPermission`), shown in the card of
 * the tool call it names by id. `id` is this client's own (an answer finds it by that).
 */
export interface PermissionQuestion {
  id: string;
  /** The question as prose, to show (never parsed). */
  message: string;
  /** The buttons' titles, in order. */
  actions: string[];
}

export type Item =
  | { kind: 'user'; key: number; text: string; replay: boolean }
  | { kind: 'agent'; key: number; text: string }
  | { kind: 'thought'; key: number; text: string }
  | { kind: 'tool'; key: number; toolCallId: string }
  | { kind: 'notice'; key: number; level: 'info' | 'warning' | 'error'; message: string }
  | { kind: 'error'; key: number; message: string }
  | {
      kind: 'turn';
      key: number;
      stopReason: StopReason;
      usage: Usage | null;
      error: string | null;
      /** Files the turn's tool calls changed (first text before → last text after). */
      changes?: ChangedFile[];
    };

export interface PlanState {
  entries: PlanEntry[];
  explanation: string | null;
}

export interface SessionState {
  sessionId: string;
  title: string;
  workspaceUri: string | null;
  items: Item[];
  tools: Record<string, ToolCallState>;
  plan: PlanState | null;
  /** A turn is running (input disabled, Stop shown). */
  running: boolean;
  cancelling: boolean;
  /** Between the user's message and the end of the turn. */
  turnOpen: boolean;
  turnUsage: Usage | null;
  totalUsage: Usage;
  lastStopReason: StopReason | null;
  /** History replayed or created here (a listed session not loaded yet is false). */
  loaded: boolean;
  nextKey: number;
}

export type ServerPhase = 'starting' | 'running' | 'restarting' | 'stopped' | 'failed';

/** A session in the list: the server's `SessionInfo`, or one this client just made (no dates yet). */
export type SessionEntry = Omit<SessionInfo, 'createdAt' | 'updatedAt'> &
  Partial<Pick<SessionInfo, 'createdAt' | 'updatedAt'>>;

export interface ChatState {
  sessions: SessionEntry[];
  activeSessionId: string | null;
  byId: Record<string, SessionState>;
  server: { phase: ServerPhase; message: string | null };
  /**
   * Questions about tool calls not announced yet, by tool call id: the server may ask
   * before the call's `tool_call` update arrives; the card shows it when it does.
   */
  waitingQuestions?: Record<string, PermissionQuestion>;
}

export type Action =
  | { type: 'update'; params: SessionUpdateParams }
  | { type: 'sessions'; sessions: SessionInfo[] }
  | { type: 'sessionCreated'; session: SessionNewResult }
  | { type: 'loadStarted'; sessionId: string }
  | { type: 'sessionLoaded'; session: SessionNewResult }
  | { type: 'sessionDeleted'; sessionId: string }
  | { type: 'select'; sessionId: string | null }
  | { type: 'promptStarted'; sessionId: string; text: string }
  | { type: 'promptFinished'; sessionId: string; result: PromptResult }
  | { type: 'promptFailed'; sessionId: string; message: string; busy: boolean; text: string }
  | { type: 'cancelRequested'; sessionId: string }
  | { type: 'server'; phase: ServerPhase; message?: string | null }
  | { type: 'permissionAsked'; toolCallId: string; question: PermissionQuestion }
  | { type: 'permissionAnswered'; id: string };

/** What an `apply` changed; a renderer patches only these. */
export interface Change {
  /** The sessions list or the selection changed. */
  sessions: boolean;
  /** The session whose transcript/plan/running state changed, if any. */
  sessionId: string | null;
  /** Keys of top-level items whose content changed. */
  items: Set<number>;
  /** Items were added, removed or reset: reconcile the list. */
  structure: boolean;
  plan: boolean;
  /** running / cancelling / usage changed. */
  status: boolean;
  server: boolean;
}

export function emptyChange(): Change {
  return {
    sessions: false,
    sessionId: null,
    items: new Set(),
    structure: false,
    plan: false,
    status: false,
    server: false,
  };
}

export function initialState(): ChatState {
  return {
    sessions: [],
    activeSessionId: null,
    byId: {},
    server: { phase: 'starting', message: null },
    waitingQuestions: {},
  };
}

const ZERO_USAGE: Usage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheCreationInputTokens: 0,
  cacheReadInputTokens: 0,
};

export function newSession(sessionId: string, title = 'New chat', workspaceUri: string | null = null): SessionState {
  return {
    sessionId,
    title,
    workspaceUri,
    items: [],
    tools: {},
    plan: null,
    running: false,
    cancelling: false,
    turnOpen: false,
    turnUsage: null,
    totalUsage: { ...ZERO_USAGE },
    lastStopReason: null,
    loaded: false,
    nextKey: 1,
  };
}

const TERMINAL: ReadonlySet<ToolStatus> = new Set(['completed', 'failed', 'cancelled', 'denied']);

/** `rawOutput.category` of a command the permission rule or the user refused. */
export const PERMISSION_DENIED = 'permission_denied';

export function isTerminal(status: ToolStatus): boolean {
  return TERMINAL.has(status);
}

function ensureSession(state: ChatState, sessionId: string): SessionState {
  let session = state.byId[sessionId];
  if (!session) {
    const info = state.sessions.find((s) => s.sessionId === sessionId);
    session = newSession(sessionId, info?.title ?? 'New chat', info?.workspaceUri ?? null);
    state.byId[sessionId] = session;
  }
  return session;
}

function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheCreationInputTokens: (a.cacheCreationInputTokens ?? 0) + (b.cacheCreationInputTokens ?? 0),
    cacheReadInputTokens: (a.cacheReadInputTokens ?? 0) + (b.cacheReadInputTokens ?? 0),
  };
}

/** Fold one action into `state` (in place); returns what changed. */
export function apply(state: ChatState, action: Action): Change {
  const change = emptyChange();
  switch (action.type) {
    case 'update':
      applyUpdate(state, action.params, change);
      break;
    case 'sessions': {
      state.sessions = action.sessions.map((s) => ({ ...s }));
      for (const info of state.sessions) {
        const live = state.byId[info.sessionId];
        if (live) {
          live.title = info.title;
          live.workspaceUri = info.workspaceUri ?? live.workspaceUri;
        }
      }
      if (state.activeSessionId && !state.sessions.some((s) => s.sessionId === state.activeSessionId)) {
        // Created here but not listed yet (the list raced the creation): keep it.
        const live = state.byId[state.activeSessionId];
        if (live) state.sessions.unshift(infoOf(live));
        else state.activeSessionId = null;
      }
      change.sessions = true;
      break;
    }
    case 'sessionCreated': {
      const { sessionId, title, workspaceUri } = action.session;
      const session = ensureSession(state, sessionId);
      session.title = title;
      session.workspaceUri = workspaceUri ?? null;
      session.loaded = true;
      upsertInfo(state, infoOf(session));
      state.activeSessionId = sessionId;
      change.sessions = true;
      markSession(change, sessionId, true);
      break;
    }
    case 'loadStarted': {
      const old = state.byId[action.sessionId];
      const fresh = newSession(action.sessionId, old?.title, old?.workspaceUri ?? null);
      // Keep the key counter moving so a renderer never reuses a key for new content.
      fresh.nextKey = old?.nextKey ?? 1;
      state.byId[action.sessionId] = fresh;
      state.activeSessionId = action.sessionId;
      change.sessions = true;
      markSession(change, action.sessionId, true);
      change.plan = true;
      change.status = true;
      break;
    }
    case 'sessionLoaded': {
      const { sessionId, title, workspaceUri } = action.session;
      const session = ensureSession(state, sessionId);
      session.title = title;
      session.workspaceUri = workspaceUri ?? session.workspaceUri;
      session.loaded = true;
      upsertInfo(state, infoOf(session));
      state.activeSessionId = sessionId;
      change.sessions = true;
      markSession(change, sessionId, false);
      change.status = true;
      break;
    }
    case 'sessionDeleted': {
      delete state.byId[action.sessionId];
      state.sessions = state.sessions.filter((s) => s.sessionId !== action.sessionId);
      if (state.activeSessionId === action.sessionId) {
        state.activeSessionId = state.sessions[0]?.sessionId ?? null;
      }
      change.sessions = true;
      change.structure = true;
      change.plan = true;
      change.status = true;
      break;
    }
    case 'select': {
      state.activeSessionId = action.sessionId;
      change.sessions = true;
      change.structure = true;
      change.plan = true;
      change.status = true;
      change.sessionId = action.sessionId;
      break;
    }
    case 'promptStarted': {
      const session = ensureSession(state, action.sessionId);
      session.running = true;
      session.cancelling = false;
      session.loaded = true;
      markSession(change, action.sessionId, false);
      change.status = true;
      break;
    }
    case 'promptFinished': {
      const session = ensureSession(state, action.sessionId);
      finishTurn(session, action.result.stopReason, action.result.usage ?? null, action.result.error ?? null, change);
      markSession(change, action.sessionId, false);
      break;
    }
    case 'promptFailed': {
      const session = ensureSession(state, action.sessionId);
      if (!action.busy) {
        session.running = false;
        session.cancelling = false;
      }
      const message = action.busy
        ? 'This chat is still running a turn; your message was not sent (it is back in the input).'
        : action.message;
      session.items.push({ kind: 'error', key: session.nextKey++, message });
      markSession(change, action.sessionId, true);
      change.status = true;
      break;
    }
    case 'cancelRequested': {
      const session = ensureSession(state, action.sessionId);
      if (session.running) session.cancelling = true;
      markSession(change, action.sessionId, false);
      change.status = true;
      break;
    }
    case 'permissionAsked': {
      const question = { ...action.question, actions: [...action.question.actions] };
      const target = questionTarget(state, action.toolCallId);
      if (!target) {
        (state.waitingQuestions ??= {})[action.toolCallId] = question;
        break;
      }
      const tool = state.byId[target.sessionId].tools[action.toolCallId];
      if (isTerminal(tool.status)) break;
      tool.question = question;
      change.items.add(tool.rootKey);
      change.sessionId = target.sessionId;
      break;
    }
    case 'permissionAnswered': {
      for (const [callId, waiting] of Object.entries(state.waitingQuestions ?? {})) {
        if (waiting.id === action.id) delete state.waitingQuestions?.[callId];
      }
      for (const session of Object.values(state.byId)) {
        for (const tool of Object.values(session.tools)) {
          if (tool.question?.id === action.id) {
            tool.question = null;
            change.items.add(tool.rootKey);
            change.sessionId = session.sessionId;
          }
        }
      }
      break;
    }
    case 'server': {
      state.server = { phase: action.phase, message: action.message ?? null };
      change.server = true;
      if (action.phase !== 'running') {
        // The server process is gone: no turn is running any more.
        for (const session of Object.values(state.byId)) {
          if (session.running || session.turnOpen) {
            const message =
              action.phase === 'starting' ? null : 'The Synapse server stopped during this turn.';
            finishTurn(session, 'error', null, message, change);
            if (session.sessionId === state.activeSessionId) markSession(change, session.sessionId, false);
          }
        }
      }
      break;
    }
  }
  return change;
}

function infoOf(session: SessionState): SessionEntry {
  return {
    sessionId: session.sessionId,
    title: session.title,
    workspaceUri: session.workspaceUri,
    busy: session.running,
  };
}

function upsertInfo(state: ChatState, info: SessionEntry): void {
  const index = state.sessions.findIndex((s) => s.sessionId === info.sessionId);
  if (index >= 0) state.sessions[index] = { ...state.sessions[index], ...info };
  else state.sessions.unshift(info);
}

function markSession(change: Change, sessionId: string, structure: boolean): void {
  change.sessionId = sessionId;
  if (structure) change.structure = true;
}

function applyUpdate(state: ChatState, params: SessionUpdateParams, change: Change): void {
  const session = ensureSession(state, params.sessionId);
  const update = params.update;
  const replay = params.replay === true;
  change.sessionId = params.sessionId;
  if (replay) session.loaded = true;
  // Every kind but turn_finished may carry it (a sub-agent's update).
  const parentId = (update as { parentToolCallId?: string | null }).parentToolCallId ?? null;
  const parent = parentId ? toolFor(session, parentId, null, change) : null;
  const items = parent ? parent.children : session.items;
  const markItem = (item: Item): void => {
    if (parent) change.items.add(parent.rootKey);
    else change.items.add(item.key);
  };
  const push = (item: Item): void => {
    items.push(item);
    if (parent) change.items.add(parent.rootKey);
    else change.structure = true;
  };

  switch (update.sessionUpdate) {
    case 'user_message_chunk': {
      const text = update.content?.text ?? '';
      const last = items[items.length - 1];
      if (last && last.kind === 'user' && !parent && session.turnOpen) {
        last.text += text;
        markItem(last);
      } else {
        if (!parent) openTurn(session, replay, change);
        push({ kind: 'user', key: session.nextKey++, text, replay });
      }
      break;
    }
    case 'agent_message_chunk':
    case 'agent_thought_chunk': {
      const kind = update.sessionUpdate === 'agent_message_chunk' ? 'agent' : 'thought';
      const text = update.content?.text ?? '';
      if (!parent && !session.turnOpen && !replay) openTurn(session, replay, change);
      const last = items[items.length - 1];
      if (last && last.kind === kind) {
        last.text += text;
        markItem(last);
      } else {
        push({ kind, key: session.nextKey++, text });
      }
      break;
    }
    case 'tool_call': {
      const tool = toolFor(session, update.toolCallId, parentId, change, items, push);
      tool.started = true;
      if (update.title !== undefined) tool.title = update.title;
      if (update.kind !== undefined) tool.kind = update.kind;
      if (update.rawInput?.command !== undefined) tool.command = String(update.rawInput.command);
      if (update.rawInput?.restart !== undefined) tool.restart = Boolean(update.rawInput.restart);
      const waiting = state.waitingQuestions?.[update.toolCallId];
      if (waiting) {
        // Asked before this update arrived: the card shows it now.
        delete state.waitingQuestions?.[update.toolCallId];
        if (!isTerminal(tool.status)) tool.question = waiting;
      }
      if (update.locations) tool.locations = update.locations;
      if (!tool.title) tool.title = tool.command || 'Tool call';
      // A late `tool_call` (after its end) must not bring a finished card back to life.
      if (!isTerminal(tool.status)) tool.status = update.status ?? 'in_progress';
      change.items.add(tool.rootKey);
      break;
    }
    case 'tool_call_update': {
      const tool = toolFor(session, update.toolCallId, parentId, change, items, push);
      // ACP's update may also retitle a call; Synapse's server sends none of these.
      const acp = update as Partial<Pick<ToolCall, 'title' | 'kind' | 'locations'>>;
      if (acp.title !== undefined) tool.title = acp.title;
      if (acp.kind !== undefined) tool.kind = acp.kind;
      if (acp.locations) tool.locations = acp.locations;
      if (update.output) appendOutput(tool, update.output.stream, update.output.text ?? '');
      if (update.content) {
        tool.result = update.content
          .map((c) => (c?.type === 'content' && c.content?.type === 'text' ? c.content.text : ''))
          .join('');
        const diffs = update.content.filter((c): c is DiffContent => c?.type === 'diff' && typeof c.path === 'string');
        if (diffs.length > 0) tool.diffs = diffs.map(fileDiff);
      }
      if (update.rawOutput) {
        const raw = update.rawOutput;
        if (raw.exitCode !== undefined) tool.exitCode = raw.exitCode;
        if (raw.isError !== undefined) tool.isError = Boolean(raw.isError);
        if (raw.layer !== undefined) tool.layer = raw.layer ?? null;
        if (raw.category !== undefined) tool.category = raw.category ?? null;
        if (raw.edit) tool.edit = { path: String(raw.edit.path), applied: Boolean(raw.edit.applied) };
      }
      if (update.status !== undefined && !(isTerminal(tool.status) && !isTerminal(update.status))) {
        tool.status = update.status;
      }
      if (isTerminal(tool.status)) tool.question = null;
      // A server older than the `denied` status says `failed` with the category: same thing.
      if (tool.status === 'failed' && tool.category === PERMISSION_DENIED) tool.status = 'denied';
      change.items.add(tool.rootKey);
      break;
    }
    case 'plan': {
      const plan: PlanState = {
        entries: (update.entries ?? []).map((e) => ({ ...e })),
        explanation: update.explanation ?? null,
      };
      if (parent) {
        // A sub-agent's plan is its own business; show it inside its card.
        push({
          kind: 'notice',
          key: session.nextKey++,
          level: 'info',
          message: 'Plan: ' + plan.entries.map((e) => `${checkMark(e.status)} ${e.content}`).join('; '),
        });
      } else {
        session.plan = plan;
        change.plan = true;
      }
      break;
    }
    case 'usage_update': {
      if (!parent) {
        session.turnUsage = { ...update.usage };
        change.status = true;
      }
      break;
    }
    case 'notice': {
      push({
        kind: 'notice',
        key: session.nextKey++,
        level: update.level ?? 'info',
        message: update.message ?? '',
      });
      break;
    }
    case 'turn_finished': {
      if (parent) break;
      finishTurn(session, update.stopReason, update.usage ?? null, update.error ?? null, change);
      break;
    }
    default: {
      // Unknown update kinds (a newer server) are ignored, never fatal.
      const unknown: { sessionUpdate?: unknown } = update as SessionUpdate;
      void unknown;
    }
  }
}

function checkMark(status: PlanEntry['status']): string {
  return status === 'completed' ? '[x]' : status === 'in_progress' ? '[~]' : '[ ]';
}

function openTurn(session: SessionState, replay: boolean, change: Change): void {
  session.turnOpen = true;
  session.turnUsage = null;
  if (!replay) {
    session.running = true;
    session.cancelling = false;
  }
  change.status = true;
}

function finishTurn(
  session: SessionState,
  stopReason: StopReason,
  usage: Usage | null,
  error: string | null,
  change: Change,
): void {
  const wasOpen = session.turnOpen || session.running;
  session.running = false;
  session.cancelling = false;
  change.status = true;
  if (!wasOpen) {
    // The notification and the prompt result both end the turn: fold once, but
    // let the second one fill in what the first lacked.
    const last = session.items[session.items.length - 1];
    if (last && last.kind === 'turn') {
      if (!last.usage && usage) last.usage = { ...usage };
      if (!last.error && error) last.error = error;
      change.items.add(last.key);
    }
    return;
  }
  session.turnOpen = false;
  session.lastStopReason = stopReason;
  const finalUsage = usage ?? session.turnUsage;
  if (finalUsage) session.totalUsage = addUsage(session.totalUsage, finalUsage);
  session.turnUsage = finalUsage ? { ...finalUsage } : null;
  // Tool calls the turn left open did not finish.
  const leftover: ToolStatus = stopReason === 'error' ? 'failed' : 'cancelled';
  for (const tool of Object.values(session.tools)) {
    if (!isTerminal(tool.status)) {
      tool.status = leftover;
      tool.question = null;
      change.items.add(tool.rootKey);
    }
  }
  const changes = turnChanges(session);
  session.items.push({
    kind: 'turn',
    key: session.nextKey++,
    stopReason,
    usage: finalUsage ? { ...finalUsage } : null,
    error,
    ...(changes.length > 0 ? { changes } : {}),
  });
  change.structure = true;
}

function fileDiff(d: DiffContent): FileDiffState {
  const oldText = typeof d.oldText === 'string' ? d.oldText : null;
  const newText = typeof d.newText === 'string' ? d.newText : '';
  return { path: d.path, oldText, newText, ...lineCounts(oldText, newText) };
}

/**
 * The files the current turn's tool calls (sub-agents' included) changed: the
 * tool items since the last turn end, merged per file from the first text before
 * to the last text after, in the order first changed. A file changed and changed
 * back is left out.
 */
function turnChanges(session: SessionState): ChangedFile[] {
  const tools: ToolCallState[] = [];
  const collect = (items: Item[]): void => {
    for (const item of items) {
      if (item.kind !== 'tool') continue;
      const tool = session.tools[item.toolCallId];
      if (!tool) continue;
      tools.push(tool);
      collect(tool.children);
    }
  };
  let start = session.items.length;
  while (start > 0 && session.items[start - 1].kind !== 'turn') start--;
  collect(session.items.slice(start));
  const merged = new Map<string, { oldText: string | null; newText: string }>();
  for (const tool of tools) {
    for (const d of tool.diffs ?? []) {
      const seen = merged.get(d.path);
      if (seen) seen.newText = d.newText;
      else merged.set(d.path, { oldText: d.oldText, newText: d.newText });
    }
  }
  const out: ChangedFile[] = [];
  for (const [path, { oldText, newText }] of merged) {
    if (oldText === newText) continue;
    out.push({ path, created: oldText === null, ...lineCounts(oldText, newText) });
  }
  return out;
}

/** A diff's counts as the chat shows them: "+3 −1" (a side that is 0 left out, "+0" when nothing). */
export function countsText(added: number, removed: number): string {
  const parts: string[] = [];
  if (added > 0 || removed === 0) parts.push(`+${added}`);
  if (removed > 0) parts.push(`\u2212${removed}`);
  return parts.join(' ');
}

function toolFor(
  session: SessionState,
  toolCallId: string,
  parentId: string | null,
  change: Change,
  items?: Item[],
  push?: (item: Item) => void,
): ToolCallState {
  const existing = session.tools[toolCallId];
  if (existing) return existing;
  const tool: ToolCallState = {
    id: toolCallId,
    started: false,
    title: '',
    kind: 'other',
    status: 'pending',
    command: '',
    restart: false,
    locations: [],
    output: [],
    outputChars: 0,
    outputDropped: 0,
    result: null,
    exitCode: null,
    isError: false,
    layer: null,
    category: null,
    edit: null,
    diffs: [],
    parentToolCallId: parentId,
    question: null,
    children: [],
    rootKey: 0,
  };
  session.tools[toolCallId] = tool;
  const item: Item = { kind: 'tool', key: session.nextKey++, toolCallId };
  const parent = parentId ? session.tools[parentId] : undefined;
  tool.rootKey = parent ? parent.rootKey : item.key;
  if (push && items) {
    push(item);
  } else {
    // Referenced as a parent before it was announced: put it in the transcript.
    session.items.push(item);
    change.structure = true;
  }
  return tool;
}

function appendOutput(tool: ToolCallState, stream: 'stdout' | 'stderr', text: string): void {
  if (!text) return;
  const last = tool.output[tool.output.length - 1];
  if (last && last.stream === stream) last.text += text;
  else tool.output.push({ stream, text });
  tool.outputChars += text.length;
  let excess = tool.outputChars - MAX_OUTPUT_CHARS;
  while (excess > 0 && tool.output.length > 0) {
    const head = tool.output[0];
    if (head.text.length <= excess) {
      tool.output.shift();
      excess -= head.text.length;
      tool.outputChars -= head.text.length;
      tool.outputDropped += head.text.length;
    } else {
      head.text = head.text.slice(excess);
      tool.outputChars -= excess;
      tool.outputDropped += excess;
      excess = 0;
    }
  }
}

/** Full live output of a tool call as one string (stdout and stderr interleaved). */
export function outputText(tool: ToolCallState): string {
  return tool.output.map((s) => s.text).join('');
}

/** Fold a whole recorded stream; handy for tests and replays. */
export function foldAll(actions: Iterable<Action>, state: ChatState = initialState()): ChatState {
  for (const action of actions) apply(state, action);
  return state;
}

export function activeSession(state: ChatState): SessionState | null {
  return state.activeSessionId ? (state.byId[state.activeSessionId] ?? null) : null;
}

export function busySessions(state: ChatState): number {
  return Object.values(state.byId).filter((s) => s.running).length;
}

/**
 * The tool call a permission question is about, found by the id the question names
 * (`RequestPermissionParams.toolCallId`); null when no session has it (yet).
 */
export function questionTarget(state: ChatState, toolCallId: string | null): { sessionId: string; toolCallId: string } | null {
  if (toolCallId === null) return null;
  for (const session of Object.values(state.byId)) {
    if (session.tools[toolCallId]) return { sessionId: session.sessionId, toolCallId };
  }
  return null;
}

/**
 * A path as the chat shows it: normalised (no `.`/`..` segments) and relative to
 * the workspace when inside it (`src/a.py`), else absolute (`/home/me/outside.txt`).
 */
export function displayPath(file: string, workspaceUri: string | null): string {
  const normal = (p: string): string => {
    const absolute = p.startsWith('/');
    const out: string[] = [];
    for (const part of p.split('/')) {
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
        else if (!absolute) out.push('..');
      } else out.push(part);
    }
    return (absolute ? '/' : '') + out.join('/');
  };
  let root: string | null = null;
  if (workspaceUri?.startsWith('file://')) {
    try {
      root = normal(decodeURIComponent(new URL(workspaceUri).pathname));
    } catch {
      root = null;
    }
  }
  const isAbs = file.startsWith('/');
  const abs = normal(isAbs || !root ? file : `${root}/${file}`);
  if (root && root !== '/' && (abs === root || abs.startsWith(root + '/'))) return abs === root ? '.' : abs.slice(root.length + 1);
  return abs;
}
