"""pygls' dispatch of a received message, its kind told by its fields.

pygls' `JsonRPCProtocol.handle_message` asks `isinstance` of its runtime-checkable
Protocols (`RPCRequest`, then `RPCNotification`, then `RPCResponse`): on Python 3.11
each such check gathers the Protocol's attributes anew, ~27 µs a check, so every
request paid ~27 µs and every response ~80 µs before it was even looked at
(`benchmarks/bench_server.py`: 5-10% of a `synapse.shell.run true` round trip). This
does what it does, in its order, with the message's fields instead.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger(__name__)


def dispatch(protocol: JsonRPCProtocol, message: Any, method: str, is_request: bool) -> None:
    """Hand `message` (structured by pygls) to `protocol`'s request, notification or
    response handling, each in a context of its own, as pygls does. `method`: the
    message's ("" for a response); `is_request`: it has a method and an id."""
    if message.jsonrpc != JsonRPCProtocol.VERSION:
        log.warning('Unknown message "%s"', message)
        return
    if protocol._shutdown and method != types.EXIT:
        log.warning("Server shutting down. No more requests!")
        return
    context = contextvars.copy_context()
    if is_request:
        context.run(protocol._handle_request, message.id, method, message.params)
    elif method:
        context.run(protocol._handle_notification, method, message.params)
    elif hasattr(message, "result"):
        context.run(protocol._handle_response, message.id, message.result)
    else:  # an error response
        context.run(protocol._handle_response, message.id, None, message.error)
