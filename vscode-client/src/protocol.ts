/**
 * Wire types of the Synapse editor protocol (docs/protocol.md).
 *
 * Pure declarations: no `vscode` import, shared by the extension host, the
 * webview and the Node tests. The GENERATED region is made from the server's
 * classes (synapse_lsp/lsp/protocol.py) by `python -m synapse_lsp.lsp.protocol_gen --write`;
 * a test fails when it differs. Below it: the client's own names and helpers.
 */

// BEGIN GENERATED protocol from synapse_lsp/lsp/protocol.py by `python -m synapse_lsp.lsp.protocol_gen --write`; do not edit
/** Bumped on any change a client built for the previous version would misread. */
export const PROTOCOL_VERSION = 1;
/** the one notification, server -> client */
export const SESSION_UPDATE_METHOD = 'synapse/sessionUpdate';
/**
 * client -> server: a touched file's settled diagnostics after an agent edit
 * (DiagnosticsParams)
 */
export const DIAGNOSTICS_NOTIFICATION = 'synapse/diagnostics';
/**
 * server -> client request: save these documents (the agent's edits) before a command reads
 * the disk, `{"uris": [...]}` -> `{"saved": [...]}`; offered by a client with
 * `capabilities.experimental.synapse.saveDocuments: true` (docs/protocol.md)
 */
export const SAVE_DOCUMENTS_REQUEST = 'synapse/saveDocuments';
/**
 * server -> client request: a permission question as data (RequestPermissionParams) ->
 * `{"optionId": ...}`; offered by a client with
 * `capabilities.experimental.synapse.requestPermission: true`, else the question is a
 * `window/showMessageRequest` (docs/protocol.md)
 */
export const REQUEST_PERMISSION_REQUEST = 'synapse/requestPermission';

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

/** Each command's one argument and its result. */
export interface CommandTypes {
  'synapse.session.new': { params: SessionNewParams; result: SessionNewResult };
  'synapse.session.list': { params: SessionListParams; result: SessionListResult };
  'synapse.session.load': { params: SessionLoadParams; result: SessionLoadResult };
  'synapse.session.delete': { params: SessionDeleteParams; result: SessionDeleteResult };
  'synapse.session.prompt': { params: SessionPromptParams; result: SessionPromptResult };
  'synapse.session.cancel': { params: SessionCancelParams; result: SessionCancelResult };
  'synapse.session.context': { params: SessionContextParams; result: SessionContextResult };
  'synapse.session.checkpoints': { params: SessionCheckpointsParams; result: SessionCheckpointsResult };
  'synapse.session.rewind': { params: SessionRewindParams; result: SessionRewindResult };
  'synapse.shell.run': { params: ShellRunParams; result: ShellRunResult };
  'synapse.shell.restart': { params: ShellRestartParams; result: ShellRestartResult };
  'synapse.tools.search': { params: ToolsSearchParams; result: ToolsSearchResult };
  'synapse.tools.refresh': { params: ToolsRefreshParams; result: ToolsRefreshResult };
  'synapse.status': { params: StatusParams; result: StatusResult };
}

/** LSP's `Position` (UTF-16 code units unless negotiated otherwise). */
export interface Position {
  line: number;
  character: number;
}

/** LSP's `Range`. */
export interface Range {
  start: Position;
  end: Position;
}

/** An LSP `Diagnostic`, the fields Synapse reads (severity 1 error … 4 hint). */
export interface WireDiagnostic {
  range: Range;
  severity?: 1 | 2 | 3 | 4;
  message: string;
  source?: string;
  code?: string | number;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
}

/**
 * What tokens cost, from the pricing table (docs/user-guide.md "Context and cost");
 * an amount is null when a model used has no price (`unpriced` names it).
 */
export interface Cost {
  /** "USD" */
  currency: string;
  /** the turn this result answers (the last turn, for context) */
  turn: number | null;
  /** the whole session so far */
  session: number | null;
  unpriced: string[];
}

