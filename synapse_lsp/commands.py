"""What every in-process command (built-in or extension) looks like to the router.

A command gets argv (already split, shell-style) and a `CommandContext`; it
returns a `CommandOutput`. It never touches the terminal or the editor directly:
file changes go through `ctx.files` so the LSP face can turn them into
`workspace/applyEdit` while the CLI writes to disk.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from synapse_lsp.sandbox import HOST_VIEW, PathView

if TYPE_CHECKING:
    from synapse_lsp.config import Settings
    from synapse_lsp.files import FileGateway
    from synapse_lsp.question import ElicitAnswer, Elicitation, SamplingReply, SamplingRequest


class Layer(enum.StrEnum):
    NATIVE = "native"
    AGENT = "agent"
    EXTENSION = "extension"


class FailureCategory(enum.StrEnum):
    """Why a routed command failed; lets faces and tests tell failures apart."""

    INVALID_USAGE = "invalid_usage"
    NOT_FOUND = "not_found"
    EXECUTION_ERROR = "execution_error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    PERMISSION_DENIED = "permission_denied"
    DEPENDENCY_MISSING = "dependency_missing"


# A sink for live output: (stream, chunk) with stream "stdout" or "stderr".
OutputSink = Callable[[str, str], None]


@dataclass
class CommandOutput:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    category: FailureCategory | None = None
    # Structured side data a face may use (e.g. a plan, an applied edit).
    data: dict[str, Any] = field(default_factory=dict)
    # The command bounded its own stdout and told the model how to page on (`read`):
    # the router must not cut it again to the head + tail of `settings.output`.
    paged: bool = False
    # Both streams are already cut to `settings.output` (by output.BoundedCapture, as
    # skills do); the whole output, when it was cut, is in `full_output_path`.
    bounded: bool = False
    full_output_path: Path | None = None
    # The whole stdout, when `stdout` holds only its head and tail: what a pipe after
    # the command (`mcp:a:b | grep x`, `skill:a:b | write f`) must read.
    stdout_path: Path | None = None
    # Content blocks for the model beside the text (an MCP tool's image, as the Messages
    # API's `image` block); the agent loop puts them in the tool result. Never piped on.
    attachments: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def usage_error(cls, command: str, message: str) -> CommandOutput:
        """A wrong-usage failure whose text teaches the model to read --help."""
        return cls(
            stderr=f'{command}: {message}\nUsage help: Bash(command="{command} --help")\n',
            exit_code=2,
            category=FailureCategory.INVALID_USAGE,
        )


@dataclass
class CommandContext:
    """Everything a command may use. `cwd` is the shell session's directory at call time."""

    cwd: Path
    settings: Settings
    files: FileGateway
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    on_output: OutputSink | None = None
    # Set by the agent loop: runs a sub-agent (`task:*`). None when there is no executor.
    subagent: SubAgentRunner | None = None
    # True inside a sub-agent: task:* is refused.
    in_subagent: bool = False
    # Session-scoped state a command may keep (e.g. the plan), shared per chat session.
    state: dict[str, Any] = field(default_factory=dict)
    # Emits a structured event to whoever drives the router (e.g. plan updates).
    emit: Callable[[Any], None] | None = None
    # stdout feeds another command (`read f | grep x`), not the model: plain text only
    # (no line numbers).
    piped: bool = False
    # The session shell's workspace roots: what a program the session starts (a skill
    # script) may write inside its sandbox. Empty: `cwd`.
    roots: tuple[Path, ...] = ()
    # What of `$SYNAPSE_HOME/run/` such a program may see: its registry's own wrappers
    # and socket (the rest of run/, other sessions' sockets, is hidden in its sandbox).
    extension_dirs: tuple[Path, ...] = ()
    # How the session's commands spell paths (`sandbox.PathView`): `/tmp/x` given to
    # a built-in is the file `cat /tmp/x` reads in the session's (sandboxed) shell.
    view: PathView = HOST_VIEW
    # The chat session running the command, for what an MCP server asks of it while its
    # tool runs (sampling, elicitation); None: such requests are declined.
    mcp_host: McpHost | None = None

    def resolve(self, path: str) -> Path:
        """The host path of `path` as the session's commands spell it (`cwd` is a host
        path already)."""
        p = Path(path).expanduser()
        return self.view.host(p) if p.is_absolute() else (self.cwd / p)


