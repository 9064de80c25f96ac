"""The Synapse protocol at the LSP boundary, as types (docs/protocol.md is the prose).

Every `workspace/executeCommand` command has a `*Params` class (its one object
argument) and a `*Result` class; every `synapse/sessionUpdate` kind has one
class. They are attrs classes converted by the cattrs converter pygls already
uses (lsprotocol's: camelCase keys on the wire), with the strict structuring
and explicit omission rules of `wire.py`: a field is on the wire (null
included) unless it is declared `omitted()`. Handlers get typed params and
return typed results; a bad argument never reaches them (InvalidParams naming
the field).

`PROTOCOL_VERSION` changes when a change would break a client built for the
previous one; both clients check it (`initialize` result:
`capabilities.experimental.synapse.protocolVersion`).
"""

from __future__ import annotations

import typing
from typing import Any, Literal, TypeAlias

import attrs
from lsprotocol import types as lsp

from synapse_lsp.config import MIN_TIMEOUT_S
from synapse_lsp.lsp.names import (  # re-exported: the protocol's names live there
    DIAGNOSTICS_NOTIFICATION,
    INTERNAL_ERROR,
    PROTOCOL_VERSION,
    REQUEST_FAILED,
    SESSION_CANCEL,
    SESSION_CHECKPOINTS,
    SESSION_CONTEXT,
    SESSION_DELETE,
    SESSION_LIST,
    SESSION_LOAD,
    SESSION_NEW,
    SESSION_PROMPT,
    SESSION_REWIND,
    SESSION_UPDATE,
    SHELL_RESTART,
    SHELL_RUN,
    STATUS,
    TOOLS_REFRESH,
    TOOLS_SEARCH,
    invalid,
    request_failed,
)
from synapse_lsp.lsp.wire import ArgumentError, Wire, camel, kind, omitted, shown_as

__all__ = [  # the re-exported names; every class below is this module's own
    "DIAGNOSTICS_NOTIFICATION",
    "INTERNAL_ERROR",
    "PROTOCOL_VERSION",
    "REQUEST_FAILED",
    "SESSION_CANCEL",
    "SESSION_CHECKPOINTS",
    "SESSION_CONTEXT",
    "SESSION_DELETE",
    "SESSION_LIST",
    "SESSION_LOAD",
    "SESSION_NEW",
    "SESSION_PROMPT",
    "SESSION_REWIND",
    "SESSION_UPDATE",
    "SHELL_RESTART",
    "SHELL_RUN",
    "STATUS",
    "TOOLS_REFRESH",
    "TOOLS_SEARCH",
    "invalid",
    "request_failed",
]


