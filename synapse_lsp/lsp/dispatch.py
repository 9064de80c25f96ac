"""pygls' dispatch of a received message, its kind told by its fields, and its way of
running `workspace/executeCommand` without the steps in between.

pygls' `JsonRPCProtocol.handle_message` asks `isinstance` of its runtime-checkable
Protocols (`RPCRequest`, then `RPCNotification`, then `RPCResponse`): on Python 3.11
each such check gathers the Protocol's attributes anew, ~27 µs a check, so every
request paid ~27 µs and every response ~80 µs before it was even looked at. This does
what it does, in its order, with the message's fields instead. With the command path
below, a `synapse.shell.run true` round trip went from 1.35-1.38x a bare pygls server's
to 1.27-1.29x (`benchmarks/bench_server.py --only shell`, docs/internals.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Generator
from concurrent.futures import Future
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


def dispatch(protocol: JsonRPCProtocol, message: Any, method: str, is_request: bool) -> None:
    """Hand `message` (structured by pygls) to `protocol`'s request, notification or
    response handling, each in a context of its own, as pygls does. `method`: the
    message's ("" for a response); `is_request`: it has a method and an id (null too)."""
    if message.jsonrpc != JsonRPCProtocol.VERSION:
        log.warning('Unknown message "%s"', message)
        return
    if protocol._shutdown and method != types.EXIT:
        log.warning("Server shutting down. No more requests!")
        return
    context = contextvars.copy_context()
    if is_request and method == types.WORKSPACE_EXECUTE_COMMAND:
        context.run(_execute_command, protocol, message)
    elif is_request:
        context.run(protocol._handle_request, message.id, method, message.params)
    elif method:
        context.run(protocol._handle_notification, method, message.params)
    elif hasattr(message, "result"):
        context.run(protocol._handle_response, message.id, message.result)
    else:  # an error response
        context.run(protocol._handle_response, message.id, None, message.error)


def _execute_command(protocol: Any, message: Any) -> None:
    """`workspace/executeCommand` as pygls runs it (its request future, what
    `$/cancelRequest` cancels: the request is answered `cancelled` at once while the
    command goes on to its own end), without its generator and futures in between: the
    protocol's handler (a generator: its first step finds and structures the command)
    is stepped here, and the answer goes out in the command's last step, not a loop
    turn after it."""
    msg_id = message.id
    protocol._ctx_msg_id.set(msg_id)
    answered: Future[Any] = Future()
    answered.add_done_callback(partial(protocol._send_handler_result, msg_id=msg_id))
    protocol._request_futures[msg_id] = answered
    steps = protocol.lsp_workspace__execute_command(message.params)
    try:
        handler, args, _ = next(steps)
    except Exception as exc:  # an unknown command, malformed arguments
        answered.set_exception(exc)
        return

    async def run() -> None:
        try:
            result = await handler(*args)
        except asyncio.CancelledError:
            answered.cancel()
            raise
        except Exception as exc:
            if not answered.done():
                answered.set_exception(exc)
            return
        error: Exception | None = None
        try:
            steps.send(result)  # its end: it returns what it was sent
            error = RuntimeError("workspace/executeCommand: its handler yielded twice")
        except StopIteration as stop:
            result = stop.value
        except Exception as exc:
            error = exc
        if answered.done():  # cancelled meanwhile: its answer went out then
            return
        if error is not None:
            answered.set_exception(error)
        else:
            answered.set_result(result)

    task = asyncio.ensure_future(run())
    _RUNNING.add(task)  # held while it runs (the loop keeps only a weak reference)
    task.add_done_callback(_RUNNING.discard)


_RUNNING: set[asyncio.Future[None]] = set()


class ShutdownProtocol(LanguageServerProtocol):
    """pygls' protocol with its `shutdown` made safe while commands still run.

    pygls cancels each open request's future in a loop over `_request_futures`; the
    cancel answers that request at once (its done callback, `_send_handler_result`),
    which removes it from the dict mid-loop. With a command still running (a prompt
    when the editor closes) the loop then raised "dictionary changed size during
    iteration", `shutdown` was answered with an internal error and the server never
    counted as shut down. This loops over a copy, as pygls otherwise does."""

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id  # not this request's own future
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
