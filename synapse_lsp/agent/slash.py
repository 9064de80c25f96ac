"""Slash commands: one registry (name, aliases, usage, help, handler) for every face.

The REPL lists and runs them today; an editor or ACP client can list the same
table (`SlashRegistry.describe()`) and run them on its own `SlashHost`. Names are
case-insensitive and the leading `/` is optional when looking one up.

`/tools`, `/skills` and `/model` need more of their host (`ExtensionsHost`,
`ModelHost`, which `cli.chat.Runtime` is); a face whose host lacks them answers
that the command is not available there. `/resume` takes a full id, a unique id
prefix or `--latest`; bare, on a terminal (`PickerHost`), it offers a numbered list.
`/hooks` and `/skill enhance` act on the host's current chat session (`chat_session()`).

That session's Claude Code custom commands (`.claude/commands`, agent/claude_code.py)
join the table for `/help` and `is_prompt`: such a line is a prompt, which the face
sends as a turn (`ChatSession.run_turn` expands it); a built-in of the same name wins,
said once (`run`). So do the MCP servers' prompts (`/mcp:<server>:<prompt> args`,
agent/session_mcp.py), which the turn driver expands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from synapse_lsp.agent import session_mcp
from synapse_lsp.agent.context import compact_command, context_command, cost_command
from synapse_lsp.agent.turn_checkpoints import checkpoints_command, rewind_command
from synapse_lsp.errors import SynapseError
from synapse_lsp.policy.hooks import Hooks


class SlashHost(Protocol):
    """What a face offers the session commands."""

    def list_sessions(self) -> list[tuple[str, str, str]]:
        """(id, updated_at, title) of the stored sessions, oldest first."""
        ...

    async def new_session(self) -> str:
        """Start a new session; its id."""
        ...

    async def resume(self, session_id: str) -> str:
        """Switch to a stored session (the current one stays if this raises); its title."""
        ...

    def request_exit(self) -> None: ...


@runtime_checkable
class CurrentChatHost(Protocol):
    """A host that knows its current session (`/resume --latest` skips it)."""

    def current_session_id(self) -> str | None: ...


@runtime_checkable
class PickerHost(Protocol):
    """A host that can ask the user to pick one of a list (a terminal): a bare
    `/resume` there offers the recent sessions."""

    def can_pick(self) -> bool: ...

    async def pick(self, title: str, options: list[str]) -> int | None:
        """The index chosen, or None (nothing chosen)."""
        ...


@runtime_checkable
class ExtensionsHost(Protocol):
    """A host with the folder's extension registry (`/tools`, `/skills`). It formats
    the listings itself (agent/ does not import extensions/)."""

    async def list_tools(self, query: str) -> str:
        """The folder's extension commands matching `query` ("" = all), one
        `name  summary` line each, as `synapse tools list` / `search` print them."""
        ...

    async def list_skills(self) -> str:
        """What `skill:list` prints."""
        ...


@runtime_checkable
class ModelHost(Protocol):
    """A host whose model can be shown and switched for this session (`/model`)."""

    def model_name(self) -> str: ...

    def set_model(self, name: str) -> str:
        """Use `name` from the next model call on; the model now in use (SynapseError
        when refused, the current one kept)."""
        ...


Handler = Callable[[SlashHost, str], Awaitable[str]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()


class SlashRegistry:
    def __init__(self, commands: list[SlashCommand] | None = None) -> None:
        self._commands: list[SlashCommand] = []
        self._by_name: dict[str, SlashCommand] = {}
        for command in commands or []:
            self.add(command)

    def add(self, command: SlashCommand) -> None:
        for name in (command.name, *command.aliases):
            key = name.lower()
            if key in self._by_name:
                raise ValueError(f"slash command /{key} is defined twice")
            self._by_name[key] = command
        self._commands.append(command)

    def get(self, word: str) -> SlashCommand | None:
        return self._by_name.get(word.removeprefix("/").lower())

    def commands(self) -> list[SlashCommand]:
        return list(self._commands)

    def describe(self) -> list[dict[str, object]]:
        """The table as data, for a face that lists commands in its own UI."""
        return [
            {"name": c.name, "aliases": list(c.aliases), "usage": c.usage, "help": c.help}
            for c in self._commands
        ]

    def help_text(self) -> str:
        width = max(len(c.usage) for c in self._commands)
        lines = []
        for c in self._commands:
            also = f" (also {', '.join('/' + a for a in c.aliases)})" if c.aliases else ""
            lines.append(f"  {c.usage:<{width}}  {c.help}{also}")
        return "\n".join(lines)

    async def run(self, host: SlashHost, line: str) -> str:
        """Run `/name args`; the text to show (an unknown name says how to list them)."""
        word, _, rest = line.strip().partition(" ")
        command = self.get(word)
        claude = _claude(host)
        if command is None:
            if claude is not None and claude.commands().get(word) is not None:
                return (
                    f"{word} is a custom command (a prompt); this face does not send it: the "
                    "editor's chat, ACP clients and `synapse chat -p` do."
                )
            return f"Unknown command {word}; /help lists them."
        shown: str = await command.handler(host, rest.strip())
        notice = claude.clash_notice(command.name) if claude is not None else None
        return f"{shown}\n{notice}" if notice and shown else notice or shown

    def is_prompt(self, host: object, line: str) -> bool:
        """Whether `line` is a custom command of the host's session (no built-in has its
        name): a face sends it as the user's prompt rather than to `run`."""
        word = line.strip().split(maxsplit=1)[0] if line.strip().startswith("/") else ""
        if session_mcp.is_prompt_line(line):  # an MCP prompt: the turn driver expands it
            return True
        claude = _claude(host)
        return (
            bool(word)
            and self.get(word) is None
            and (claude is not None and claude.commands().get(word) is not None)
        )


