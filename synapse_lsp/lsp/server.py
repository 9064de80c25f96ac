"""`synapse lsp`: the pygls server that puts the agent behind any LSP editor.

Thin handlers over the core (docs/protocol.md is the contract): commands via
`workspace/executeCommand`, turns streamed as `synapse/sessionUpdate`, edits
sent as `workspace/applyEdit` (editor_files.py), permission asks through
`window/showMessageRequest` (permissions.py). The model SDK, MCP and even the
router are imported on first use so the server answers `initialize` about as
fast as a bare pygls server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcMethodNotFound,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from synapse_lsp import __version__
from synapse_lsp.config import LiveSettings, Settings
from synapse_lsp.errors import SynapseError
from synapse_lsp.tasks import TaskOwner
from synapse_lsp.lsp.workspace import LiveSession, WorkspaceContext

# Editor files, updates, permissions, the router and the agent are imported on first
# use: `initialize` must not wait for them (cold start within 1.3x of bare pygls).
if TYPE_CHECKING:
    from synapse_lsp.agent.session import TurnContext
    from synapse_lsp.agent.store import SessionStore
    from synapse_lsp.lsp.editor_files import EditorFiles
    from synapse_lsp.lsp.updates import UpdateStream
    from synapse_lsp.lsp.warmup import Warmup

log = logging.getLogger("synapse_lsp.lsp.server")

SESSION_UPDATE = "synapse/sessionUpdate"
REQUEST_FAILED = -32803
INTERNAL_ERROR = -32603
LOG_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO}
LOG_LEVELS["debug"] = logging.DEBUG  # the names are config.LOG_LEVELS
_LSP_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}
WRITE_HIGH_WATER = 256 * 1024

COMMANDS: dict[str, str] = {
    "synapse.session.new": "cmd_session_new",
    "synapse.session.list": "cmd_session_list",
    "synapse.session.load": "cmd_session_load",
    "synapse.session.delete": "cmd_session_delete",
    "synapse.session.prompt": "cmd_session_prompt",
    "synapse.session.cancel": "cmd_session_cancel",
    "synapse.shell.run": "cmd_shell_run",
    "synapse.shell.restart": "cmd_shell_restart",
    "synapse.tools.search": "cmd_tools_search",
    "synapse.tools.refresh": "cmd_tools_refresh",
    "synapse.status": "cmd_status",
}


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def request_failed(message: str, reason: str) -> JsonRpcException:
    return JsonRpcException(message, code=REQUEST_FAILED, data={"reason": reason})


class Args:
    """The one object argument of a command, with typed getters that fail as InvalidParams."""

    def __init__(self, command: str, raw: tuple[Any, ...]) -> None:
        self.command = command
        if not raw:
            self.data: dict[str, Any] = {}
        elif len(raw) == 1 and isinstance(raw[0], dict):
            self.data = raw[0]
        elif len(raw) == 1 and raw[0] is None:
            self.data = {}
        else:
            raise invalid(
                f"{command}: expected exactly one argument, an object "
                f'(e.g. [{{"sessionId": "..."}}]); got {len(raw)} argument(s)'
                + (f" of type {type(raw[0]).__name__}" if len(raw) == 1 else "")
            )

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if value is None:
            raise invalid(f"{self.command}: missing required argument `{key}`")
        if not isinstance(value, str):
            raise invalid(f"{self.command}: `{key}` must be a string, not {_json_type(value)}")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise invalid(f"{self.command}: `{key}` must be a string, not {_json_type(value)}")
        return value

    def opt_number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise invalid(f"{self.command}: `{key}` must be a positive number")
        return float(value)

    def opt_obj(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise invalid(f"{self.command}: `{key}` must be an object, not {_json_type(value)}")
        return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else "null"


def _path_of_uri(uri: str) -> Path | None:
    from pygls.uris import to_fs_path

    if not uri.startswith("file:"):
        return None
    fs = to_fs_path(uri)
    return Path(os.path.realpath(fs)) if fs else None


class _Answered:
    """Marker: a malformed request that has already been answered with an error."""

    jsonrpc = "answered"


_ANSWERED = _Answered()


class SynapseProtocol(LanguageServerProtocol):
    """pygls' protocol plus: `$/cancelRequest` reaches running prompts, malformed
    params get an InvalidParams answer (not silence), unknown commands MethodNotFound."""

    _server: SynapseServer

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        super()._handle_cancel_notification(msg_id)
        self._server.request_cancelled(msg_id)

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                detail = _validation_detail(exc)
                error = JsonRpcInvalidParams(
                    f"{data['method']}: malformed params{': ' + detail if detail else ''}"
                )
                self._send_response(data["id"], error=error.to_response_error())
                return _ANSWERED
            raise

    def handle_message(self, message: Any) -> None:
        if message is _ANSWERED:
            return
        super().handle_message(message)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        if params.command not in self.fm.commands:
            raise JsonRpcMethodNotFound(
                f"unknown command {params.command!r}; known: {', '.join(sorted(COMMANDS))}"
            )
        return (yield from super().lsp_workspace__execute_command(params))


def _validation_detail(exc: BaseException) -> str:
    cause = exc.__cause__
    if cause is None:
        return ""
    try:
        import cattrs

        if isinstance(cause, cattrs.ClassValidationError):
            return "; ".join(cattrs.transform_error(cause))[:500]
    except Exception:
        pass
    return str(cause)[:500]


# ------------------------------------------------------------------------ stdio


class _WriteFlow(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.lost = False

    def pause_writing(self) -> None:
        self.resumed.clear()

    def resume_writing(self) -> None:
        self.resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resumed.set()


class PipeWriter:
    """Non-blocking stdout: the event loop never blocks on a client that stops reading;
    session updates wait in `drained()` instead (bounded memory)."""

    def __init__(self, transport: asyncio.WriteTransport, flow: _WriteFlow) -> None:
        self._transport = transport
        self._flow = flow

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._transport.close()

    async def drained(self) -> None:
        await self._flow.resumed.wait()

    async def flush(self, timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while (
            not self._flow.lost
            and self._transport.get_write_buffer_size() > 0
            and asyncio.get_running_loop().time() < deadline
        ):
            await asyncio.sleep(0.01)


class PipeReader:
    """`readline`/`readexactly` over an asyncio pipe, returning b"" at end of input."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        return await self._reader.readline()

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""


