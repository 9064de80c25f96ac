/**
 * The chat state's shapes (sessions, transcript items, tool calls, plan, questions,
 * what an `apply` changed) and their constructors.
 *
 * The state is plain JSON: it can be posted to a webview and stored with
 * `setState`. The fold that fills it is in state.ts.
 */

import type { PlanEntry, SessionInfo, StopReason, ToolKind, ToolLocation, ToolStatus, Usage } from './protocol';

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

export function ensureSession(state: ChatState, sessionId: string): SessionState {
  let session = state.byId[sessionId];
  if (!session) {
    const info = state.sessions.find((s) => s.sessionId === sessionId);
    session = newSession(sessionId, info?.title ?? 'New chat', info?.workspaceUri ?? null);
    state.byId[sessionId] = session;
  }
  return session;
}
