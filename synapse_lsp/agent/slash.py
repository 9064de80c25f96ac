"""Slash commands: one registry (name, aliases, usage, help, handler) for every face.

The REPL lists and runs them today; an editor or ACP client can list the same
table (`SlashRegistry.describe()`) and run them on its own `SlashHost`. Names are
case-insensitive and the leading `/` is optional when looking one up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from synapse_lsp.errors import SynapseError


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
        if command is None:
            return f"Unknown command {word}; /help lists them."
        return await command.handler(host, rest.strip())


async def _help(host: SlashHost, arg: str) -> str:
    return SESSION_COMMANDS.help_text()


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


async def _resume(host: SlashHost, arg: str) -> str:
    if not arg:
        return "Usage: /resume ID (see /sessions)"
    try:
        title = await host.resume(arg)
    except SynapseError as exc:
        return f"{exc.message} (the current session goes on)"
    return f"Resumed {arg}: {title}"


SESSION_COMMANDS = SlashRegistry(
    [
        SlashCommand("help", "/help", "this help", _help, aliases=("h", "?")),
        SlashCommand("exit", "/exit", "leave", _exit, aliases=("quit", "q")),
        SlashCommand("sessions", "/sessions", "list stored sessions", _sessions),
        SlashCommand("resume", "/resume ID", "continue a stored session", _resume),
        SlashCommand("clear", "/clear", "start a new session", _new, aliases=("new",)),
    ]
)
