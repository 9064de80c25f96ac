"""`chat -p`: the first model request goes out before the shell and the extensions start.

A one-shot chat has nothing to show before its answer, and its first request needs
only the model SDK, the system prompt (the built-ins, the registry's included) and
the prompt. So `Runtime.start` prepares the folder's router (`Workspace.prepare`:
built-ins registered, nothing started) and `DeferredStart` starts the rest - bash,
the extension registry (skills, MCP servers, watcher, socket) - once a request is on
the wire (`ModelClient.sent`), while the model thinks. The session's commands wait
for that start before anything else (`attach`), so a command runs exactly as it
would have; the notes of the start (a sandbox that could not run, extensions that
failed) are printed then, before any command's output (and handed to `listeners`:
`--output-format stream-json` makes them `notice` events). A start that fails (bash
cannot start) is said as `synapse chat: …` and ends the turn.

With a prompt given in text (one turn), no extension watcher starts (`Runtime.watch`):
the turn has the extensions there are when it starts, as `synapse exec`; an exit then
spares the kernel's teardown of inotify instances (7-9 ms from `os._exit` to the
process reaped instead of 15-20 ms). `--input-format stream-json` turns keep it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from synapse_lsp.cli.startup import quiet_notes
from synapse_lsp.errors import SynapseError

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.core import Workspace


class DeferredStart:
    """Starts a prepared `workspace` once `model` sent its first request (a task the
    workspace owns: closing the workspace ends it)."""

    def __init__(self, workspace: Workspace, model: ModelClient, quiet: Iterable[str] = ()):
        self.workspace = workspace
        self.model = model
        self.quiet = tuple(quiet)
        self.session: ChatSession | None = None
        self.listeners: list[Callable[[str], None]] = []  # each note of the start, too
        self.task = workspace.tasks.spawn(self._start(), "start after the first request")

    async def _start(self) -> None:
        await self.model.sent.wait()
        try:
            await self.workspace.start()
        except SynapseError as exc:
            self._say(f"synapse chat: {exc.message}")
            if self.session is not None:
                self.session.cancel()
            return
        notes: list[str] = []
        shell = self.workspace.shell
        if shell is not None and shell.sandbox.reason is not None:
            notes.append(f"warning: {shell.sandbox.describe()}")
        if self.workspace.registry_error is not None:
            notes.append(self.workspace.registry_error)
        for note in quiet_notes(notes, self.quiet):
            self._say(note)

    def _say(self, note: str) -> None:
        print(note, file=sys.stderr)
        for listener in self.listeners:
            listener(note)

    def attach(self, session: ChatSession) -> None:
        """`session`'s commands wait for the start first."""
        self.session = session
        router = session.router
        before = router.before_command
        task = self.task

        async def started_first() -> None:
            if not task.done():
                # asyncio.wait: a cancel of the command is the command's, not the start's
                await asyncio.wait({task})
            if before is not None:
                await before()

        router.before_command = started_first

        async def start_now() -> None:  # a `/mcp:…` prompt line needs the registry first
            self.model.sent.set()
            await asyncio.wait({task})
            await self.workspace.registry_ready()

        session.mcp.ready = start_now