export interface TextContent {
  type: 'text';
  text: string;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'max_turns' | 'cancelled' | 'refusal' | 'error';

export interface SessionNewParams {
  workspaceUri?: string;
}

export interface SessionNewResult {
  sessionId: string;
  workspaceUri: string;
  title: string;
}

export interface SessionListParams {
  /** without it: sessions of every workspace */
  workspaceUri?: string;
}

export interface SessionInfo {
  sessionId: string;
  title: string;
  workspaceUri: string | null;
  createdAt: string;
  updatedAt: string;
  busy: boolean;
}

export interface SessionListResult {
  /** newest first */
  sessions: SessionInfo[];
}

export interface SessionLoadParams {
  sessionId: string;
  /** only when the session's folder is not open */
  workspaceUri?: string;
}

export interface SessionLoadResult {
  sessionId: string;
  title: string;
  workspaceUri: string;
}

export interface SessionDeleteParams {
  sessionId: string;
}

export interface SessionDeleteResult {
  deleted: boolean;
}

export interface Selection {
  uri: string;
  range: Range;
  text?: string;
}

/** What the editor shows; every field optional. */
export interface PromptContext {
  activeFile?: string;
  selection?: Selection;
  openFiles?: string[];
}

export interface SessionPromptParams {
  sessionId: string;
  text: string;
  context?: PromptContext;
}

export interface SessionPromptResult {
  stopReason: StopReason;
  /** this turn's */
  usage: TokenUsage;
  /** only with stop_reason "error" */
  error?: string;
  /** the session's so far */
  sessionUsage?: TokenUsage;
  cost?: Cost;
}

export interface SessionContextParams {
  sessionId: string;
}

/** Tokens of the next request by part; they add up to `total`. */
export interface ContextParts {
  /** the system prompt */
  system: number;
  /** the Bash tool's definition */
  tools: number;
  /** the conversation, without the last turn's tool outputs */
  history: number;
  /** the tool outputs of the last turn */
  toolOutputs: number;
}

export interface SessionContextResult {
  model: string;
  contextWindow: number;
  total: number;
  parts: ContextParts;
  /** the API's token counting, or ~4 chars/token */
  source: 'counted' | 'estimated';
  /** why estimated */
  note?: string;
  lastTurnUsage: TokenUsage;
  sessionUsage: TokenUsage;
  cost: Cost;
}

export interface SessionCheckpointsParams {
  sessionId: string;
}

export interface ChangedFile {
  /** relative to the session's folder */
  path: string;
  status: 'added' | 'modified' | 'deleted';
}

export interface CheckpointInfo {
  turn: number;
  prompt: string;
  /** seconds since the epoch */
  startedAt: number;
  /** the snapshot after the turn is taken */
  finished: boolean;
  changed: ChangedFile[];
  /** ignored files (.env...) the turn changed */
  ignoredChanged: string[];
  /** files too large to keep */
  notKept: string[];
}

export interface SessionCheckpointsResult {
  checkpoints: CheckpointInfo[];
  /** why checkpoints are off for this session */
  disabled?: string;
}

export interface SessionRewindParams {
  sessionId: string;
  turn: number;
  /** also end the conversation before that turn */
  truncate?: boolean;
  /**
   * A file changed since the turn (by the user or another session): ask the user
   * (window/showMessageRequest), leave it, or restore it anyway.
   */
  onConflict?: 'ask' | 'skip' | 'overwrite';
}

export interface SessionRewindResult {
  restored: string[];
  deleted: string[];
  skipped: string[];
  overwritten: string[];
  notRestorable: string[];
  repositoryChanged: boolean;
  truncated: boolean;
  problems: string[];
  /** the same report as prose */
  text: string;
}

export interface SessionCancelParams {
  sessionId: string;
}

export interface SessionCancelResult {
  /** false when no turn was running */
  cancelled: boolean;
}

export interface ShellRunParams {
  command: string;
  workspaceUri?: string;
  /** that chat session's shell instead of the folder's */
  sessionId?: string;
  /** seconds */
  timeout?: number;
}

export interface ShellRunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  isError: boolean;
  layer: string;
  category: string | null;
  /**
   * What a model would have seen, only when it is not just `stdout` (a failure's `[Error]`
   * framing and hint, "(no output)"): a result never sends one text twice.
   */
  text: string | null;
}