def _positive(_instance: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and value <= 0:
        raise ArgumentError((camel(attribute.name),), "must be a positive number")


def _timeout(instance: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    _positive(instance, attribute, value)
    if value is not None and value < MIN_TIMEOUT_S:
        raise ArgumentError((camel(attribute.name),), f"must be at least {MIN_TIMEOUT_S:g} s")


# ------------------------------------------------------------- shared parts


@attrs.define(kw_only=True)
class TokenUsage(Wire):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


@attrs.define(kw_only=True)
class Cost(Wire):
    """What tokens cost, from the pricing table (docs/user-guide.md "Context and cost");
    an amount is null when a model used has no price (`unpriced` names it)."""

    currency: str  # "USD"
    turn: float | None  # the turn this result answers (the last turn, for context)
    session: float | None  # the whole session so far
    unpriced: list[str]


@attrs.define(kw_only=True)
class TextContent(Wire):
    type: Literal["text"] = "text"
    text: str


StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turns", "cancelled", "refusal", "error"
]

# ---------------------------------------------------------------- commands


@attrs.define(kw_only=True)
class SessionNewParams(Wire):
    workspace_uri: str | None = None


@attrs.define(kw_only=True)
class SessionNewResult(Wire):
    session_id: str
    workspace_uri: str
    title: str


@attrs.define(kw_only=True)
class SessionListParams(Wire):
    workspace_uri: str | None = None  # without it: sessions of every workspace


@attrs.define(kw_only=True)
class SessionInfo(Wire):
    session_id: str
    title: str
    workspace_uri: str | None
    created_at: str
    updated_at: str
    busy: bool


@attrs.define(kw_only=True)
class SessionListResult(Wire):
    sessions: list[SessionInfo]  # newest first


@attrs.define(kw_only=True)
class SessionLoadParams(Wire):
    session_id: str
    workspace_uri: str | None = None  # only when the session's folder is not open


@attrs.define(kw_only=True)
class SessionLoadResult(Wire):
    session_id: str
    title: str
    workspace_uri: str


@attrs.define(kw_only=True)
class SessionDeleteParams(Wire):
    session_id: str


@attrs.define(kw_only=True)
class SessionDeleteResult(Wire):
    deleted: bool


@attrs.define(kw_only=True)
class Selection(Wire):
    uri: str
    range: lsp.Range
    text: str = ""


@attrs.define(kw_only=True)
class PromptContext(Wire):
    """What the editor shows; every field optional."""

    active_file: str | None = None
    selection: Selection | None = None
    open_files: list[str] = attrs.Factory(list)


@attrs.define(kw_only=True)
class SessionPromptParams(Wire):
    session_id: str
    text: str
    context: PromptContext | None = None


@attrs.define(kw_only=True)
class SessionPromptResult(Wire):
    stop_reason: StopReason
    usage: TokenUsage  # this turn's
    error: str | None = omitted()  # only with stop_reason "error"
    session_usage: TokenUsage | None = omitted()  # the session's so far
    cost: Cost | None = omitted()


@attrs.define(kw_only=True)
class SessionContextParams(Wire):
    session_id: str


@attrs.define(kw_only=True)
class ContextParts(Wire):
    """Tokens of the next request by part; they add up to `total`."""

    system: int  # the system prompt
    tools: int  # the Bash tool's definition
    history: int  # the conversation, without the last turn's tool outputs
    tool_outputs: int  # the tool outputs of the last turn


@attrs.define(kw_only=True)
class SessionContextResult(Wire):
    model: str
    context_window: int
    total: int
    parts: ContextParts
    source: Literal["counted", "estimated"]  # the API's token counting, or ~4 chars/token
    note: str | None = omitted()  # why estimated
    last_turn_usage: TokenUsage
    session_usage: TokenUsage
    cost: Cost


@attrs.define(kw_only=True)
class SessionCheckpointsParams(Wire):
    session_id: str


@attrs.define(kw_only=True)
class ChangedFile(Wire):
    path: str  # relative to the session's folder
    status: Literal["added", "modified", "deleted"]


@attrs.define(kw_only=True)
class CheckpointInfo(Wire):
    turn: int
    prompt: str
    started_at: float  # seconds since the epoch
    finished: bool  # the snapshot after the turn is taken
    changed: list[ChangedFile]
    ignored_changed: list[str]  # ignored files (.env...) the turn changed
    not_kept: list[str]  # files too large to keep


@attrs.define(kw_only=True)
class SessionCheckpointsResult(Wire):
    checkpoints: list[CheckpointInfo]
    disabled: str | None = omitted()  # why checkpoints are off for this session


@attrs.define(kw_only=True)
class SessionRewindParams(Wire):
    session_id: str
    turn: int = attrs.field(validator=attrs.validators.ge(1))
    truncate: bool = True  # also end the conversation before that turn
    # A file changed since the turn (by the user or another session): ask the user
    # (window/showMessageRequest), leave it, or restore it anyway.
    on_conflict: Literal["ask", "skip", "overwrite"] = "ask"


@attrs.define(kw_only=True)
class SessionRewindResult(Wire):
    restored: list[str]
    deleted: list[str]
    skipped: list[str]
    overwritten: list[str]
    not_restorable: list[str]
    repository_changed: bool
    truncated: bool
    problems: list[str]
    text: str  # the same report as prose


@attrs.define(kw_only=True)
class SessionCancelParams(Wire):
    session_id: str


@attrs.define(kw_only=True)
class SessionCancelResult(Wire):
    cancelled: bool  # false when no turn was running


@attrs.define(kw_only=True)
class ShellRunParams(Wire):
    command: str
    workspace_uri: str | None = None
    session_id: str | None = None  # that chat session's shell instead of the folder's
    timeout: float | None = attrs.field(default=None, validator=_timeout)  # seconds


@attrs.define(kw_only=True)
class ShellRunResult(Wire):
    exit_code: int
    stdout: str
    stderr: str
    is_error: bool
    layer: str
    category: str | None
    # What a model would have seen, only when it is not just `stdout` (a failure's
    # `[Error]` framing and hint, "(no output)"): a result never sends one text twice.
    text: str | None


@attrs.define(kw_only=True)
class ShellRestartParams(Wire):
    workspace_uri: str | None = None
    session_id: str | None = None  # that session's shell instead of the folder's


@attrs.define(kw_only=True)
class ShellRestartResult(Wire):
    restarted: bool


@attrs.define(kw_only=True)
class ToolsSearchParams(Wire):
    workspace_uri: str | None = None
    query: str = ""  # a keyword or a regular expression
    type: Literal["mcp", "skill"] | None = None


@attrs.define(kw_only=True)
class ToolInfo(Wire):
    name: str
    type: str
    summary: str
    usage: str


@attrs.define(kw_only=True)
class ToolsSearchResult(Wire):
    tools: list[ToolInfo]


@attrs.define(kw_only=True)
class ToolsRefreshParams(Wire):
    workspace_uri: str | None = None
    what: Literal["mcp", "skills", "all"] = "all"


@attrs.define(kw_only=True)
class ToolsRefreshResult(Wire):
    tools: int
    errors: list[str]


@attrs.define(kw_only=True)
class StatusParams(Wire):
    pass


@attrs.define(kw_only=True)
class WorkspaceStatus(Wire):
    uri: str
    sessions: int
    busy_sessions: int
    tools: int
    trusted: bool = True  # false: the folder's own mcp_servers.json is not loaded


@attrs.define(kw_only=True)
class SandboxInfo(Wire):
    """The sandbox the server's shells run under (`sandbox.SandboxStatus`)."""

    mode: str  # the `sandbox` setting
    network: str  # the `network` setting
    sandboxed: bool  # whether bubblewrap really confines the shells
    description: str  # for a status bar: "workspace-write, network off (bubblewrap)"
    reason: str | None = None  # why not sandboxed although asked to


@attrs.define(kw_only=True)
class StatusResult(Wire):
    version: str
    model: str
    max_tokens: int
    thinking_budget: int
    api_key: bool  # whether a key is set, never the key
    workspaces: list[WorkspaceStatus]
    sandbox: SandboxInfo


@attrs.frozen
class Command:
    name: str
    params: type[Wire]
    result: type[Wire]


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(SESSION_NEW, SessionNewParams, SessionNewResult),
        Command(SESSION_LIST, SessionListParams, SessionListResult),
        Command(SESSION_LOAD, SessionLoadParams, SessionLoadResult),
        Command(SESSION_DELETE, SessionDeleteParams, SessionDeleteResult),
        Command(SESSION_PROMPT, SessionPromptParams, SessionPromptResult),
        Command(SESSION_CANCEL, SessionCancelParams, SessionCancelResult),
        Command(SESSION_CONTEXT, SessionContextParams, SessionContextResult),
        Command(SESSION_CHECKPOINTS, SessionCheckpointsParams, SessionCheckpointsResult),
        Command(SESSION_REWIND, SessionRewindParams, SessionRewindResult),
        Command(SHELL_RUN, ShellRunParams, ShellRunResult),
        Command(SHELL_RESTART, ShellRestartParams, ShellRestartResult),
        Command(TOOLS_SEARCH, ToolsSearchParams, ToolsSearchResult),
        Command(TOOLS_REFRESH, ToolsRefreshParams, ToolsRefreshResult),
        Command(STATUS, StatusParams, StatusResult),
    )
}

