"""`synapse lsp`: the pygls server that puts the agent behind any LSP editor.

docs/protocol.md is the contract. This module holds the server itself: its
lifecycle (warm-up, settings, shutdown), the workspace folders, the LSP
features it answers and `main()`. The `synapse.*` commands are handlers.py
over protocol.py's types, chat sessions sessions.py, turns streamed as
`synapse/sessionUpdate` by updates.py, edits sent as `workspace/applyEdit` by
editor_files.py, permission questions by questions.py. The model SDK, MCP and even
the router are imported on first use so the server answers `initialize` about as
fast as a bare pygls server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import lsp_method

from synapse_lsp import __version__
from synapse_lsp.background import TaskOwner
from synapse_lsp.config import LiveSettings, Problem, Settings
from synapse_lsp.files import path_to_uri, uri_to_path
from synapse_lsp.lsp.dispatch import ShutdownProtocol, dispatch
from synapse_lsp.lsp.logs import LOG_LEVELS, LspLogHandler, attach_lsp_logging, setup_logging
from synapse_lsp.lsp.names import (
    COMMAND_NAMES,
    DIAGNOSTICS_NOTIFICATION,
    PROTOCOL_VERSION,
    SESSION_UPDATE,
    TRUST_NOTIFICATION,
    TRUST_OPTION,
    invalid,
)
from synapse_lsp.lsp.questions import asker
from synapse_lsp.lsp.sessions import LiveChats, as_uri
from synapse_lsp.lsp.stdio import PipeWriter, connect_stdio
from synapse_lsp.lsp.wire import ArgumentError, converter, json_type
from synapse_lsp.lsp.workspace import WorkspaceContext
from synapse_lsp.policy.secrets import protect_process

# Editor files, updates, permissions, the router and the agent are imported on first
# use: `initialize` must not wait for them (cold start within 1.3x of bare pygls).
if TYPE_CHECKING:
    from synapse_lsp.lsp.editor_files import EditorFiles
    from synapse_lsp.lsp.protocol import SessionUpdateNotification
    from synapse_lsp.lsp.updates import UpdateStream
    from synapse_lsp.lsp.warmup import Warmup

log = logging.getLogger("synapse_lsp.lsp.server")


class _Answered:
    """Marker: a malformed request that has already been answered with an error."""

    jsonrpc = "answered"


_ANSWERED = _Answered()


@attrs.define
class _PlainNotification:
    """A notification whose params stay plain JSON (pygls would make namedtuples of
    them), for handlers that structure them with our own converter."""

    method: str
    jsonrpc: str
    params: Any = None


class SynapseProtocol(ShutdownProtocol):
    """pygls' protocol plus: the protocol version in the `initialize` result,
    `$/cancelRequest` reaching running prompts, malformed params answered with
    InvalidParams naming the command and the field (not silence), unknown
    commands MethodNotFound."""

    _server: SynapseServer

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        # Where any LSP client can read it without custom plumbing.
        result.capabilities.experimental = {"synapse": {"protocolVersion": PROTOCOL_VERSION}}
        general = params.capabilities.general
        if general is None or not general.position_encodings:
            # Nothing offered, nothing to pick (LSP 3.17): UTF-16 is implied, and pygls'
            # "utf-16" would answer a question the client never asked.
            result.capabilities.position_encoding = None
        return result

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]  # lru_cache'd there
        if method == DIAGNOSTICS_NOTIFICATION:
            return _PlainNotification
        return super().get_message_type(method)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        super()._handle_cancel_notification(msg_id)
        self._server.chats.request_cancelled(msg_id)

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
        method = getattr(message, "method", "")
        is_request = bool(method) and hasattr(message, "id")  # as pygls tells one
        if self._shutdown and is_request and method != types.EXIT:
            # LSP: a request after `shutdown` is answered InvalidRequest (pygls drops it)
            error = JsonRpcInvalidRequest(f"{method}: the server is shutting down")
            self._send_response(message.id, error=error.to_response_error())
            return
        dispatch(self, message, method, is_request)  # pygls' handle_message, faster

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        command = params.command
        if command not in self.fm.commands:
            raise JsonRpcMethodNotFound(
                f"unknown command {command!r}; known: {', '.join(sorted(COMMAND_NAMES))}"
            )
        self._server.bind_handlers()
        argument = _one_object(command, params.arguments)
        # The object is structured into the handler's params class (protocol.py) here,
        # as pygls would, but without pygls' per-request signature and `get_type_hints`
        # of the handler (~50 us a command: the annotations are strings).
        handler, params_class = self._server.command_handler(command)
        try:
            structured = self._converter.structure(argument, params_class)
        except ArgumentError as exc:
            raise JsonRpcInvalidParams(f"{command}: {exc}") from None
        except Exception as exc:  # e.g. an attrs validator: what pygls would answer
            raise JsonRpcInvalidParams.of(exc) from None
        return (yield handler, (structured,), None)


def _one_object(command: str, arguments: Any) -> Any:
    """Every command takes exactly one argument, an object (absent or null: `{}`)."""
    raw = list(arguments or [])
    if not raw or raw == [None]:
        return {}
    if len(raw) == 1 and isinstance(raw[0], dict):
        return raw[0]
    got = json_type(raw[0]) if len(raw) == 1 else f"{len(raw)} arguments"
    raise invalid(
        f"{command}: expected exactly one argument, an object "
        f'(e.g. [{{"sessionId": "..."}}]); got {got}'
    )


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


async def _not_bound(ls: SynapseServer, *args: Any) -> Any:
    """Registered under every command name until `bind_handlers` (never called)."""
    raise RuntimeError("command handlers are not bound")


class SynapseServer(LanguageServer):
    def __init__(self, *, settings: LiveSettings | None = None) -> None:
        super().__init__(
            "synapse",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=SynapseProtocol,
            converter_factory=converter,
        )
        self.live_settings = settings if settings is not None else LiveSettings()
        self._handlers_bound = False
        self._commands: dict[str, tuple[Callable[..., Any], type[Any]]] = {}
        self.input_broken: str | None = None  # why stdin stopped being readable, if it did
        self.init_options: dict[str, Any] = {}
        # The editor's word on trust (VS Code's Workspace Trust): None = it said nothing,
        # and `synapse_lsp.policy.trust` decides per folder (environment, remembered answer).
        self.face_trust: bool | None = None
        self._files: EditorFiles | None = None
        self.workspaces: dict[str, WorkspaceContext] = {}
        self.chats = LiveChats(
            settings=self.live_settings, folders=self, stream=self._stream, warmed=self.warmed
        )
        self.tasks = TaskOwner("server")
        self._writer: PipeWriter | None = None
        self._disposed = False
        self._log_handler: LspLogHandler | None = None
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
        # The typed handlers (and protocol.py's classes) load after `initialize`: the
        # warm-up imports them, and the first command binds them (`bind_handlers`).
        for name in COMMAND_NAMES:
            self.command(name)(_not_bound)
        self.feature(types.INITIALIZE)(_on_initialize)
        self.feature(types.INITIALIZED)(_on_initialized)
        self.feature(types.SHUTDOWN)(_on_shutdown)
        self.feature(types.TEXT_DOCUMENT_DID_OPEN)(_on_document)
        self.feature(types.TEXT_DOCUMENT_DID_CHANGE)(_on_document)
        self.feature(types.TEXT_DOCUMENT_DID_CLOSE)(_on_document)
        self.feature(types.TEXT_DOCUMENT_DID_SAVE)(_on_document)  # the user's hand edits
        self.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(_on_folders)
        self.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_on_configuration)
        self.feature(TRUST_NOTIFICATION)(_on_trust)
        self.feature(DIAGNOSTICS_NOTIFICATION)(_on_diagnostics)

    def bind_handlers(self) -> None:
        """Put the typed handlers in place of the placeholders (once, before the first
        command is structured: pygls reads each handler's params class)."""
        if self._handlers_bound:
            return
        from synapse_lsp.lsp import handlers
        from synapse_lsp.lsp.protocol import COMMANDS

        host: handlers.Host = self  # the handlers' view of the server (checked by mypy)
        assert host is self and set(handlers.HANDLERS) == set(COMMAND_NAMES)
        for name, handler in handlers.HANDLERS.items():
            del self.protocol.fm.commands[name]
            self.command(name)(handler)
            self._commands[name] = (self.protocol.fm.commands[name], COMMANDS[name].params)
        self._handlers_bound = True

    def command_handler(self, name: str) -> tuple[Callable[..., Any], type[Any]]:
        """A bound command's handler as pygls registered it, and its params class."""
        return self._commands[name]

    async def before_command(self) -> None:
        """Every command first waits (bounded) for the settings and the core modules."""
        await self.configured()
        await self.warmed("core")

    def request_id(self) -> Any:
        return self.protocol.msg_id

    # -- warm-up of heavy imports (after `initialized`)

    def start_warmup(self) -> None:
        """Import the model SDK (and the MCP SDK if a folder has MCP servers) on a
        daemon thread, so the first prompt does not wait for them; see warmup.py."""
        from synapse_lsp.lsp.warmup import ENV_SWITCH, Warmup

        if self.warmup is not None or self._disposed or os.environ.get(ENV_SWITCH) == "0":
            return
        folders = list(self.workspaces.values())

        def need_mcp() -> bool:
            from synapse_lsp.extensions.mcp_client import config_paths

            if not folders:
                return any(p.is_file() for p in config_paths(self.settings, None))
            return any(ws.has_mcp_config() for ws in folders)

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
            refused = any(isinstance(p, Problem) and p.refuses for p in problems)
            # A misspelt restrictive setting cannot stop an editor's server from starting:
            # it is an error that says the restriction is not in force, not a warning.
            tail = " — a restriction you set is NOT in force until you fix it" if refused else ""
            self.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Error if refused else types.MessageType.Warning,
                    message="Synapse settings: " + "; ".join(problems) + tail,
                )
            )
        for problem in problems:
            log.warning("settings: %s", problem)

    async def configured(self) -> None:
        """Commands wait (bounded) for the first `workspace/configuration` answer, so
        none runs under a permission policy the user has already changed."""
        configured = self._configured
        if configured is not None and not configured.is_set():  # no task when set
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(configured.wait(), 10.0)

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

    # -- workspace folders

    def add_folder(self, uri: str) -> None:
        key = uri.rstrip("/")
        if key in self.workspaces:
            return
        path = uri_to_path(uri) or Path.cwd()
        ws = self.workspaces[key] = WorkspaceContext(
            key,
            path,
            self.live_settings.for_folder(path),
            lambda: self.files,
            asker(self),  # the gate's questions: typed, or as prose (`ask_user`)
            progress=self.work_progress,
            mcp_imported=lambda: self.warmed("mcp"),
            trusted=self.face_trust,
        )
        if self.face_trust is False:  # the editor's own trust is the way to trust it
            ws._trust_hint = "trust the workspace in the editor (Manage Workspace Trust) to load it"
        if ws.trust_notice:
            log.warning("%s: %s", path, ws.trust_notice)

    async def set_trust(self, trusted: bool) -> None:
        """The editor granted (or withdrew) trust: every folder follows, and a folder
        whose registry runs re-reads its MCP config."""
        self.face_trust = trusted
        for ws in list(self.workspaces.values()):
            try:
                await ws.set_trusted(trusted)
            except Exception as exc:  # one folder's MCP config must not stop the others
                log.warning("%s: applying trust: %s", ws.root, exc)
            if trusted:
                log.info("%s: folder trusted: its own configuration is in use", ws.root)

    async def remove_folder(self, uri: str) -> None:
        ws = self.workspaces.pop(uri.rstrip("/"), None)
        if ws is None:
            return
        self.chats.forget(ws)
        await ws.close()

    def workspace_for(self, uri: str | None, command: str) -> WorkspaceContext:
        """The folder a command names (a file URI selects the folder holding it)."""
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
        path = uri_to_path(uri)
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

    def find_workspace(self, where: str | None) -> WorkspaceContext | None:
        """The open folder holding a stored session's workspace (a path or a URI), if any."""
        if not where:
            return None
        try:
            return self.workspace_for(as_uri(where), "")
        except JsonRpcException:
            return None

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

    # -- session update streams

    def _stream(self, session_id: str) -> UpdateStream:
        from synapse_lsp.lsp.updates import UpdateStream

        def send(payload: SessionUpdateNotification) -> None:
            self.protocol.notify(SESSION_UPDATE, payload)

        writer = self._writer
        return UpdateStream(
            session_id,
            send,
            drained=writer.drained if writer is not None else None,
            on_error=lambda exc: log.warning("sending an update failed: %s", exc),
        )

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
        self.chats.live.clear()
        await asyncio.gather(*(ws.close() for ws in workspaces), return_exceptions=True)
        await self.tasks.aclose()
        _kill_leftovers(pids)

    async def serve_stdio(self) -> None:
        """Serve on stdin/stdout until `exit` or end of input, then dispose everything."""
        from pygls.io_ import run_async

        reader: Any
        try:
            reader, self._writer = await connect_stdio()
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
            self.input_broken = getattr(reader, "broken", None)
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