export interface ShellRestartParams {
  workspaceUri?: string;
  /** that session's shell instead of the folder's */
  sessionId?: string;
}

export interface ShellRestartResult {
  restarted: boolean;
}

export interface ToolsSearchParams {
  workspaceUri?: string;
  /** a keyword or a regular expression */
  query?: string;
  type?: 'mcp' | 'skill';
}

export interface ToolInfo {
  name: string;
  type: string;
  summary: string;
  usage: string;
}

export interface ToolsSearchResult {
  tools: ToolInfo[];
}

export interface ToolsRefreshParams {
  workspaceUri?: string;
  what?: 'mcp' | 'skills' | 'all';
}

export interface ToolsRefreshResult {
  tools: number;
  errors: string[];
}

export type StatusParams = Record<string, never>;

export interface WorkspaceStatus {
  uri: string;
  sessions: number;
  busySessions: number;
  tools: number;
  /** false: the folder's own mcp_servers.json is not loaded */
  trusted: boolean;
}

/** The sandbox the server's shells run under (`sandbox.SandboxStatus`). */
export interface SandboxInfo {
  /** the `sandbox` setting */
  mode: string;
  /** the `network` setting */
  network: string;
  /** whether bubblewrap really confines the shells */
  sandboxed: boolean;
  /** for a status bar: "workspace-write, network off (bubblewrap)" */
  description: string;
  /** why not sandboxed although asked to */
  reason: string | null;
}

export interface StatusResult {
  version: string;
  model: string;
  maxTokens: number;
  thinkingBudget: number;
  /** whether a key is set, never the key */
  apiKey: boolean;
  workspaces: WorkspaceStatus[];
  sandbox: SandboxInfo;
}

export interface UserMessageChunk {
  sessionUpdate: 'user_message_chunk';
  content: TextContent;
  parentToolCallId?: string;
}

export interface AgentMessageChunk {
  sessionUpdate: 'agent_message_chunk';
  content: TextContent;
  parentToolCallId?: string;
}

export interface AgentThoughtChunk {
  sessionUpdate: 'agent_thought_chunk';
  content: TextContent;
  parentToolCallId?: string;
}

export interface RawInput {
  command: string;
  restart: boolean;
}

export interface Location {
  path: string;
}

/** ACP's tool kinds: what a call does, for its icon */
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

/** A Bash call starts; `title` and `kind` come from the command summary. */
export interface ToolCall {
  sessionUpdate: 'tool_call';
  toolCallId: string;
  title: string;
  /** the summary's kind, one of ToolKind */
  kind: ToolKind;
  status: 'in_progress';
  rawInput: RawInput;
  locations: Location[];
  parentToolCallId?: string;
}

export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ToolContent {
  type: 'content';
  content: TextContent;
}

/**
 * ACP's `diff` tool call content: what a built-in changed in one file, whole texts
 * (`oldText` null: the file is new).
 */
export interface DiffContent {
  type: 'diff';
  path: string;
  oldText: string | null;
  newText: string;
}

export interface EditOutcome {
  path: string;
  applied: boolean;
}

export interface RawOutput {
  exitCode: number | null;
  isError: boolean;
  layer: string | null;
  category: string | null;
  /** for `edit`/`write` */
  edit?: EditOutcome;
}

/** Live output (`output`) or the end of the call (`status`, `content`, `rawOutput`). */
export interface ToolCallUpdate {
  sessionUpdate: 'tool_call_update';
  toolCallId: string;
  status?: 'completed' | 'failed' | 'cancelled' | 'denied';
  content?: (ToolContent | DiffContent)[];
  rawOutput?: RawOutput;
  output?: OutputChunk;
  parentToolCallId?: string;
}