# ---------------------------------------------------------- session updates


@attrs.define(kw_only=True)
class UserMessageChunk(Wire):
    session_update: Literal["user_message_chunk"] = kind("user_message_chunk")
    content: TextContent
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class AgentMessageChunk(Wire):
    session_update: Literal["agent_message_chunk"] = kind("agent_message_chunk")
    content: TextContent
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class AgentThoughtChunk(Wire):
    session_update: Literal["agent_thought_chunk"] = kind("agent_thought_chunk")
    content: TextContent
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class RawInput(Wire):
    command: str
    restart: bool


@attrs.define(kw_only=True)
class Location(Wire):
    path: str


# ACP's tool kinds: what a call does, for its icon
ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"
]


@attrs.define(kw_only=True)
class ToolCall(Wire):
    """A Bash call starts; `title` and `kind` come from the command summary."""

    session_update: Literal["tool_call"] = kind("tool_call")
    tool_call_id: str
    title: str
    kind: str = shown_as(ToolKind)  # the summary's kind, one of ToolKind
    status: Literal["in_progress"] = "in_progress"
    raw_input: RawInput
    locations: list[Location]
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class OutputChunk(Wire):
    stream: Literal["stdout", "stderr"]
    text: str


@attrs.define(kw_only=True)
class ToolContent(Wire):
    type: Literal["content"] = "content"
    content: TextContent


