/**
 * Wire types of the Synapse editor protocol (docs/protocol.md).
 *
 * Pure declarations: no `vscode` import, shared by the extension host, the
 * webview and the Node tests.
 */

export const SESSION_UPDATE_METHOD = 'synapse/sessionUpdate';
/** Client -> server: a touched file's settled diagnostics after an agent edit. */
export const DIAGNOSTICS_NOTIFICATION = 'synapse/diagnostics';
/**
 * Server -> client request: save these documents (the agent's edits) before a command
 * reads the disk. `{uris}` -> `{saved}`. Offered in `capabilities.experimental.synapse`.
 */
export const SAVE_DOCUMENTS_REQUEST = 'synapse/saveDocuments';
export interface SaveDocumentsParams {
  uris: string[];
}

/**
 * The protocol version this extension was built for. The server reports its
 * own in the `initialize` result (`capabilities.experimental.synapse.protocolVersion`,
 * synapse_lsp/lsp/protocol.py PROTOCOL_VERSION); see `protocolMismatch`.
 */
export const PROTOCOL_VERSION = 1;

/** The version a server's `initialize` result reports, or null when it reports none. */
export function serverProtocolVersion(initializeResult: unknown): number | null {
  const caps = (initializeResult as { capabilities?: { experimental?: unknown } } | null | undefined)?.capabilities;
  const experimental = caps?.experimental as { synapse?: { protocolVersion?: unknown } } | null | undefined;
  const version = experimental?.synapse?.protocolVersion;
  return typeof version === 'number' && Number.isInteger(version) ? version : null;
}

/**
 * What to tell the user when the server speaks another protocol version than
 * this extension (null when they agree). Which side to update follows from
 * which one is older.
 */
export function protocolMismatch(initializeResult: unknown, expected: number = PROTOCOL_VERSION): string | null {
  const version = serverProtocolVersion(initializeResult);
  if (version === expected) return null;
  if (version === null) {
    return (
      `The Synapse server does not report a protocol version (it predates protocol ${expected}), ` +
      `this extension expects ${expected} — update the Synapse server (pip install -U synapse-lsp).`
    );
  }
  const update =
    version < expected
      ? 'update the Synapse server (pip install -U synapse-lsp)'
      : 'update the Synapse extension';
  return `Synapse server speaks protocol ${version}, this extension expects ${expected} — ${update}.`;
}

export const Commands = {
  sessionNew: 'synapse.session.new',
  sessionList: 'synapse.session.list',
  sessionLoad: 'synapse.session.load',
  sessionDelete: 'synapse.session.delete',
  sessionPrompt: 'synapse.session.prompt',
  sessionCancel: 'synapse.session.cancel',
  sessionContext: 'synapse.session.context',
  sessionCheckpoints: 'synapse.session.checkpoints',
  sessionRewind: 'synapse.session.rewind',
  shellRun: 'synapse.shell.run',
  shellRestart: 'synapse.shell.restart',
  toolsSearch: 'synapse.tools.search',
  toolsRefresh: 'synapse.tools.refresh',
  status: 'synapse.status',
} as const;

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens?: number;
  cacheReadInputTokens?: number;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'max_turns' | 'cancelled' | 'refusal' | 'error';

export type ToolKind =
  | 'read'
  | 'edit'
  | 'delete'
  | 'move'
  | 'search'
  | 'execute'
  | 'think'
  | 'fetch'
  | 'other';

/**
 * `pending` is client-side only: output or an end seen before the `tool_call` itself.
 * `denied`: the permission rule or the user refused the command, so it never ran
 * (`rawOutput.category` `permission_denied`, exit code 126).
 */
export type ToolStatus = 'pending' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'denied';

export interface TextContent {
  type: 'text';
  text: string;
}

export interface ToolLocation {
  path: string;
  line?: number;
}

export interface RawOutput {
  exitCode?: number | null;
  isError?: boolean;
  layer?: string | null;
  category?: string | null;
  edit?: { path: string; applied: boolean };
  [key: string]: unknown;
}

export interface PlanEntry {
  content: string;
  priority?: 'high' | 'medium' | 'low';
  status: 'pending' | 'in_progress' | 'completed';
}

interface UpdateBase {
  parentToolCallId?: string | null;
}

export interface UserMessageChunk extends UpdateBase {
  sessionUpdate: 'user_message_chunk';
  content: TextContent;
}
export interface AgentMessageChunk extends UpdateBase {
  sessionUpdate: 'agent_message_chunk';
  content: TextContent;
}
export interface AgentThoughtChunk extends UpdateBase {
  sessionUpdate: 'agent_thought_chunk';
  content: TextContent;
}
export interface ToolCallUpdateStart extends UpdateBase {
  sessionUpdate: 'tool_call';
  toolCallId: string;
  title?: string;
  kind?: ToolKind;
  status?: ToolStatus;
  rawInput?: { command?: string; restart?: boolean; [key: string]: unknown };
  locations?: ToolLocation[];
}
/** What a built-in changed in one file (ACP's `diff` content); `oldText` null: a new file. */
export interface DiffContent {
  type: 'diff';
  path: string;
  oldText: string | null;
  newText: string;
}
export type ToolCallContent = { type: 'content'; content: TextContent } | DiffContent;