async def _help(host: SlashHost, arg: str) -> str:
    claude = _claude(host)
    custom = claude.commands().listing() if claude is not None else ""
    mcp = session_mcp.listing(getattr(_chat(host), "router", None))
    return "\n".join(part for part in (SESSION_COMMANDS.help_text(), custom, mcp) if part)


async def _exit(host: SlashHost, arg: str) -> str:
    host.request_exit()
    return ""


async def _sessions(host: SlashHost, arg: str) -> str:
    rows = host.list_sessions()
    if not rows:
        return "No stored sessions."
    return "\n".join(f"{sid}  {updated}  {title}" for sid, updated, title in rows)


async def _new(host: SlashHost, arg: str) -> str:
    return f"New session {await host.new_session()}."


RESUME_USAGE = "Usage: /resume ID (see /sessions)"
PICKER_ROWS = 10


def _newest_first(host: SlashHost) -> list[tuple[str, str, str]]:
    return sorted(host.list_sessions(), key=lambda row: (row[1], row[0]), reverse=True)


def _rows(rows: list[tuple[str, str, str]]) -> str:
    return "\n".join(f"  {sid}  {updated}  {title}" for sid, updated, title in rows)


async def _resume(host: SlashHost, arg: str) -> str:
    """`/resume ID`, a unique prefix of one, or `--latest` (the most recently updated
    session other than the current one); an ambiguous prefix lists its candidates."""
    current = host.current_session_id() if isinstance(host, CurrentChatHost) else None
    rows = _newest_first(host)
    if not arg:
        if not isinstance(host, PickerHost) or not host.can_pick():
            return RESUME_USAGE
        others = [r for r in rows if r[0] != current][:PICKER_ROWS]
        if not others:
            return "No other stored session to resume."
        options = [f"{sid}  {updated}  {title}" for sid, updated, title in others]
        chosen = await host.pick("Resume which session? (newest first)", options)
        if chosen is None:
            return "Not resumed (the current session goes on)."
        arg = others[chosen][0]
    if arg == "--latest":
        others = [r for r in rows if r[0] != current]
        if not others:
            return "No other stored session to resume."
        target = others[0][0]
    elif arg.startswith("-"):
        return f"Unknown option {arg}. Usage: /resume ID|PREFIX|--latest"
    elif any(r[0] == arg for r in rows):
        target = arg
    else:
        matches = [r for r in rows if r[0].startswith(arg)]
        if len(matches) > 1:
            return f"{len(matches)} sessions start with {arg!r}; type more of the id:\n" + _rows(
                matches
            )
        target = matches[0][0] if matches else arg  # unknown: the host says so
    try:
        title = await host.resume(target)
    except SynapseError as exc:
        return f"{exc.message} (the current session goes on)"
    return f"Resumed {target}: {title}"


async def _tools(host: SlashHost, arg: str) -> str:
    """The folder's extension commands, as `synapse tools list` (or `search`) shows them."""
    if not isinstance(host, ExtensionsHost):
        return "/tools is not available here."
    return (await host.list_tools(arg)).rstrip("\n")