# ----------------------------------------------------------------------- server


class SynapseServer(LanguageServer):
    def __init__(self, *, settings: LiveSettings | None = None) -> None:
        super().__init__(
            "synapse",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=SynapseProtocol,
        )
        self.live_settings = settings if settings is not None else LiveSettings()
        self.init_options: dict[str, Any] = {}
        self._files: EditorFiles | None = None
        self.workspaces: dict[str, WorkspaceContext] = {}
        self.sessions: dict[str, LiveSession] = {}
        self._store: SessionStore | None = None
        self.tasks = TaskOwner("server")
        self._writer: PipeWriter | None = None
        self._disposed = False
        self._log_handler: _LspLogHandler | None = None
        self._configured: asyncio.Event | None = None
        self.warmup: Warmup | None = None
        self._register()

    @property
    def files(self) -> EditorFiles:
        if self._files is None:
            from synapse_lsp.lsp.editor_files import EditorFiles

            self._files = EditorFiles(self)
        return self._files

    @property
    def settings(self) -> Settings:
        """The server-wide settings (a folder adds its own `.synapse/settings.json`)."""
        return self.live_settings()

    # -- registration

    def _register(self) -> None:
        for name, method in COMMANDS.items():
            self.command(name)(_command_handler(name, method))
        self.feature(types.INITIALIZE)(_on_initialize)
        self.feature(types.INITIALIZED)(_on_initialized)
        self.feature(types.SHUTDOWN)(_on_shutdown)
        self.feature(types.TEXT_DOCUMENT_DID_OPEN)(_on_document)
        self.feature(types.TEXT_DOCUMENT_DID_CHANGE)(_on_document)
        self.feature(types.TEXT_DOCUMENT_DID_CLOSE)(_on_document)
        self.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(_on_folders)
        self.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_on_configuration)

    # -- background work that is always owned

    def run_task(self, coro: Any, name: str) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro, name)

    # -- warm-up of heavy imports (after `initialized`)

    def start_warmup(self) -> None:
        """Import the model SDK (and the MCP SDK if a folder has MCP servers) on a
        daemon thread, so the first prompt does not wait for them; see warmup.py."""
        from synapse_lsp.lsp.warmup import ENV_SWITCH, Warmup

        if self.warmup is not None or self._disposed or os.environ.get(ENV_SWITCH) == "0":
            return
        roots: list[Path | None] = [ws.root for ws in self.workspaces.values()] or [None]

        def need_mcp() -> bool:
            from synapse_lsp.extensions.mcp_client import config_paths

            return any(
                path.is_file() for root in roots for path in config_paths(self.settings, root)
            )

        self.warmup = Warmup(need_mcp=need_mcp)
        self.warmup.start()

    async def warmed(self, stage: str) -> None:
        """Wait (bounded, without blocking the loop) for a warm-up stage that is running."""
        if self.warmup is not None:
            await self.warmup.ready(stage)

    # -- settings

    def apply_settings(self, *sources: dict[str, Any], notify: bool = True) -> None:
        """The face's layer of settings (initializationOptions, then workspace/configuration);
        validated in config.py, live in every folder, shell and session at once."""
        problems = self.live_settings.set_face(*sources)
        for ws in self.workspaces.values():
            problems += [p for p in ws.live_settings.problems if p not in problems]
        if self._log_handler is not None:
            self._log_handler.setLevel(LOG_LEVELS[self.settings.log_level])
        if problems and notify:
            self.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Warning,
                    message="Synapse settings: " + "; ".join(problems),
                )
            )
        for problem in problems:
            log.warning("settings: %s", problem)

    async def configured(self) -> None:
        """Commands wait (bounded) for the first `workspace/configuration` answer, so
        none runs under a permission policy the user has already changed."""
        if self._configured is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._configured.wait(), 10.0)

    async def read_configuration(self) -> None:
        caps = self.client_capabilities.workspace
        if caps is None or not caps.configuration:
            return
        try:
            values = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="synapse")])
                ),
                10.0,
            )
        except Exception as exc:
            log.info("workspace/configuration failed: %s", exc)
            return
        config = values[0] if values else None
        if isinstance(config, dict):
            self.apply_settings(self.init_options, config)

    # -- workspaces

    def add_folder(self, uri: str) -> None:
        key = uri.rstrip("/")
        if key in self.workspaces:
            return
        path = _path_of_uri(uri) or Path.cwd()
        self.workspaces[key] = WorkspaceContext(
            key,
            path,
            self.live_settings.for_folder(path),
            lambda: self.files,
            self.ask_user,
            progress=self.work_progress,
            mcp_imported=lambda: self.warmed("mcp"),
        )

    async def remove_folder(self, uri: str) -> None:
        ws = self.workspaces.pop(uri.rstrip("/"), None)
        if ws is None:
            return
        for sid in list(ws.sessions):
            self.sessions.pop(sid, None)
        await ws.close()

    def workspace_for(self, uri: str | None, command: str) -> WorkspaceContext:
        if uri is None:
            if len(self.workspaces) == 1:
                return next(iter(self.workspaces.values()))
            raise invalid(
                f"{command}: `workspaceUri` is required: the server has "
                f"{len(self.workspaces)} workspace folders"
            )
        key = uri.rstrip("/")
        if key in self.workspaces:
            return self.workspaces[key]
        path = _path_of_uri(uri)
        best: WorkspaceContext | None = None
        if path is not None:
            for ws in self.workspaces.values():
                root = Path(os.path.realpath(ws.root))
                if (path == root or root in path.parents) and (
                    best is None or len(str(root)) > len(str(best.root))
                ):
                    best = ws
        if best is None:
            known = ", ".join(self.workspaces) or "none"
            raise invalid(f"{command}: unknown workspace {uri!r} (open folders: {known})")
        return best

    # -- asking the user

    async def ask_user(self, message: str, actions: tuple[str, ...]) -> str | None:
        result = await self.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Warning,
                message=message,
                actions=[types.MessageActionItem(title=a) for a in actions],
            )
        )
        return result.title if result is not None else None

    @contextlib.asynccontextmanager
    async def work_progress(self, title: str) -> AsyncIterator[None]:
        """Work-done progress around non-chat work, when the client supports it."""
        window = self.client_capabilities.window
        token: str | None = None
        if window is not None and window.work_done_progress:
            token = f"synapse-{uuid.uuid4().hex[:12]}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), 5.0)
                self.work_done_progress.begin(
                    token, types.WorkDoneProgressBegin(title=title, cancellable=False)
                )
            except Exception:
                token = None
        try:
            yield
        finally:
            if token is not None:
                with contextlib.suppress(Exception):
                    self.work_done_progress.end(token, types.WorkDoneProgressEnd())

    # -- sessions

    @property
    def store(self) -> SessionStore:
        root = self.settings.synapse_home / "sessions"
        if self._store is None or self._store.root != root:
            from synapse_lsp.agent.store import SessionStore

            self._store = SessionStore(root)
        return self._store

    def live(self, session_id: str, command: str) -> LiveSession:
        live = self.sessions.get(session_id)
        if live is None:
            raise invalid(
                f"{command}: unknown sessionId {session_id!r} "
                "(create one with synapse.session.new or load it with synapse.session.load)"
            )
        return live

    def _stream(self, session_id: str) -> UpdateStream:
        from synapse_lsp.lsp.updates import UpdateStream

        writer = self._writer
        return UpdateStream(
            session_id,
            lambda payload: self.protocol.notify(SESSION_UPDATE, payload),
            drained=writer.drained if writer is not None else None,
            on_error=lambda exc: log.warning("sending an update failed: %s", exc),
        )

    async def _new_live(self, ws: WorkspaceContext, make_chat: Callable[[Any], Any]) -> LiveSession:
        tools = await ws.session_tools()
        router, shell, gate = tools.router, tools.shell, tools.gate
        try:
            chat = make_chat(router)
        except BaseException:
            await shell.close()
            raise
        live = LiveSession(
            chat=chat,
            workspace=ws,
            shell=shell,
            gate=gate,
            stream=self._stream(chat.id),
            router=router,
        )
        from synapse_lsp.agent.store import now_iso

        live.extra["created"] = now_iso()
        ws.sessions[chat.id] = live
        self.sessions[chat.id] = live
        return live

    def request_cancelled(self, msg_id: Any) -> None:
        """`$/cancelRequest`: a cancelled prompt request cancels its turn."""
        for live in self.sessions.values():
            if live.prompt_id is not None and live.prompt_id == msg_id:
                with contextlib.suppress(Exception):
                    live.chat.cancel()

    # -- commands

    async def cmd_session_new(self, args: Args) -> dict[str, Any]:
        ws = self.workspace_for(args.opt_text("workspaceUri"), args.command)
        from synapse_lsp.agent.session import ChatSession

        settings = self.settings
        store = self.store
        live = await self._new_live(
            ws,
            lambda router: ChatSession(router, settings, store=store, workspace_root=ws.root),
        )
        return {"sessionId": live.id, "workspaceUri": ws.uri, "title": _title(live.chat)}

    async def cmd_session_list(self, args: Args) -> dict[str, Any]:
        uri = args.opt_text("workspaceUri")
        ws = self.workspace_for(uri, args.command) if uri is not None else None
        rows: dict[str, dict[str, Any]] = {}
        try:
            infos = self.store.list()
        except Exception as exc:
            log.warning("listing sessions: %s", exc)
            infos = []
        for info in infos:
            row_ws = self._workspace_of_stored(info.workspace)
            if ws is not None and row_ws is not ws:
                continue
            live = self.sessions.get(info.id)
            rows[info.id] = {
                "sessionId": info.id,
                "title": info.title,
                "workspaceUri": row_ws.uri if row_ws is not None else _as_uri(info.workspace),
                "createdAt": info.created_at,
                "updatedAt": info.updated_at,
                "busy": bool(live is not None and live.busy),
            }
        for sid, live in self.sessions.items():
            if sid in rows or (ws is not None and live.workspace is not ws):
                continue
            rows[sid] = {
                "sessionId": sid,
                "title": _title(live.chat),
                "workspaceUri": live.workspace.uri,
                "createdAt": live.extra.get("created", ""),
                "updatedAt": live.extra.get("created", ""),
                "busy": live.busy,
            }
        ordered = sorted(rows.values(), key=lambda r: (r["updatedAt"], r["sessionId"]))
        return {"sessions": list(reversed(ordered))}

    def _workspace_of_stored(self, where: str | None) -> WorkspaceContext | None:
        if not where:
            return None
        uri = _as_uri(where)
        try:
            return self.workspace_for(uri, "")
        except JsonRpcException:
            return None

    async def cmd_session_load(self, args: Args) -> dict[str, Any]:
        session_id = args.text("sessionId")
        live = self.sessions.get(session_id)
        if live is None:
            from synapse_lsp.agent.session import ChatSession
            from synapse_lsp.agent.store import SessionNotFoundError

            store = self.store
            try:
                info = store.info(session_id)
            except (SessionNotFoundError, FileNotFoundError):
                raise invalid(f"{args.command}: unknown sessionId {session_id!r}") from None
            ws = self._workspace_of_stored(info.workspace)
            if ws is None:
                uri = args.opt_text("workspaceUri")
                if uri is None and len(self.workspaces) != 1:
                    raise invalid(
                        f"{args.command}: the session's folder {info.workspace!r} is not open; "
                        "pass `workspaceUri` to load it into another folder"
                    )
                ws = self.workspace_for(uri, args.command)
            settings = self.settings
            live = await self._new_live(
                ws,
                lambda router: ChatSession.resume(
                    store, session_id, router, settings, workspace_root=ws.root
                ),
            )
        from synapse_lsp.lsp.updates import event_to_update

        for event in live.chat.transcript():
            update = event_to_update(event)
            if update is not None:
                await live.stream.put(update, replay=True)
        await live.stream.flush()
        return {
            "sessionId": live.id,
            "title": _title(live.chat),
            "workspaceUri": live.workspace.uri,
        }

    async def cmd_session_delete(self, args: Args) -> dict[str, Any]:
        session_id = args.text("sessionId")
        live = self.sessions.pop(session_id, None)
        if live is not None:
            live.workspace.sessions.pop(session_id, None)
            await live.close()
        from synapse_lsp.agent.store import SessionNotFoundError

        try:
            self.store.delete(session_id)
        except (SessionNotFoundError, FileNotFoundError):
            if live is None:
                raise invalid(f"{args.command}: unknown sessionId {session_id!r}") from None
        return {"deleted": True}

    async def cmd_session_prompt(self, args: Args) -> dict[str, Any]:
        session_id = args.text("sessionId")
        text = args.text("text")
        context = _turn_context(args)
        self.live(session_id, args.command)
        # The model SDK may still be importing in the background: wait for it here,
        # off the event loop, rather than import it again on the loop's thread.
        await self.warmed("sdk")
        live = self.live(session_id, args.command)
        if live.turn is not None or live.busy:
            raise request_failed(
                f"session {session_id} is already running a turn; wait for it to end or "
                "cancel it (synapse.session.cancel)",
                "session_busy",
            )
        from synapse_lsp.errors import SessionBusyError
        from synapse_lsp.events import TurnFinished
        from synapse_lsp.lsp.updates import event_to_update, usage_dict, user_message

        live.turn = asyncio.current_task()
        live.prompt_id = self.protocol.msg_id
        finished: TurnFinished | None = None
        try:
            events = live.chat.run_turn(text, context)
        except SessionBusyError as exc:
            live.turn = None
            live.prompt_id = None
            raise request_failed(str(exc), "session_busy") from None
        try:
            await live.stream.put(user_message(text))
            async for event in events:
                update = event_to_update(event, cwd=live.shell.cwd)
                if update is not None:
                    await live.stream.put(update)
                if isinstance(event, TurnFinished):
                    finished = event
            await live.stream.flush()
        except SessionBusyError as exc:
            raise request_failed(str(exc), "session_busy") from None
        except asyncio.CancelledError:
            # Shutdown (or the loop ending): stop the turn, keep its history consistent.
            with contextlib.suppress(Exception):
                live.chat.cancel()
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                with contextlib.suppress(BaseException):
                    await close()
            live.turn = None
            live.prompt_id = None
        if finished is None:
            return {"stopReason": "error", "usage": usage_dict_zero(), "error": "turn ended early"}
        result: dict[str, Any] = {
            "stopReason": finished.stop_reason,
            "usage": usage_dict(finished.usage),
        }
        if finished.error is not None:
            result["error"] = finished.error
        return result

    async def cmd_session_cancel(self, args: Args) -> dict[str, Any]:
        live = self.live(args.text("sessionId"), args.command)
        running = live.turn is not None or live.busy
        if running:
            live.chat.cancel()
        return {"cancelled": running}

    async def cmd_shell_run(self, args: Args) -> dict[str, Any]:
        command = args.text("command")
        timeout = args.opt_number("timeout")
        ws = self.workspace_for(args.opt_text("workspaceUri"), args.command)
        result = await ws.run(command, timeout=timeout)
        return {
            "exitCode": result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "isError": result.is_error,
            "layer": str(result.layer),
            "category": str(result.category) if result.category is not None else None,
            "text": result.text,
        }

    async def cmd_shell_restart(self, args: Args) -> dict[str, Any]:
        session_id = args.opt_text("sessionId")
        if session_id is not None:
            await self.live(session_id, args.command).shell.restart()
        else:
            ws = self.workspace_for(args.opt_text("workspaceUri"), args.command)
            await ws.restart_shell()
        return {"restarted": True}

    async def cmd_tools_search(self, args: Args) -> dict[str, Any]:
        query = args.opt_text("query") or ""
        kind = args.opt_text("type")
        if kind not in (None, "mcp", "skill"):
            raise invalid(f'{args.command}: `type` must be "mcp" or "skill", not {kind!r}')
        ws = self.workspace_for(args.opt_text("workspaceUri"), args.command)
        await ws.registry_ready()
        return {"tools": [match.as_dict() for match in ws.search(query, kind)]}

    async def cmd_tools_refresh(self, args: Args) -> dict[str, Any]:
        what = args.opt_text("what") or "all"
        if what not in ("mcp", "skills", "all"):
            raise invalid(f"{args.command}: `what` must be mcp, skills or all, not {what!r}")
        ws = self.workspace_for(args.opt_text("workspaceUri"), args.command)
        async with self.work_progress(f"Synapse: refreshing {what} tools"):
            return await ws.refresh_tools(what)

    async def cmd_status(self, args: Args) -> dict[str, Any]:
        return {
            "version": __version__,
            "model": self.settings.model,
            "maxTokens": self.settings.max_tokens,
            "thinkingBudget": self.settings.thinking_budget,
            "apiKey": bool(os.environ.get(self.settings.api_key_env)),
            "workspaces": [
                {
                    "uri": ws.uri,
                    "sessions": len(ws.sessions),
                    "busySessions": sum(1 for s in ws.sessions.values() if s.busy),
                    "tools": ws.tool_count(),
                }
                for ws in self.workspaces.values()
            ],
        }

    # -- lifecycle

    def child_pids(self) -> list[int]:
        return [pid for ws in self.workspaces.values() for pid in ws.child_pids()]

    async def dispose(self) -> None:
        """Close every workspace (sessions, shells, MCP children); idempotent."""
        if self._disposed:
            return
        self._disposed = True
        if self.warmup is not None:
            self.warmup.stop()
        pids = self.child_pids()
        workspaces = list(self.workspaces.values())
        self.workspaces.clear()
        self.sessions.clear()
        await asyncio.gather(*(ws.close() for ws in workspaces), return_exceptions=True)
        await self.tasks.aclose()
        _kill_leftovers(pids)

    async def serve_stdio(self) -> None:
        """Serve on stdin/stdout until `exit` or end of input, then dispose everything."""
        from pygls.io_ import run_async

        loop = asyncio.get_running_loop()
        reader: Any
        try:
            stream = asyncio.StreamReader(limit=1 << 24)
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), sys.stdin.buffer
            )
            reader = PipeReader(stream)
            flow = _WriteFlow()
            transport, _ = await loop.connect_write_pipe(lambda: flow, sys.stdout.buffer)
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
            self._writer = PipeWriter(transport, flow)
            self.protocol.set_writer(self._writer)
        except (ValueError, OSError):  # not pipes (a file, a tty): blocking stdio
            from pygls.io_ import StdinAsyncReader, StdoutWriter

            reader = StdinAsyncReader(sys.stdin.buffer, self.thread_pool)
            self.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
        self._stop_event = threading.Event()
        try:
            await run_async(
                stop_event=self._stop_event,
                reader=reader,
                protocol=self.protocol,
                logger=logging.getLogger("pygls.io"),
                error_handler=self.report_server_error,
            )
        finally:
            await self.dispose()
            if self._writer is not None:
                await self._writer.flush(2.0)

    def report_server_error(self, error: Exception, source: Any) -> None:
        from pygls.exceptions import FeatureRequestError

        if source is FeatureRequestError:  # already answered as a JSON-RPC error
            log.debug("request failed: %s", error)
            return
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        super().report_server_error(error, source)