/** An LSP `Diagnostic`, as `synapse/diagnostics` carries it (severity 1 error … 4 hint). */
export interface WireDiagnostic {
  range: { start: Position; end: Position };
  severity?: 1 | 2 | 3 | 4;
  message: string;
  source?: string;
  code?: string | number;
}
/** The params of `synapse/diagnostics` (docs/protocol.md, "Editor feedback"). */
export interface DiagnosticsParams {
  sessionId?: string;
  uri: string;
  version?: number;
  diagnostics: WireDiagnostic[];
  before?: WireDiagnostic[];
}
export interface ToolCallUpdate extends UpdateBase {
  sessionUpdate: 'tool_call_update';
  toolCallId: string;
  title?: string;
  kind?: ToolKind;
  status?: ToolStatus;
  output?: { stream: 'stdout' | 'stderr'; text: string };
  content?: ToolCallContent[];
  rawOutput?: RawOutput;
  locations?: ToolLocation[];
}
export interface PlanUpdate extends UpdateBase {
  sessionUpdate: 'plan';
  entries: PlanEntry[];
  explanation?: string | null;
}
export interface UsageUpdate extends UpdateBase {
  sessionUpdate: 'usage_update';
  usage: Usage;
}
export interface NoticeUpdate extends UpdateBase {
  sessionUpdate: 'notice';
  level?: 'info' | 'warning' | 'error';
  message: string;
}
export interface TurnFinishedUpdate extends UpdateBase {
  sessionUpdate: 'turn_finished';
  stopReason: StopReason;
  usage?: Usage;
  error?: string | null;
}

export type SessionUpdate =
  | UserMessageChunk
  | AgentMessageChunk
  | AgentThoughtChunk
  | ToolCallUpdateStart
  | ToolCallUpdate
  | PlanUpdate
  | UsageUpdate
  | NoticeUpdate
  | TurnFinishedUpdate;

export interface SessionUpdateParams {
  sessionId: string;
  update: SessionUpdate;
  replay?: boolean;
}

export interface SessionInfo {
  sessionId: string;
  title: string;
  workspaceUri?: string | null;
  createdAt?: string;
  updatedAt?: string;
  busy?: boolean;
}

export interface SessionNewResult {
  sessionId: string;
  workspaceUri?: string | null;
  title: string;
}

export type SessionLoadResult = SessionNewResult;

/** What tokens cost (the server's pricing table); null: a model used has no price. */
export interface Cost {
  currency: string;
  turn: number | null;
  session: number | null;
  unpriced: string[];
}

export interface PromptResult {
  stopReason: StopReason;
  usage?: Usage;
  error?: string | null;
  sessionUsage?: Usage;
  cost?: Cost;
}

/** `synapse.session.context`: the next request's tokens by part, and the session's cost. */
export interface SessionContextResult {
  model: string;
  contextWindow: number;
  total: number;
  parts: { system: number; tools: number; history: number; toolOutputs: number };
  source: 'counted' | 'estimated';
  note?: string;
  lastTurnUsage: Usage;
  sessionUsage: Usage;
  cost: Cost;
}

export interface Position {
  line: number;
  character: number;
}

export interface PromptContext {
  activeFile?: string;
  selection?: { uri: string; range: { start: Position; end: Position }; text: string };
  openFiles?: string[];
}

export interface PromptParams {
  sessionId: string;
  text: string;
  context?: PromptContext;
}

export interface StatusResult {
  version: string;
  model: string;
  maxTokens: number;
  thinkingBudget: number;
  apiKey: boolean;
  workspaces: { uri: string; sessions: number; busySessions: number; tools: number; trusted?: boolean }[];
  sandbox: SandboxInfo;
}

/** The sandbox the server's shells run under (docs/user-guide.md "Sandbox and permissions"). */
export interface SandboxInfo {
  mode: string;
  network: string;
  sandboxed: boolean;
  /** e.g. "workspace-write, network off (bubblewrap)" */
  description: string;
  reason?: string | null;
}

/** The status bar's words for the sandbox, and whether it deserves a warning. */
export function sandboxLabel(info: SandboxInfo | null): { text: string; warn: boolean } {
  if (!info) return { text: '', warn: false };
  if (info.sandboxed) return { text: info.mode, warn: false };
  if (info.mode === 'full-access') return { text: 'full-access', warn: false };
  return { text: `${info.mode}: NOT sandboxed`, warn: true };
}

/** The keys of the server's `synapse` settings section (docs/protocol.md#settings). */
export const SERVER_SETTING_KEYS = [
  'model',
  'maxTokens',
  'thinkingBudget',
  'maxTurns',
  'maxParallelTasks',
  'maxToolFailures',
  'todoReminder',
  'editorFeedback',
  'checkpoints',
  'maxSessions',
  'baseUrl',
  'apiKeyEnv',
  'permission',
  'sandbox',
  'network',
  'allow',
  'deny',
  'commandTimeout',
  'permissionTimeout',
  'maxCommandBytes',
  'spillMaxBytes',
  'spillTotalBytes',
  'synapseHome',
  'logLevel',
  'secretEnv',
] as const;

export type ServerSettingKey = (typeof SERVER_SETTING_KEYS)[number];

/**
 * Keep only the server's keys and drop unset values (null, ""), so the
 * server's own defaults (and environment variables such as
 * ANTHROPIC_BASE_URL) apply and it never warns about client-only keys.
 */
export function serverSettings(section: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_SETTING_KEYS) {
    const value = section[key];
    if (value === undefined || value === null || value === '') continue;
    out[key] = value;
  }
  return out;
}
