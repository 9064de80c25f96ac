"""One workspace folder in the LSP server: the core's assembly plus its chat sessions.

Everything is created on first use (a folder the user never chats in costs
nothing) and disposed when the folder is removed or the server shuts down:
`close()` ends every session, bash and MCP child it owns. Each chat session gets
its own shell (`core.Workspace.session_tools`) so sessions run concurrently
without sharing a `cd`; the folder's own shell serves `synapse.shell.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from synapse_lsp.config import LiveSettings
from synapse_lsp.core import Progress, Workspace

if TYPE_CHECKING:
    from synapse_lsp.agent.turns import LiveChat
    from synapse_lsp.files import FileGateway
    from synapse_lsp.lsp.updates import UpdateStream
    from synapse_lsp.policy.gate import Asker, AskingGate
    from synapse_lsp.router import BashRouter
    from synapse_lsp.shell import ShellSession

    # A chat session loaded in this server: the one live-chat record (its turn driver,
    # agent/turns.py) with what the LSP face keeps beside it.
    EditorChat = LiveChat["LspFace"]


@dataclass
class LspFace:
    """What the LSP face keeps for one live chat: its folder, shell, gate, router and
    update stream (the chat and its turns are the `LiveChat`'s)."""

    workspace: WorkspaceContext
    shell: ShellSession
    gate: AskingGate | None
    stream: UpdateStream
    router: BashRouter
    created: str = ""  # when it became live (a session not stored yet has no other date)

    def closing(self) -> None:
        """Nothing to begin: the folder's extensions outlive its chats."""

    async def close(self) -> None:
        await self.stream.close()
        with contextlib.suppress(Exception):
            await self.shell.close()


class WorkspaceContext(Workspace):
    """A folder of the editor: `core.Workspace` plus the chat sessions loaded in it."""

    def __init__(
        self,
        uri: str,
        root: Path,
        settings: LiveSettings,
        files: Callable[[], FileGateway],
        ask: Asker,
        *,
        use_registry: bool = True,
        progress: Progress | None = None,
        mcp_imported: Callable[[], Awaitable[None]] | None = None,
        trusted: bool | None = None,
    ) -> None:
        super().__init__(
            root,
            settings,
            files=files,
            ask=ask,
            extensions=use_registry,
            progress=progress,
            before_mcp=mcp_imported,
            trusted=trusted,
        )
        self.uri = uri
        self.live_settings = settings
        self.sessions: dict[str, EditorChat] = {}

    async def close(self) -> None:
        """Dispose everything: chat sessions first, then the folder's own tools."""
        sessions = list(self.sessions.values())
        self.sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        await super().close()