def usage_dict_zero() -> dict[str, int]:
    from synapse_lsp.events import Usage
    from synapse_lsp.lsp.updates import usage_dict

    return usage_dict(Usage())


def _title(chat: Any) -> str:
    title = getattr(chat, "title", None)
    return title if isinstance(title, str) and title else "New chat"


def _as_uri(where: str | None) -> str | None:
    if where is None:
        return None
    if "://" in where or where.startswith("file:"):
        return where
    return Path(where).as_uri() if Path(where).is_absolute() else where


def _turn_context(args: Args) -> TurnContext | None:
    raw = args.opt_obj("context")
    if raw is None:
        return None
    from synapse_lsp.agent.session import Selection, TurnContext

    cmd = args.command
    active = raw.get("activeFile")
    if active is not None and not isinstance(active, str):
        raise invalid(f"{cmd}: `context.activeFile` must be a string URI")
    open_files = raw.get("openFiles") or []
    if not isinstance(open_files, list) or not all(isinstance(f, str) for f in open_files):
        raise invalid(f"{cmd}: `context.openFiles` must be an array of URI strings")
    selection: Selection | None = None
    sel = raw.get("selection")
    if sel is not None:
        try:
            rng = sel["range"]
            selection = Selection(
                uri=str(sel["uri"]),
                text=str(sel.get("text", "")),
                start_line=int(rng["start"]["line"]),
                start_character=int(rng["start"]["character"]),
                end_line=int(rng["end"]["line"]),
                end_character=int(rng["end"]["character"]),
            )
        except (KeyError, TypeError, ValueError):
            raise invalid(
                f"{cmd}: `context.selection` must be {{uri, range: {{start, end}}, text}}"
            ) from None
    return TurnContext(active_file=active, selection=selection, open_files=tuple(open_files))


