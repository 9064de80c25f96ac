"""The server's logs: a file (`$SYNAPSE_HOME/logs/lsp.log`, info and up) and the
editor's `window/logMessage` at the `logLevel` setting. pygls' own payload
logging stays off: it would write every message, tool output included.

A request the server answered with a JSON-RPC error (an unknown session, a bad
parameter, an unknown command: the client's mistake, already told to it) is one
line in the log, not pygls' ERROR with a traceback; a traceback is kept for what
is a bug (any other exception; a handler's unexpected exception is logged with
its own traceback where it happened, `lsp/handlers.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

LOG_LEVELS = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}  # the names are config.LOG_LEVELS
_LSP_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


class LspLogHandler(logging.Handler):
    """Forwards our log records to `window/logMessage` (from any thread)."""

    def __init__(self, server: LanguageServer, loop: asyncio.AbstractEventLoop) -> None:
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


_INTERNAL_ERROR = -32603


class AnsweredErrorsOneLine(logging.Filter):
    """Turns a logged JSON-RPC error that was answered to the client into one line: INFO
    for the client's mistakes, WARNING for an internal error (its traceback, if any, was
    logged where it happened). Other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, JsonRpcException):
            return True
        internal = exc.code == _INTERNAL_ERROR
        record.msg = "request answered with error %s: %s"
        record.args = (exc.code, exc.message or type(exc).__name__)
        record.exc_info = None
        record.exc_text = None
        record.levelno = logging.WARNING if internal else logging.INFO
        record.levelname = logging.getLevelName(record.levelno)
        return True


def setup_logging(log_file: Path | None) -> None:
    """Root logging for the server process: the log file only (stdout is the protocol)."""
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
            file_handler.addFilter(AnsweredErrorsOneLine())
            file_handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
            )
            root.addHandler(file_handler)


def attach_lsp_logging(server: LanguageServer, level: str) -> LspLogHandler:
    """Send `synapse_lsp` records at `level` and up to the editor (call on the running loop)."""
    handler = LspLogHandler(server, asyncio.get_running_loop())
    handler.setLevel(LOG_LEVELS.get(level, logging.INFO))
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logging.getLogger("synapse_lsp").addHandler(handler)
    return handler