def _kill_leftovers(pids: list[int]) -> None:
    """Last resort: SIGKILL the process groups of shells that are somehow still alive."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getsid(pid) == pid:  # still our shell's session, not a reused pid
                os.killpg(pid, signal.SIGKILL)


# ----------------------------------------------------------------- LSP features


def _on_initialize(ls: SynapseServer, params: types.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict):
        nested = options.get("synapse")
        init = dict(nested if isinstance(nested, dict) else options)
        # Trust is the editor's word, not a setting (config.py would call it unknown).
        for holder in (options, init):
            trusted = holder.get(TRUST_OPTION)
            if isinstance(trusted, bool):
                ls.face_trust = trusted
        init.pop(TRUST_OPTION, None)
        ls.init_options = init
        ls.apply_settings(ls.init_options)
    folders = params.workspace_folders or []
    for folder in folders:
        ls.add_folder(folder.uri)
    if not folders:
        root = params.root_uri or (path_to_uri(params.root_path) if params.root_path else None)
        ls.add_folder(root or path_to_uri(Path.cwd()))


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
    changed = types.DidChangeTextDocumentParams | types.DidSaveTextDocumentParams
    try:
        if isinstance(params, changed) and ls.chats.live:  # before the edit's shadow goes
            from synapse_lsp.lsp import feedback

            feedback.document_changed(ls.chats, ls.workspace, ls.files, params)
    finally:
        ls.files.documents_changed(params.text_document.uri)


def _on_diagnostics(ls: SynapseServer, params: Any) -> None:
    """`synapse/diagnostics`: a touched file's settled problems (lsp/feedback.py)."""
    from synapse_lsp.lsp import feedback

    feedback.diagnostics_reported(ls.chats, params)