def _kill_leftovers(pids: list[int]) -> None:
    """Last resort: SIGKILL the process groups of shells that are somehow still alive."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getsid(pid) == pid:  # still our shell's session, not a reused pid
                os.killpg(pid, signal.SIGKILL)


def _command_handler(name: str, method: str) -> Callable[..., Any]:
    async def handler(ls: SynapseServer, *args: Any) -> Any:
        await ls.configured()
        await ls.warmed("core")
        try:
            return await getattr(ls, method)(Args(name, args))
        except SynapseError as exc:
            raise request_failed(f"{name}: {exc.message}", "error") from None
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug or an unexpected state: answer, log, live on
            log.exception("%s failed", name)
            raise JsonRpcException(
                f"{name}: internal error: {type(exc).__name__}: {exc} (details in the server log)",
                code=INTERNAL_ERROR,
            ) from None

    handler.__name__ = method
    return handler


# ----------------------------------------------------------------- LSP features


def _on_initialize(ls: SynapseServer, params: types.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict):
        nested = options.get("synapse")
        ls.init_options = nested if isinstance(nested, dict) else options
        ls.apply_settings(ls.init_options)
    folders = params.workspace_folders or []
    for folder in folders:
        ls.add_folder(folder.uri)
    if not folders:
        root = params.root_uri or (Path(params.root_path).as_uri() if params.root_path else None)
        ls.add_folder(root or Path.cwd().as_uri())


async def _on_initialized(ls: SynapseServer, params: types.InitializedParams) -> None:
    ls.start_warmup()
    ls._configured = asyncio.Event()
    try:
        await ls.read_configuration()
    finally:
        ls._configured.set()


async def _on_shutdown(ls: SynapseServer, params: Any) -> None:
    await ls.dispose()


def _on_document(ls: SynapseServer, params: Any) -> None:
    ls.files.documents_changed(params.text_document.uri)


async def _on_folders(ls: SynapseServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    for folder in params.event.removed or []:
        await ls.remove_folder(folder.uri)
    for folder in params.event.added or []:
        ls.add_folder(folder.uri)


async def _on_configuration(ls: SynapseServer, params: types.DidChangeConfigurationParams) -> None:
    caps = ls.client_capabilities.workspace
    if caps is not None and caps.configuration:
        # Commands that arrive meanwhile wait for the new values (bounded), so none
        # runs under a setting the user has just changed.
        configured = ls._configured = asyncio.Event()
        try:
            await ls.read_configuration()
        finally:
            configured.set()
        return
    settings = params.settings
    if isinstance(settings, dict) and isinstance(settings.get("synapse"), dict):
        ls.apply_settings(ls.init_options, settings["synapse"])


# ---------------------------------------------------------------------- logging


class _LspLogHandler(logging.Handler):
    """Forwards our log records to `window/logMessage` (from any thread)."""

    def __init__(self, server: SynapseServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._server = server
        self._loop = loop
        self._busy = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._busy, "on", False):
            return
        try:
            message = self.format(record)
        except Exception:
            return
        kind = _LSP_TYPES.get(record.levelno, types.MessageType.Log)
        params = types.LogMessageParams(type=kind, message=message)

        def send() -> None:
            self._busy.on = True
            try:
                if self._server.protocol.writer is not None:
                    self._server.window_log_message(params)
            except Exception:
                pass
            finally:
                self._busy.on = False

        try:
            if threading.current_thread() is threading.main_thread():
                send()
            else:
                self._loop.call_soon_threadsafe(send)
        except RuntimeError:
            pass


def _setup_logging(server: SynapseServer, log_file: Path | None) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    logging.getLogger("pygls").setLevel(logging.WARNING)
    if log_file is not None:
        with contextlib.suppress(OSError):
            log_file.parent.mkdir(parents=True, exist_ok=True)
            file_handler = logging.FileHandler(log_file, encoding="utf-8", delay=True)
            file_handler.setLevel(logging.INFO)
            file_handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
            )
            root.addHandler(file_handler)


def _attach_lsp_logging(server: SynapseServer) -> None:
    handler = _LspLogHandler(server, asyncio.get_running_loop())
    handler.setLevel(LOG_LEVELS.get(server.settings.log_level, logging.INFO))
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logging.getLogger("synapse_lsp").addHandler(handler)
    server._log_handler = handler


# ------------------------------------------------------------------------- main


USAGE = """usage: synapse lsp [--log-file PATH] [--stdio]