@attrs.define(kw_only=True)
class DiffContent(Wire):
    """ACP's `diff` tool call content: what a built-in changed in one file, whole texts
    (`oldText` null: the file is new)."""

    type: Literal["diff"] = "diff"
    path: str
    old_text: str | None
    new_text: str


@attrs.define(kw_only=True)
class EditOutcome(Wire):
    path: str
    applied: bool


@attrs.define(kw_only=True)
class RawOutput(Wire):
    exit_code: int | None
    is_error: bool
    layer: str | None
    category: str | None
    edit: EditOutcome | None = omitted()  # for `edit`/`write`


@attrs.define(kw_only=True)
class ToolCallUpdate(Wire):
    """Live output (`output`) or the end of the call (`status`, `content`, `rawOutput`)."""

    session_update: Literal["tool_call_update"] = kind("tool_call_update")
    tool_call_id: str
    status: Literal["completed", "failed", "cancelled", "denied"] | None = omitted()
    content: list[ToolContent | DiffContent] | None = omitted()
    raw_output: RawOutput | None = omitted()
    output: OutputChunk | None = omitted()
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class PlanEntry(Wire):
    content: str
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"]


@attrs.define(kw_only=True)
class Plan(Wire):
    """The whole plan each time (replace, don't merge)."""

    session_update: Literal["plan"] = kind("plan")
    explanation: str | None
    entries: list[PlanEntry]
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class UsageUpdate(Wire):
    session_update: Literal["usage_update"] = kind("usage_update")
    usage: TokenUsage  # totals for the turn so far
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class Notice(Wire):
    session_update: Literal["notice"] = kind("notice")
    level: Literal["info", "warning", "error"]
    message: str
    parent_tool_call_id: str | None = omitted()


@attrs.define(kw_only=True)
class TurnFinished(Wire):
    """The prompt result again, for clients that did not keep the request (and replay)."""

    session_update: Literal["turn_finished"] = kind("turn_finished")
    stop_reason: StopReason
    usage: TokenUsage
    error: str | None = omitted()


SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | UsageUpdate
    | Notice
    | TurnFinished
)

UPDATE_KINDS: dict[str, type[Wire]] = {
    str(attrs.fields_dict(cls)["session_update"].default): cls
    for cls in typing.get_args(SessionUpdate)
}


@attrs.define(kw_only=True)
class SessionUpdateNotification(Wire):
    """The params of `synapse/sessionUpdate`."""

    session_id: str
    update: SessionUpdate
    replay: bool = omitted(False)  # true while synapse.session.load replays history


# ------------------------------------------------------ client notifications


@attrs.define(kw_only=True)
class DiagnosticsParams(Wire):
    """The params of `synapse/diagnostics` (client -> server): a file's diagnostics once
    they settled after an agent edit. `before`: those it had when the edit started, if
    the client kept them (then only the others are new). `sessionId` absent: every
    session whose agent edited the file."""

    uri: str
    diagnostics: list[lsp.Diagnostic]
    session_id: str | None = None
    version: int | None = None  # the document version the diagnostics are about
    before: list[lsp.Diagnostic] | None = None


# ------------------------------------------------------- server -> client requests


@attrs.define(kw_only=True)
class SaveDocumentsParams(Wire):
    """The params of `synapse/saveDocuments` (server -> client request): save these
    documents (the agent's edits) before a command reads the disk."""

    uris: list[str]


@attrs.define(kw_only=True)
class SaveDocumentsResult(Wire):
    saved: list[str]  # the documents the client saved


# What a permission option does (ACP's kinds): allow or deny, this once or from now on
PermissionOptionKind: TypeAlias = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always"
]


@attrs.define(kw_only=True)
class PermissionOption(Wire):
    option_id: str  # stable: allow_once, allow_with_path, allow_session, allow_always, reject_once
    title: str  # the button's text
    kind: PermissionOptionKind


@attrs.define(kw_only=True)
class RequestPermissionParams(Wire):
    """The params of `synapse/requestPermission` (server -> client request): the permission
    gate's question as data (`question.Question`). `toolCallId` names the running tool
    call it is about, as its `tool_call` update did (null: no chat turn's call runs the
    line); `message` is the same question as prose, to show, never to parse."""

    tool_call_id: str | None
    command: str  # the line, escapes shown as escapes (shortened past 2,000 characters)
    cwd: str
    steps: list[str]  # its simple commands, each judged as if typed alone
    reason: str
    options: list[PermissionOption]  # the buttons, in order
    message: str


@attrs.define(kw_only=True)
class RequestPermissionResult(Wire):
    option_id: str | None = None  # the option chosen; null: dismissed (denied)