export interface PlanEntry {
  content: string;
  priority: 'high' | 'medium' | 'low';
  status: 'pending' | 'in_progress' | 'completed';
}

/** The whole plan each time (replace, don't merge). */
export interface Plan {
  sessionUpdate: 'plan';
  explanation: string | null;
  entries: PlanEntry[];
  parentToolCallId?: string;
}

export interface UsageUpdate {
  sessionUpdate: 'usage_update';
  /** totals for the turn so far */
  usage: TokenUsage;
  parentToolCallId?: string;
}

export interface Notice {
  sessionUpdate: 'notice';
  level: 'info' | 'warning' | 'error';
  message: string;
  parentToolCallId?: string;
}

/** The prompt result again, for clients that did not keep the request (and replay). */
export interface TurnFinished {
  sessionUpdate: 'turn_finished';
  stopReason: StopReason;
  usage: TokenUsage;
  error?: string;
}

export type SessionUpdate =
  | UserMessageChunk
  | AgentMessageChunk
  | AgentThoughtChunk
  | ToolCall
  | ToolCallUpdate
  | Plan
  | UsageUpdate
  | Notice
  | TurnFinished;

/** The params of `synapse/sessionUpdate`. */
export interface SessionUpdateNotification {
  sessionId: string;
  update: SessionUpdate;
  /** true while synapse.session.load replays history */
  replay?: boolean;
}

/**
 * The params of `synapse/diagnostics` (client -> server): a file's diagnostics once
 * they settled after an agent edit. `before`: those it had when the edit started, if
 * the client kept them (then only the others are new). `sessionId` absent: every
 * session whose agent edited the file.
 */
export interface DiagnosticsParams {
  uri: string;
  diagnostics: WireDiagnostic[];
  sessionId?: string;
  /** the document version the diagnostics are about */
  version?: number;
  before?: WireDiagnostic[];
}

/**
 * The params of `synapse/saveDocuments` (server -> client request): save these
 * documents (the agent's edits) before a command reads the disk.
 */
export interface SaveDocumentsParams {
  uris: string[];
}

export interface SaveDocumentsResult {
  /** the documents the client saved */
  saved: string[];
}

/** What a permission option does (ACP's kinds): allow or deny, this once or from now on */
export type PermissionOptionKind = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';

export interface PermissionOption {
  /** stable: allow_once, allow_with_path, allow_session, allow_always, reject_once */
  optionId: string;
  /** the button's text */
  title: string;
  kind: PermissionOptionKind;
}

/**
 * The params of `synapse/requestPermission` (server -> client request): the permission
 * gate's question as data (`question.Question`). `toolCallId` names the running tool
 * call it is about, as its `tool_call` update did (null: no chat turn's call runs the
 * line); `message` is the same question as prose, to show, never to parse.
 */
export interface RequestPermissionParams {
  toolCallId: string | null;
  /** the line, escapes shown as escapes (shortened past 2,000 characters) */
  command: string;
  cwd: string;
  /** its simple commands, each judged as if typed alone */
  steps: string[];
  reason: string;
  /** the buttons, in order */
  options: PermissionOption[];
  message: string;
}

export interface RequestPermissionResult {
  /** the option chosen; null: dismissed (denied) */
  optionId?: string;
}
// END GENERATED protocol

// ------------------------------------------------------- the client's names

/** The short names the client code uses for generated types. */
export type Usage = TokenUsage;
export type PromptResult = SessionPromptResult;
export type SessionUpdateParams = SessionUpdateNotification;
/** ACP's locations may name a line; Synapse's server sends paths only. */
export type ToolLocation = Location & { line?: number };

/**
 * A tool call's status as the chat shows it: what the server sends, and `pending`,
 * client-side only: output or an end seen before the `tool_call` itself.
 * `denied`: the permission rule or the user refused the command, so it never ran
 * (`rawOutput.category` `permission_denied`, exit code 126).
 */
export type ToolStatus = 'pending' | ToolCall['status'] | NonNullable<ToolCallUpdate['status']>;

// ------------------------------------------------------------------ helpers

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
