"""Agent events -> ACP `session/update`s (the SDK's schema types).

The same events the LSP face maps in `lsp/updates.py`; the title, kind and paths
of a tool call come from the one shared summary (`summaries/tool_calls.py`).

| event | ACP update |
|---|---|
| TextDelta | agent_message_chunk |
| ThinkingDelta | agent_thought_chunk |
| UserMessage (replay) | user_message_chunk |
| ToolCallStarted | tool_call (title, kind, locations, rawInput, status pending) |
| ToolOutput | tool_call_update (in_progress, the output's tail as text content) |
| ToolCallFinished | tool_call_update (completed/failed, bounded text, a diff for edit/write) |
| PlanUpdated | plan |
| Notice | agent_thought_chunk, `_meta.synapse.notice` = its level |
| UsageUpdated, TurnFinished | none (usage and stop reason answer `session/prompt`) |

A sub-agent's events carry `_meta.synapse.parentToolCallId` (ACP has no nesting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandInput,
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UnstructuredCommandInput,
    UserMessageChunk,
)
from acp.schema import Usage as AcpUsage

from synapse_lsp.agent import session_mcp
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.events import (
    Event,
    Notice,
    PlanUpdated,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    Usage,
    UserMessage,
)
from synapse_lsp.summaries.tool_calls import located, tool_call_summary

# What a client is shown of one command's output (the model's own view is bounded
# separately); live output shows the tail.
MAX_SHOWN = 16 * 1024
ACP_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"}
)
# Our stop reasons -> ACP's; "error" is not a stop reason in ACP: a JSON-RPC error.
STOP_REASONS = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "max_turns": "max_turn_requests",
    "refusal": "refusal",
    "cancelled": "cancelled",
}

AcpUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
)


def _meta(parent: str | None, **more: Any) -> dict[str, Any] | None:
    synapse: dict[str, Any] = {k: v for k, v in more.items() if v is not None}
    if parent is not None:
        synapse["parentToolCallId"] = parent
    return {"synapse": synapse} if synapse else None


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def bounded(text: str, limit: int = MAX_SHOWN, *, tail: bool = False) -> str:
    """At most `limit` characters of `text`: head and tail (or only the tail)."""
    if len(text) <= limit:
        return text
    if tail:
        return "[…]\n" + text[-limit:]
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit} characters not shown …]\n{text[-half:]}"


def tool_kind(kind: str) -> str:
    return kind if kind in ACP_KINDS else "other"


def tool_call_start(event: ToolCallStarted, cwd: Path | None) -> ToolCallStart:
    title, kind, paths = tool_call_summary(event.command)
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=event.tool_call_id,
        title=title,
        kind=tool_kind(kind),  # type: ignore[arg-type]
        status="pending",
        locations=[ToolCallLocation(path=str(located(p, cwd))) for p in paths] or None,
        raw_input={"command": event.command, "restart": event.restart},
        field_meta=_meta(event.parent_tool_call_id),
    )


def live_output(tool_call_id: str, text: str, parent: str | None) -> ToolCallProgress:
    """The running command's output so far (its tail), replacing what was shown."""
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=tool_call_id,
        status="in_progress",
        content=[
            ContentToolCallContent(type="content", content=text_block(bounded(text, tail=True)))
        ],
        field_meta=_meta(parent),
    )


def tool_call_finished(event: ToolCallFinished) -> ToolCallProgress:
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = [
        FileEditToolCallContent(type="diff", path=d.path, old_text=d.old_text, new_text=d.new_text)
        for d in event.diffs
    ]
    if event.text:
        content.append(
            ContentToolCallContent(type="content", content=text_block(bounded(event.text)))
        )
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=event.tool_call_id,
        status="completed" if event.status == "completed" else "failed",
        content=content,
        raw_output={
            "status": event.status,
            "exitCode": event.exit_code,
            "isError": event.is_error,
            "layer": event.layer,
            "category": event.category,
        },
        field_meta=_meta(event.parent_tool_call_id),
    )


def event_update(event: Event, *, cwd: Path | None = None) -> AcpUpdate | None:
    """The update for one event that maps on its own (tool output and finished tool calls
    need the face's state: `live_output`, `tool_call_finished`)."""
    match event:
        case TextDelta(text=text, parent_tool_call_id=parent):
            return AgentMessageChunk(
                session_update="agent_message_chunk",
                content=text_block(text),
                field_meta=_meta(parent),
            )
        case ThinkingDelta(text=text, parent_tool_call_id=parent):
            return AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=text_block(text),
                field_meta=_meta(parent),
            )
        case UserMessage(text=text, parent_tool_call_id=parent):
            return UserMessageChunk(
                session_update="user_message_chunk",
                content=text_block(text),
                field_meta=_meta(parent),
            )
        case ToolCallStarted():
            return tool_call_start(event, cwd)
        case ToolOutput(tool_call_id=call, chunk=chunk, parent_tool_call_id=parent):
            return live_output(call, chunk, parent)
        case ToolCallFinished():
            return tool_call_finished(event)
        case PlanUpdated(entries=entries, parent_tool_call_id=parent):
            return AgentPlanUpdate(
                session_update="plan",
                entries=[
                    PlanEntry(content=e.step, priority="medium", status=e.status) for e in entries
                ],
                field_meta=_meta(parent, explanation=event.explanation),
            )
        case Notice(message=message, level=level, parent_tool_call_id=parent):
            return AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=text_block(f"\n[{level}] {message}\n"),
                field_meta=_meta(parent, notice=level),
            )
    return None


def acp_usage(usage: Usage) -> AcpUsage:
    total = (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens
    )
    return AcpUsage(
        total_tokens=total,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_read_tokens=usage.cache_read_input_tokens,
        cached_write_tokens=usage.cache_creation_input_tokens,
    )


def available_commands(names: tuple[str, ...], chat: Any) -> list[AvailableCommand]:
    """The slash commands a session offers its client: the registry's `names`, then the
    session's Claude Code custom commands (`chat.claude`; sent as prompts, the session
    expands them) and the MCP servers' prompts (the turn driver expands them)."""
    rows: list[tuple[str, str, str]] = []
    for name in names:
        command = SESSION_COMMANDS.get(name)
        if command is not None:
            rows.append((command.name, command.help, command.usage.partition(" ")[2]))
    claude = getattr(chat, "claude", None)
    if claude is not None:
        for custom in claude.commands().commands.values():
            rows.append((custom.name, custom.description, custom.argument_hint))
    for prompt in session_mcp.prompts(getattr(chat, "router", None)):  # MCP servers' prompts
        rows.append((prompt.name, prompt.description, prompt.usage.partition(" ")[2]))
    return [
        AvailableCommand(
            name=name,
            description=help_,
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None,
        )
        for name, help_, hint in rows
    ]