Start the Synapse language server on stdin/stdout (what editors spawn).
  --log-file PATH   log file (default: $SYNAPSE_HOME/logs/lsp.log)
  --stdio           accepted for editor compatibility (stdio is the only transport)
"""


def main(argv: list[str] | None = None) -> int:
    log_path: Path | None = None
    args = list(argv or [])
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            sys.stderr.write(USAGE)
            return 0
        if arg == "--version":
            sys.stderr.write(f"synapse {__version__}\n")
            return 0
        if arg == "--stdio":  # what some editors pass; stdio is the only transport
            continue
        if arg == "--log-file" and args:
            log_path = Path(args.pop(0)).expanduser()
        elif arg.startswith("--log-file="):
            log_path = Path(arg.split("=", 1)[1]).expanduser()
        else:
            sys.stderr.write(f"synapse lsp: unknown argument {arg!r}\n\n{USAGE}")
            return 2
    live = LiveSettings()  # settings files and the environment; the editor's go on top
    server = SynapseServer(settings=live)
    log_file = log_path or server.settings.synapse_home / "logs" / "lsp.log"
    _setup_logging(server, log_file)
    for problem in live.problems:
        log.warning("settings: %s", problem)

    async def run() -> None:
        _attach_lsp_logging(server)
        await server.serve_stdio()

    code = 0
    try:
        asyncio.run(run())
    except SystemExit as exc:  # pygls ends `exit` with sys.exit(0 | 1)
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    finally:
        _kill_leftovers(server.child_pids())
        logging.shutdown()
    return code
