"""The one event stream every face consumes (REPL, `chat -p`, LSP server).

The agent loop yields these; nothing else about the loop is visible to a face.
`parent_tool_call_id` is set on events from a sub-agent, naming the `task:*`
tool call that started it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Literal

# The id of the tool call running in this task, set by the agent loop around each call
# (each concurrent call runs in a task of its own, so each sees its own): a sub-agent
# started by it nests under it, hooks get it as `tool_use_id`, and the permission
# gate's questions say they are about it (`question.Question.tool_call_id`).
RUNNING_TOOL_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "synapse_running_tool_call", default=None
)

StopReason = Literal["end_turn", "max_tokens", "cancelled", "refusal", "error", "max_turns"]
# `denied`: the permission gate refused the command (it never ran); faces show "Denied".
ToolStatus = Literal["completed", "failed", "cancelled", "denied"]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


@dataclass(frozen=True)
class TextDelta:
    text: str
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class ThinkingDelta:
    text: str
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class ToolCallStarted:
    tool_call_id: str
    command: str
    restart: bool = False
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class ToolOutput:
    """A chunk of live output, in full (the model sees only head and tail)."""

    tool_call_id: str
    stream: Literal["stdout", "stderr"]
    chunk: str
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class FileDiff:
    """What one tool call changed in one file through a built-in (`edit`, `write`):
    the text before (None: the file was new) and after. Several changes of one file
    in one call make one diff, from the first text to the last."""

    path: str
    old_text: str | None
    new_text: str

    def line_counts(self) -> tuple[int, int]:
        """(lines added, lines removed), as `git diff --numstat` counts them."""
        import difflib

        old = (self.old_text or "").splitlines()
        new = self.new_text.splitlines()
        added = removed = 0
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                removed += i2 - i1
            if tag in ("replace", "insert"):
                added += j2 - j1
        return added, removed


@dataclass(frozen=True)
class ToolCallFinished:
    tool_call_id: str
    status: ToolStatus
    exit_code: int | None
    is_error: bool
    text: str  # what the model was given
    layer: str | None = None
    category: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    parent_tool_call_id: str | None = None
    # The files the call's built-ins changed (edit/write), whole old and new text; what
    # native commands change is not here (checkpoints see that).
    diffs: tuple[FileDiff, ...] = ()


@dataclass(frozen=True)
class PlanEntry:
    step: str
    status: Literal["pending", "in_progress", "completed"]
    # TodoWrite's `activeForm` ("Running the tests"): what a face may show while the
    # step is in progress; None for steps set with `plan`.
    active_form: str | None = None


@dataclass(frozen=True)
class PlanUpdated:
    entries: tuple[PlanEntry, ...]
    explanation: str | None = None
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class UsageUpdated:
    usage: Usage  # totals for the turn so far
    parent_tool_call_id: str | None = None


@dataclass(frozen=True)
class Notice:
    """Something the user should see that is not model output (a retry, a compaction)."""

    message: str
    level: Literal["info", "warning"] = "info"
    parent_tool_call_id: str | None = None
    # The text streamed since the last model call began is void (a retried stream):
    # a face that shows only the final answer must drop it.
    discards_text: bool = False
    # What kind of notice, for faces and tests that act on it (None: a plain message):
    # NOTICE_MAX_TURNS, NOTICE_TOOL_FAILURES (the breaker), NOTICE_TODO_REMINDER.
    code: str | None = None


NOTICE_MAX_TURNS = "max_turns"
NOTICE_TOOL_FAILURES = "tool_failures"
NOTICE_TODO_REMINDER = "todo_reminder"


@dataclass(frozen=True)
class UserMessage:
    """The user's prompt as stored in a session (transcript replay); never yielded by a turn."""

    text: str
    parent_tool_call_id: str | None = None


# What a face shows when the model ended its turn without any text (`note`).
NO_ANSWER = "(no answer)"


@dataclass(frozen=True)
class TurnFinished:
    stop_reason: StopReason
    usage: Usage
    error: str | None = None  # set when stop_reason == "error"
    # For people, about how the turn ended: NO_ANSWER when the model ended the turn
    # (end_turn) without a word of text; faces show it (`chat -p` fails with it).
    note: str | None = None


Event = (
    TextDelta
    | ThinkingDelta
    | ToolCallStarted
    | ToolOutput
    | ToolCallFinished
    | PlanUpdated
    | UsageUpdated
    | Notice
    | TurnFinished
    | UserMessage
)

_EVENT_TYPES: tuple[type[Any], ...] = (
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolOutput,
    ToolCallFinished,
    PlanUpdated,
    UsageUpdated,
    Notice,
    TurnFinished,
    UserMessage,
)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_BY_TYPE: dict[str, type[Any]] = {_snake(cls.__name__): cls for cls in _EVENT_TYPES}


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict: `{"type": "tool_call_started", ...fields}` (snake_case keys)."""
    data = dataclasses.asdict(event)
    data["type"] = _snake(type(event).__name__)
    return data


def event_from_dict(data: dict[str, Any]) -> Event:
    """Inverse of `event_to_dict`; raises ValueError on an unknown type or bad fields."""
    kind = data.get("type")
    cls = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    values = {k: v for k, v in data.items() if k != "type"}
    if isinstance(values.get("usage"), dict):
        values["usage"] = Usage(**values["usage"])
    if cls is PlanUpdated:
        values["entries"] = tuple(PlanEntry(**e) for e in values.get("entries", ()))
    if cls is ToolCallFinished:
        # stored sessions replay their diffs: back to FileDiff (a dict has no .path)
        try:
            values["diffs"] = tuple(FileDiff(**d) for d in values.get("diffs", ()))
        except TypeError as exc:
            raise ValueError(f"bad {kind} event: {exc}") from None
    try:
        event: Event = cls(**values)
    except TypeError as exc:
        raise ValueError(f"bad {kind} event: {exc}") from None
    return event