async def _on_folders(ls: SynapseServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    for folder in params.event.removed or []:
        await ls.remove_folder(folder.uri)
    for folder in params.event.added or []:
        ls.add_folder(folder.uri)


async def _on_trust(ls: SynapseServer, params: Any) -> None:
    """`synapse/didChangeWorkspaceTrust {trusted}`: the user trusted the workspace."""
    trusted = (
        params.get("trusted") if isinstance(params, dict) else getattr(params, "trusted", None)
    )
    if not isinstance(trusted, bool):
        log.warning("%s: `trusted` must be a boolean", TRUST_NOTIFICATION)
        return
    await ls.set_trust(trusted)


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


# ------------------------------------------------------------------------- main


class _HelpOnStderr(argparse.ArgumentParser):
    """argparse, but help, version and errors go to stderr: stdout carries the protocol."""

    def _print_message(self, message: str, file: Any = None) -> None:
        super()._print_message(message, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = _HelpOnStderr(
        prog="synapse lsp",
        description="Start the Synapse language server on stdin/stdout (what editors spawn).",
        epilog="Help and version go to stderr: stdout carries the protocol.",
    )
    parser.add_argument(
        "--log-file", type=Path, metavar="PATH",
        help="log file (default: $SYNAPSE_HOME/logs/lsp.log)",
    )  # fmt: skip
    parser.add_argument(
        "--stdio", action="store_true",
        help="accepted for editor compatibility (stdio is the only transport)",
    )  # fmt: skip
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    protect_process()  # started directly by an editor too, not only by `synapse`
    args = build_parser().parse_args(list(argv or []))
    log_path: Path | None = args.log_file.expanduser() if args.log_file else None
    live = LiveSettings()  # settings files and the environment; the editor's go on top
    server = SynapseServer(settings=live)
    setup_logging(log_path or server.settings.synapse_home / "logs" / "lsp.log")
    for problem in live.problems:
        log.warning("settings: %s", problem)

    stopped_by: list[int] = []

    async def run() -> None:
        server._log_handler = attach_lsp_logging(server, server.settings.log_level)
        # SIGTERM/SIGHUP (an editor quitting, a closed terminal) end the server like end
        # of input does: every session, shell and MCP child is closed first. (Were we
        # killed outright, each shell's supervisor still kills its tree: `proctree`.)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            log.info("signal %d: closing every session, then exiting", signum)
            stopped_by.append(signum)
            task.cancel()

        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop, sig)
        try:
            await server.serve_stdio()
        except asyncio.CancelledError:
            if not stopped_by:
                raise

    code = 0
    try:
        asyncio.run(run())
        if server.input_broken is not None:
            code = 1
        if stopped_by:
            code = 128 + stopped_by[0]
    except SystemExit as exc:  # pygls ends `exit` with sys.exit(0 | 1)
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    finally:
        _kill_leftovers(server.child_pids())
        logging.shutdown()
    return code