async def _skills(host: SlashHost, arg: str) -> str:
    """`skill:list`'s listing."""
    if not isinstance(host, ExtensionsHost):
        return "/skills is not available here."
    return (await host.list_skills()).rstrip("\n")


async def _model(host: SlashHost, arg: str) -> str:
    if not isinstance(host, ModelHost):
        return "/model is not available here."
    if not arg:
        return f"Model: {host.model_name()} (switch with /model NAME, for this session)"
    if len(arg.split()) != 1:
        return "Usage: /model [NAME] (one model name, e.g. /model claude-opus-4-1)"
    try:
        now = host.set_model(arg)
    except SynapseError as exc:
        return f"{exc.message} (the model stays {host.model_name()})"
    return f"Model: {now} from the next request on (this session only)."


def _chat(host: object) -> Any:
    """The host's current chat session (a host with `chat_session()`; an
    `agent.session.ChatSession`, not imported: it imports this table), else None."""
    getter = getattr(host, "chat_session", None)
    session: Any = getter() if callable(getter) else None
    return session if hasattr(session, "skill_enhance_on") else None


def _claude(host: object) -> Any:
    """The current session's Claude Code files (`agent.claude_code.ClaudeCode`), or None."""
    return getattr(_chat(host), "claude", None)


async def _hooks(host: SlashHost, arg: str) -> str:
    """The hooks in force for this session: by event, matcher, command and file."""
    session = _chat(host)
    if session is None:
        return "/hooks is not available here (no chat session)."
    if not isinstance(session.hooks, Hooks):
        return "No hooks run in this session (its commands have no permission gate)."
    return session.hooks.describe()


SKILL_USAGE = "Usage: /skill enhance [on|off]"


async def _skill(host: SlashHost, arg: str) -> str:
    """`/skill enhance [on|off]`: show or switch the background skill enhancement for
    this session (the `skillEnhance` setting is the default)."""
    words = arg.lower().split()
    if (
        not words
        or words[0] != "enhance"
        or len(words) > 2
        or words[1:] not in ([], ["on"], ["off"])
    ):
        return SKILL_USAGE
    session = _chat(host)
    if session is None:
        return "/skill is not available here (no chat session)."
    if words[1:]:
        session.skill_enhance = words[1] == "on"
    settings = session.settings
    if not session.skill_enhance_on:
        return "Skill enhancement: off for this session."
    return (
        "Skill enhancement: on for this session: after a turn with at least "
        f"{settings.skill_enhance_min_tools} tool calls, a background task:skill:enhance "
        "improves or creates a skill (announced in one line; undo with skill:rollback)."
    )


SESSION_COMMANDS = SlashRegistry(
    [
        SlashCommand("help", "/help", "this help", _help, aliases=("h", "?")),
        SlashCommand("exit", "/exit", "leave", _exit, aliases=("quit", "q")),
        SlashCommand("sessions", "/sessions", "list stored sessions", _sessions),
        SlashCommand(
            "resume",
            "/resume ID|PREFIX|--latest",
            "continue a stored session (a unique id prefix will do)",
            _resume,
        ),
        SlashCommand("clear", "/clear", "start a new session", _new, aliases=("new",)),
        SlashCommand(
            "tools", "/tools [QUERY]", "list this folder's mcp:* and skill:* commands", _tools
        ),
        SlashCommand("skills", "/skills", "list the installed skills (skill:list)", _skills),
        SlashCommand("model", "/model [NAME]", "show or switch the model for this session", _model),
        SlashCommand("hooks", "/hooks", "list the hooks in force, by event", _hooks),
        SlashCommand(
            "skill",
            "/skill enhance [on|off]",
            "show or switch background skill enhancement for this session",
            _skill,
        ),
        SlashCommand(
            "context", "/context", "what fills the context window, by part", context_command
        ),
        SlashCommand(
            "compact",
            "/compact [FOCUS]",
            "summarise older turns now (FOCUS: what the summary should keep)",
            compact_command,
        ),
        SlashCommand(
            "cost", "/cost", "tokens and cost of the last turn and the session", cost_command
        ),
        SlashCommand(
            "checkpoints",
            "/checkpoints",
            "the turns that can be rewound, with the files each changed",
            checkpoints_command,
        ),
        SlashCommand(
            "rewind",
            "/rewind TURN [--keep-chat] [--force]",
            "put the files back as before TURN and end the chat there",
            rewind_command,
        ),
    ]
)
