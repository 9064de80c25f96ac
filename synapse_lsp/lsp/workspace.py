"""One workspace folder's live state: direct shell, router, extensions and chat sessions.

Everything is created on first use (a folder the user never chats in costs
nothing) and disposed when the folder is removed or the server shuts down:
`close()` kills every bash and MCP child it owns. Each chat session gets its
own shell (a router derived from the workspace's) so sessions run
concurrently without sharing a `cd`; the workspace's own shell serves
`synapse.shell.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.config import Settings

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.files import FileGateway
    from synapse_lsp.lsp.updates import UpdateStream
    from synapse_lsp.permissions import Asker, EditorPermissionGate
    from synapse_lsp.router import BashRouter, RouteResult
    from synapse_lsp.shell import ShellSession

log = logging.getLogger(__name__)


@dataclass
class LiveSession:
    """A chat session loaded in this server: its conversation, shell, gate and update stream."""

    chat: ChatSession
    workspace: WorkspaceContext
    shell: ShellSession
    gate: EditorPermissionGate
    stream: UpdateStream
    router: BashRouter
    turn: asyncio.Task[Any] | None = None
    prompt_id: Any = None  # JSON-RPC id of the running prompt request
    cancelled_by_request: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.chat.id

    @property
    def busy(self) -> bool:
        return bool(self.chat.busy)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.chat.busy:
                self.chat.cancel()
        if self.turn is not None and not self.turn.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self.turn), 5.0)
        await self.stream.close()
        close = getattr(self.chat, "close", None)
        if close is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(close(), 5.0)
        with contextlib.suppress(Exception):
            await self.shell.close()


class WorkspaceContext:
    """State of one workspace folder; see the module docstring."""

    def __init__(
        self,
        uri: str,
        root: Path,
        settings: Callable[[], Settings],
        files: Callable[[], FileGateway],
        ask: Asker,
        *,
        use_registry: bool = True,
        progress: Callable[[str], AbstractAsyncContextManager[None]] | None = None,
        mcp_imported: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.uri = uri
        self.root = root
        self._settings = settings
        self._files = files
        self._ask = ask
        self._use_registry = use_registry
        self._progress = progress
        self._mcp_imported = mcp_imported
        self._gate: EditorPermissionGate | None = None
        self.sessions: dict[str, LiveSession] = {}
        self.shell: ShellSession | None = None
        self.router: BashRouter | None = None
        self.registry: Any = None
        self.registry_error: str | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._registry_task: asyncio.Task[None] | None = None

    @property
    def gate(self) -> EditorPermissionGate:
        """The permission gate of the workspace's direct commands."""
        if self._gate is None:
            from synapse_lsp.permissions import EditorPermissionGate

            self._gate = EditorPermissionGate(self._settings, self.root, self._ask)
        return self._gate

    @property
    def files(self) -> FileGateway:
        return self._files()

    @property
    def settings(self) -> Settings:
        return self._settings()

    @property
    def started(self) -> bool:
        return self.router is not None

    async def ensure(self) -> BashRouter:
        """The workspace router (starting its shell and extension registry on first use)."""
        if self.router is not None:
            return self.router
        async with self._lock:
            if self._closed:
                from synapse_lsp.errors import SynapseError

                raise SynapseError(f"workspace {self.uri} was closed")
            if self.router is not None:
                return self.router
            from synapse_lsp.router import BashRouter
            from synapse_lsp.shell import ShellSession

            shell = ShellSession(self.root, self.settings)
            await shell.start()
            self.shell = shell
            router = BashRouter(shell, self.settings, files=self.files, permission=self.gate)
            if self._use_registry:
                await self._start_registry(router)
            self.router = router
            return router

    async def _start_registry(self, router: BashRouter) -> None:
        try:
            # Import off the event loop: the MCP SDK alone costs most of a second.
            module = await asyncio.to_thread(
                importlib.import_module, "synapse_lsp.extensions.registry"
            )
            registry = module.ExtensionRegistry(self.settings, self.root)
            router.extensions = registry
            for command in registry.builtins():
                router.register(command)
        except Exception as exc:  # extensions are optional: the shell must still work
            self.registry_error = f"extensions unavailable: {exc}"
            log.warning("workspace %s: %s", self.uri, self.registry_error)
            return
        self.registry = registry

        async def start() -> None:
            try:
                if self._mcp_imported is not None and self._has_mcp_config():
                    # The server's warm-up may be importing the MCP SDK right now.
                    await self._mcp_imported()
                await registry.start()
                if self._progress is not None and registry.pending_servers():
                    async with self._progress("Synapse: connecting MCP servers"):
                        await registry.wait_for_mcp(60.0)
            except Exception as exc:
                self.registry_error = f"extensions failed to start: {exc}"
                log.warning("workspace %s: %s", self.uri, self.registry_error)

        self._registry_task = asyncio.get_running_loop().create_task(
            start(), name=f"registry-{self.root.name}"
        )

    def _has_mcp_config(self) -> bool:
        from synapse_lsp.extensions.mcp_client import config_paths

        return any(path.is_file() for path in config_paths(self.settings, self.root))

    async def registry_ready(self) -> Any:
        """The started registry (or None when extensions are unavailable)."""
        await self.ensure()
        if self._registry_task is not None:
            with contextlib.suppress(Exception):
                await self._registry_task
        return self.registry

    def apply_settings(self, settings: Settings) -> None:
        """New settings reach live routers (timeouts, output limits, permission policy)."""
        if self.router is not None:
            self.router.settings = settings
        for live in self.sessions.values():
            live.router.settings = settings
            chat_router = getattr(live.chat, "router", None)
            if chat_router is not None:
                chat_router.settings = settings

    async def run(self, command: str, *, timeout: float | None = None) -> RouteResult:
        router = await self.ensure()
        if "mcp:" in command:
            # An MCP tool run right after start: let its server finish connecting
            # (bounded by the registry's connect wait) instead of "command not found".
            await self.registry_ready()
        if timeout is not None:
            router = router.derive()
            router.settings = replace(self.settings, command_timeout=timeout)
        return await router.route(command)

    async def restart_shell(self) -> None:
        await self.ensure()
        assert self.shell is not None
        await self.shell.restart()

    async def session_router(self) -> tuple[BashRouter, ShellSession, EditorPermissionGate]:
        """A router on a fresh shell (in the folder) for one chat session, with its own gate."""
        router = await self.ensure()
        from synapse_lsp.permissions import EditorPermissionGate
        from synapse_lsp.shell import ShellSession

        shell = ShellSession(self.root, self.settings)
        await shell.start()
        gate = EditorPermissionGate(self._settings, self.root, self._ask)
        return router.derive(shell=shell, permission=gate, state={}), shell, gate

    def search_tools(self, query: str, kind: str | None) -> list[dict[str, str]]:
        if self.registry is None:
            return []
        try:
            pattern = re.compile(query, re.IGNORECASE)
        except re.error:
            pattern = re.compile(re.escape(query), re.IGNORECASE)
        found: list[dict[str, str]] = []
        for command in sorted(self.registry.commands(), key=lambda c: c.name):
            ctype = "mcp" if command.name.startswith("mcp:") else "skill"
            if kind is not None and ctype != kind:
                continue
            if pattern.search(command.name) or pattern.search(command.summary):
                found.append(
                    {
                        "name": command.name,
                        "type": ctype,
                        "summary": command.summary,
                        "usage": command.usage,
                    }
                )
        return found

    def tool_count(self) -> int:
        return len(self.registry.commands()) if self.registry is not None else 0

    async def refresh_tools(self, what: str) -> dict[str, Any]:
        registry = await self.registry_ready()
        if registry is None:
            return {"tools": 0, "errors": [self.registry_error or "extensions unavailable"]}
        await registry.refresh(what)
        with contextlib.suppress(Exception):
            await registry.wait_for_mcp(30.0)
        return {"tools": self.tool_count(), "errors": list(registry.problems)}

    def child_pids(self) -> list[int]:
        """Process ids of the bash sessions this workspace owns (for last-resort cleanup)."""
        shells = [self.shell, *(s.shell for s in self.sessions.values())]
        return [s.pid for s in shells if s is not None and s.pid is not None]

    async def close(self) -> None:
        """Dispose everything: chat sessions, the direct shell, the registry and its children."""
        self._closed = True
        sessions = list(self.sessions.values())
        self.sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        if self._registry_task is not None and not self._registry_task.done():
            self._registry_task.cancel()
            with contextlib.suppress(BaseException):
                await self._registry_task
        if self.registry is not None:
            try:
                await asyncio.wait_for(self.registry.close(), 10.0)
            except BaseException as exc:  # keep closing the rest
                log.warning("workspace %s: closing extensions: %s", self.uri, exc)
        if self.shell is not None:
            with contextlib.suppress(Exception):
                await self.shell.close()
        self.router = None