class McpHost(Protocol):
    """The chat session whose command called an MCP server: what the server may ask of it
    while its tool runs (`question.py`'s MCP part). The session implements it
    (`agent/session_mcp.py`): sampling is approved through the face's permission question
    (without asking under the `auto` policy, `--yes`; denied with the reason where nobody
    can be asked) and runs on Synapse's model; elicitation is asked through the face."""

    async def sample(self, request: SamplingRequest) -> SamplingReply | str:
        """The model's answer, or why it was not sampled (denied, no model, failed)."""
        ...

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        """The user's answer; `decline` with a reason where nobody can be asked."""
        ...


class SubAgentRunner(Protocol):
    def __call__(
        self, task_type: str, prompt: str, description: str
    ) -> Awaitable[CommandOutput]: ...


class Command(Protocol):
    """A command the router runs in-process."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str:
        """One line: what it does (shown by `-h` and `command:search`)."""
        ...

    @property
    def usage(self) -> str:
        """One line: `name <arg> [--flag N]`."""
        ...

    def help(self) -> str:
        """The full `--help` page."""
        ...

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput: ...


class CommandLookup(Protocol):
    """Where the router finds extension commands (`mcp:*`, `skill:*`)."""

    def get(self, name: str) -> Command | None: ...


@dataclass(frozen=True)
class PromptInfo:
    """An MCP server's prompt, offered as the slash command `/<name>` in every face."""

    name: str  # "mcp:<server>:<prompt>"
    description: str
    arguments: tuple[tuple[str, bool], ...] = ()  # (name, required), in the server's order

    @property
    def usage(self) -> str:
        words = [a if required else f"[{a}]" for a, required in self.arguments]
        return " ".join([f"/{self.name}", *words])


@runtime_checkable
class PromptLookup(Protocol):
    """Where a face finds MCP prompts (the extension registry is one): `prompts()` as
    known now; `render_prompt` gets one with its arguments (positional in the server's
    order, or `name=value`) and returns its messages as the text of a user turn. A bad
    name or argument, or a server that fails, raises `PromptError` with the message to
    show."""

    def prompts(self) -> list[PromptInfo]: ...

    async def render_prompt(self, name: str, args: list[str]) -> str: ...


class PromptError(Exception):
    """A prompt that could not be rendered; the text says why, for the user."""


@dataclass(frozen=True)
class Step:
    """One part of a command line and the layer it runs in: `read a | grep x && write f y`
    is `read a` (AGENT), `grep x` (NATIVE, fed by the built-in), `write f y` (AGENT)."""

    text: str
    layer: Layer


class PermissionGate(Protocol):
    """Asked once before a line runs. Returns None to allow, or a reason it was denied.

    `steps` are the line's parts with their layers (the router's plan); a gate must
    judge every step, since a line led by a built-in can pipe into native commands.
    """

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None: ...


@dataclass
class OutsideEnv:
    """What a re-run outside the sandbox gets of the session's exports: an allowlist
    (`carried`: locale, time zone, terminal size) on top of the shell's starting
    environment; every other export the session added or changed is `dropped` (a
    variable can redirect what runs: `XDG_CONFIG_HOME`, `GIT_*`, `EDITOR`, `LD_*`,
    exported functions...). `PATH` is the starting one unless the user's answer says
    to carry the session's (`session_path`, offered when it differs)."""

    carried: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    session_path: str | None = None
    with_session_path: bool = False  # set by the gate from the user's answer

    def describe(self) -> str:
        """One line for the question and the result: what the re-run does not get."""
        parts = []
        if self.dropped:
            shown = ", ".join(self.dropped[:40]) + (" …" if len(self.dropped) > 40 else "")
            parts.append(f"the session's exports {shown} are not carried")
        if self.session_path is not None:
            parts.append(
                "PATH is the session's"
                if self.with_session_path
                else "PATH is the shell's starting one, not the session's"
            )
        return "; ".join(parts)


@runtime_checkable
class SandboxEscalation(Protocol):
    """A gate that also decides where a native line runs when the shell is sandboxed:
    outside the sandbox when the user allowed that (`runs_outside`, asked right after
    `check` allowed the line), or again outside after the sandbox blocked it
    (`escalate`: asks; True = re-run it outside now)."""

    def runs_outside(self, command: str) -> bool: ...

    async def escalate(
        self, command: str, cwd: Path, why: str, env: OutsideEnv | None = None
    ) -> bool: ...
