"""The chat sessions an LSP server holds live: create, list, load (with replay), delete,
run a prompt turn streaming its updates, cancel.

Each session lives in one workspace folder (`WorkspaceContext.sessions`) and is
indexed here by id; stored sessions (`$SYNAPSE_HOME/sessions/`) become live on
`load`. The agent, the store and the update stream are imported on first use,
never before `initialize` answers.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pygls.exceptions import JsonRpcInvalidParams

from synapse_lsp.config import Settings
from synapse_lsp.errors import SynapseError
from synapse_lsp.files import path_to_uri
from synapse_lsp.lsp.names import invalid, request_failed
from synapse_lsp.lsp.workspace import LspFace, WorkspaceContext

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.store import ChatStore
    from synapse_lsp.agent.turn_context import TurnContext
    from synapse_lsp.events import Event, TurnFinished
    from synapse_lsp.lsp.protocol import SessionInfo
    from synapse_lsp.lsp.updates import UpdateStream
    from synapse_lsp.lsp.workspace import EditorChat
    from synapse_lsp.router import BashRouter

log = logging.getLogger(__name__)


class Folders(Protocol):
    """How sessions find the workspace folder they belong to (the server's folders)."""

    def workspace_for(self, uri: str | None, command: str) -> WorkspaceContext: ...

    def find_workspace(self, where: str | None) -> WorkspaceContext | None: ...


def title_of(live: EditorChat) -> str:
    title = getattr(live.chat, "title", None)
    return title if isinstance(title, str) and title else "New chat"


def as_uri(where: str | None) -> str | None:
    """A stored workspace (a path or a URI) as a URI; anything else unchanged."""
    if where is None or "://" in where or where.startswith("file:"):
        return where
    return path_to_uri(where) if Path(where).is_absolute() else where


class LiveChats:
    """The live chat sessions of one server, by id, and the store they persist to."""

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        folders: Folders,
        stream: Callable[[str], UpdateStream],
        warmed: Callable[[str], Awaitable[None]],
    ) -> None:
        self._settings = settings
        self._folders = folders
        self._stream = stream
        self._warmed = warmed
        self._store: ChatStore | None = None
        self.live: dict[str, EditorChat] = {}
        # `$/cancelRequest` ids no running turn matched: a prompt whose handler has not
        # begun yet (the cancel came in the same read) ends at once when it does.
        self._cancelled_ids: deque[Any] = deque(maxlen=64)

    @property
    def store(self) -> ChatStore:
        root = self._settings().synapse_home / "sessions"
        if self._store is None or self._store.root != root:
            from synapse_lsp.agent.store import ChatStore

            self._store = ChatStore(root)
        return self._store

    def get(self, session_id: str, command: str) -> EditorChat:
        live = self.live.get(session_id)
        if live is None:
            raise invalid(
                f"{command}: unknown sessionId {session_id!r} "
                "(create one with synapse.session.new or load it with synapse.session.load)"
            )
        return live

    async def _add(
        self, ws: WorkspaceContext, make_chat: Callable[[BashRouter], ChatSession]
    ) -> EditorChat:
        tools = await ws.session_tools()
        try:
            chat = make_chat(tools.router)
        except BaseException:
            await tools.shell.close()
            raise
        from synapse_lsp.agent.store import now_iso
        from synapse_lsp.agent.turns import LiveChat
        from synapse_lsp.lsp.elicit import elicitor

        face = LspFace(
            workspace=ws,
            shell=tools.shell,
            gate=tools.gate,
            stream=self._stream(chat.id),
            router=tools.router,
            created=now_iso(),
        )
        live = LiveChat(chat, face)
        chat.mcp.elicitor = elicitor(self._folders)  # the server: its `ask_user`
        ws.sessions[chat.id] = live
        self.live[chat.id] = live
        return live

    async def new(self, ws: WorkspaceContext) -> EditorChat:
        from synapse_lsp.agent.session import ChatSession

        store = self.store
        # The folder's live source: the session follows its `.synapse/settings.json` and
        # every later change of the editor's settings from its next model call.
        return await self._add(
            ws,
            lambda router: ChatSession(
                router, ws.live_settings, store=store, workspace_root=ws.root
            ),
        )

    def list(self, ws: WorkspaceContext | None) -> list[SessionInfo]:
        from synapse_lsp.lsp.protocol import SessionInfo

        """Stored and live sessions (of `ws`, else of every folder), newest first."""
        rows: dict[str, SessionInfo] = {}
        try:
            infos = self.store.list()
        except Exception as exc:
            log.warning("listing sessions: %s", exc)
            infos = []
        for info in infos:
            row_ws = self._folders.find_workspace(info.workspace)
            if ws is not None and row_ws is not ws:
                continue
            live = self.live.get(info.id)
            rows[info.id] = SessionInfo(
                session_id=info.id,
                title=info.title,
                workspace_uri=row_ws.uri if row_ws is not None else as_uri(info.workspace),
                created_at=info.created_at,
                updated_at=info.updated_at,
                busy=bool(live is not None and live.busy),
            )
        for sid, live in self.live.items():
            if sid in rows or (ws is not None and live.face.workspace is not ws):
                continue
            created = live.face.created
            rows[sid] = SessionInfo(
                session_id=sid,
                title=title_of(live),
                workspace_uri=live.face.workspace.uri,
                created_at=created,
                updated_at=created,
                busy=live.busy,
            )
        ordered = sorted(rows.values(), key=lambda r: (r.updated_at, r.session_id))
        return list(reversed(ordered))

    async def load(self, session_id: str, workspace_uri: str | None, command: str) -> EditorChat:
        """Make a stored session live (if it is not) and replay its history to the client."""
        live = self.live.get(session_id)
        if live is None:
            live = await self._resume(session_id, workspace_uri, command)
        from synapse_lsp.lsp.updates import event_to_update

        for event in live.chat.transcript():
            update = event_to_update(event)
            if update is not None:
                await live.face.stream.put(update, replay=True)
        await live.face.stream.flush()
        return live

    async def _resume(self, session_id: str, uri: str | None, command: str) -> EditorChat:
        from synapse_lsp.agent.session import ChatSession
        from synapse_lsp.agent.store import SessionNotFoundError

        store = self.store
        try:
            info = store.info(session_id)
        except (SessionNotFoundError, FileNotFoundError):
            raise invalid(f"{command}: unknown sessionId {session_id!r}") from None
        ws = self._folders.find_workspace(info.workspace)
        if ws is None:
            try:
                ws = self._folders.workspace_for(uri, command)
            except JsonRpcInvalidParams:
                if uri is not None:
                    raise
                raise invalid(
                    f"{command}: the session's folder {info.workspace!r} is not open; "
                    "pass `workspaceUri` to load it into another folder"
                ) from None
        settings, root = ws.live_settings, ws.root
        return await self._add(
            ws,
            lambda router: ChatSession.resume(
                store, session_id, router, settings, workspace_root=root
            ),
        )

    async def delete(self, session_id: str, command: str) -> None:
        """Cancel a running turn, close the live session and remove it from the store."""
        live = self.live.pop(session_id, None)
        if live is not None:
            live.face.workspace.sessions.pop(session_id, None)
            await live.close()
        from synapse_lsp.agent.store import SessionNotFoundError
        from synapse_lsp.checkpoints import forget_session

        folder = live.face.workspace.root if live is not None else None
        with contextlib.suppress(SynapseError, OSError):
            stored = self.store.info(session_id).workspace
            folder = Path(stored) if stored else folder
        try:
            self.store.delete(session_id)
        except (SessionNotFoundError, FileNotFoundError):
            if live is None:
                raise invalid(f"{command}: unknown sessionId {session_id!r}") from None
        # Its snapshots (old file versions) are deleted too: through the live session's
        # keeper, whose last snapshot may still run, else straight in the store.
        if live is not None:
            await live.chat.checkpoints.forget()
        if folder is not None:
            await forget_session(self._settings().synapse_home, folder, session_id)

    async def prompt(
        self,
        session_id: str,
        text: str,
        context: TurnContext | None,
        *,
        request_id: Any,
        command: str,
    ) -> TurnFinished:
        """Run one turn, streaming its updates; resolves after they are flushed."""
        live = self.get(session_id, command)
        from synapse_lsp.errors import SessionBusyError
        from synapse_lsp.events import TurnFinished, Usage
        from synapse_lsp.lsp.updates import event_to_update, user_message

        stream = live.face.stream

        async def prepare() -> None:
            # The model SDK may still be importing in the background: wait for it here,
            # off the event loop, rather than import it again on the loop's thread.
            await self._warmed("sdk")
            self.get(session_id, command)  # not deleted meanwhile
            await stream.put(user_message(text))

        async def render(event: Event) -> None:
            update = event_to_update(event, cwd=live.face.shell.cwd)
            if update is not None:
                await stream.put(update)
            if isinstance(event, TurnFinished):
                await stream.flush()

        if request_id is not None and request_id in self._cancelled_ids:
            self._cancelled_ids.remove(request_id)
            return TurnFinished("cancelled", Usage())
        try:
            return await live.run(text, context, render, request_id=request_id, prepare=prepare)
        except SessionBusyError:
            raise request_failed(
                f"session {session_id} is already running a turn; wait for it to end or "
                "cancel it (synapse.session.cancel)",
                "session_busy",
            ) from None

    def cancel(self, session_id: str, command: str) -> bool:
        """Cancel the running turn; False when none was running."""
        return self.get(session_id, command).cancel()

    def request_cancelled(self, request_id: Any) -> None:
        """`$/cancelRequest`: a cancelled prompt request cancels its turn (kept for a
        prompt whose handler has not begun yet)."""
        matched = False
        for live in self.live.values():
            with contextlib.suppress(Exception):
                matched = live.cancel_request(request_id) or matched
        if not matched:
            self._cancelled_ids.append(request_id)

    def forget(self, ws: WorkspaceContext) -> None:
        """The folder is going away (it closes its own sessions)."""
        for sid in list(ws.sessions):
            self.live.pop(sid, None)
