"""What is asked of the user, as data: a permission question, and an MCP server's
requests (an elicitation form, a sampling request to approve) at the end.

A permission question: what the gate (`policy.gate.AskingGate`) asks every face.

`Question` says which tool call it is about (`tool_call_id`, the agent loop's running
call, `events.RUNNING_TOOL_CALL`), the command line, where it runs, its simple commands
(each judged as if typed alone), why it is asked and the answers offered (`Option`:
an id, the button's title and its kind, the kinds of ACP's `session/request_permission`).
Faces read these fields: the LSP server sends them as `synapse/requestPermission`, ACP
maps the options' kinds directly, the REPL numbers the titles. `message` is the same
question as prose, for faces that only show text (`window/showMessageRequest`); nothing
parses it. An asker answers with the chosen option's title, or None when dismissed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ALLOW_ONCE = "Allow once"
ALLOW_SESSION = "Allow for this session"
DENY = "Deny"
ACTIONS = (ALLOW_ONCE, ALLOW_SESSION, DENY)
# Offered when a re-run outside the sandbox could carry the session's PATH (an
# activated venv): allow once, and carry it (docs/user-guide.md "When the sandbox
# blocks a command").
ALLOW_WITH_PATH = "Allow once, with the session's PATH"
ALWAYS = "Always allow"
# The "always" answer to a command the sandbox blocked: a rule of its own ("outside"),
# since running outside the sandbox is more than not being asked.
ALWAYS_OUTSIDE = "Always run"
# Not offered as a button; a face whose protocol has "reject always" (ACP) answers the
# "Always allow …" title with ALWAYS replaced by this to remember denies.
ALWAYS_DENY = "Always deny"

# ACP's permission option kinds; the LSP protocol's `PermissionOptionKind`.
OptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


def always_deny_title(always: str) -> str:
    """The answer that remembers denies, for a question whose "always" action is
    `always` ("Always allow `x` here" or "Always run `x` outside the sandbox here"):
    "Always deny `x` here". Not offered as a button; ACP's "reject always" sends it."""
    if always.startswith(ALWAYS_OUTSIDE):
        always = ALWAYS + always[len(ALWAYS_OUTSIDE) :].replace(
            " outside the sandbox here", " here"
        )
    return always.replace(ALWAYS, ALWAYS_DENY, 1)


@dataclass(frozen=True)
class Option:
    """One answer: `id` is stable (`allow_once`, `allow_with_path`, `allow_session`,
    `allow_always`, `reject_once`, `reject_always`), `title` the button's text (what the
    asker answers), `kind` what it does. A `hidden` one is not a button: only a face
    whose protocol has its kind (ACP's `reject_always`) offers it."""

    id: str
    title: str
    kind: OptionKind
    hidden: bool = False


@dataclass(frozen=True)
class Question:
    """A permission question (module docstring). `tool_call_id` is None when no tool
    call of a chat turn runs the line (an editor's `synapse.shell.run`)."""

    tool_call_id: str | None
    command: str  # the line, escapes shown as escapes (shortened past 2,000 characters)
    cwd: str
    steps: tuple[str, ...]  # its simple commands, each judged as if typed alone
    reason: str
    options: tuple[Option, ...]
    message: str  # the question as prose, for faces that show only text

    @property
    def shown(self) -> tuple[Option, ...]:
        """The options offered as buttons (not `hidden`), in order."""
        return tuple(o for o in self.options if not o.hidden)

    @property
    def actions(self) -> tuple[str, ...]:
        """The buttons' titles, in order."""
        return tuple(o.title for o in self.shown)

    def title_of(self, option_id: str | None) -> str | None:
        """The title an answer by option id stands for; None for an unknown id."""
        return next((o.title for o in self.options if o.id == option_id), None)


# The question -> the chosen option's title, or None when dismissed
Asker = Callable[[Question], Awaitable[str | None]]


def gate_options(*, once_only: bool, with_path: bool, always: str | None) -> tuple[Option, ...]:
    """The answers the gate offers: Allow once (or Deny) only when `once_only`; else
    Allow once, with the session's PATH (`with_path`), Allow for this session, the
    "always" answer when there is one (its deny twin hidden) and Deny."""
    if once_only:
        return (
            Option("allow_once", ALLOW_ONCE, "allow_once"),
            Option("reject_once", DENY, "reject_once"),
        )
    options = [Option("allow_once", ALLOW_ONCE, "allow_once")]
    if with_path:
        options.append(Option("allow_with_path", ALLOW_WITH_PATH, "allow_once"))
    options.append(Option("allow_session", ALLOW_SESSION, "allow_always"))
    if always is not None:
        options.append(Option("allow_always", always, "allow_always"))
    options.append(Option("reject_once", DENY, "reject_once"))
    if always is not None:
        options.append(Option("reject_always", always_deny_title(always), "reject_always", True))
    return tuple(options)


# ---------------------------------------------------------------- MCP servers' requests
# An MCP server may, while one of its tools runs, ask the client to sample the model
# (`sampling/createMessage`) or to ask the user for input (`elicitation/create`). Both
# go to the chat session whose command is running (`commands.McpHost`); plain data here,
# converted from and to the SDK's types by `extensions/mcp_client`.

ElicitAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class ElicitField:
    """One field of an elicitation form (MCP restricts the schema to flat primitives)."""

    name: str
    kind: Literal["string", "number", "integer", "boolean"]
    title: str = ""
    description: str = ""
    required: bool = False
    choices: tuple[str, ...] = ()  # a string enum: the allowed values
    choice_titles: tuple[str, ...] = ()  # shown for each choice (`enumNames`), when given
    default: Any = None


@dataclass(frozen=True)
class Elicitation:
    """A server's question to the user: its message and the form's fields (none: a plain
    accept/decline)."""

    server: str
    message: str
    fields: tuple[ElicitField, ...] = ()


@dataclass(frozen=True)
class ElicitAnswer:
    """`accept` with the values (checked against the fields by `mcp_client`), or
    `decline`/`cancel`; `reason` is logged and shown, never sent to the server."""

    action: ElicitAction
    content: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class SamplingMessage:
    role: Literal["user", "assistant"]
    text: str  # text content; an image the server sent is named in the text


@dataclass(frozen=True)
class SamplingRequest:
    """`sampling/createMessage` as data: what the server asks the model."""

    server: str
    messages: tuple[SamplingMessage, ...]
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model_hint: str | None = None  # the server's first model name hint, informational

    def preview(self, limit: int = 400) -> str:
        """The request as the user is asked about it: the last user message, shortened."""
        last = next((m.text for m in reversed(self.messages) if m.role == "user"), "")
        text = " ".join(last.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class SamplingReply:
    text: str
    model: str
    stop_reason: str = "endTurn"  # MCP's spelling: endTurn, stopSequence, maxTokens
