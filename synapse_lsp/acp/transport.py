"""NDJSON framing for the ACP connection, stricter than the SDK's own.

The SDK's stdio transport drops a line that is not JSON without a word and stops
reading on a line that is JSON but not an object. Here a line that is not JSON is
answered with a JSON-RPC parse error (-32700, id null), a JSON value that is not a
request object with an invalid-request error (-32600), and the agent reads on.
`on_sent` sees every message after it was written (the agent uses it to announce a
session's commands only once the client has the `session/new` answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

MAX_LINE = 50 * 1024 * 1024  # a prompt with embedded files can be large


class Writer(Protocol):
    """What the transport writes to: an `asyncio.StreamWriter` or `BlockingWriter`."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class BlockingWriter:
    """A `Writer` on a descriptor asyncio cannot watch (a regular file): plain writes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class NdjsonTransport:
    """`acp._transport.Transport` over a byte reader and writer, one JSON value per line."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._closed = False
        self._unread: list[dict[str, Any]] = []
        self.on_sent: list[Callable[[dict[str, Any]], None]] = []

    def unread(self, message: dict[str, Any]) -> None:
        """Give `message` back: the next `receive` returns it first."""
        self._unread.append(message)

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        async with self._lock:
            if self._closed:
                raise ConnectionError("the client's end of the connection is closed")
            self._writer.write(data)
            await self._writer.drain()
        for hook in list(self.on_sent):
            try:
                hook(message)
            except Exception:
                log.exception("on_sent hook failed")

    async def receive(self) -> dict[str, Any] | None:
        if self._unread:
            return self._unread.pop()
        while True:
            line = await self._read_line()
            if line is None:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                log.warning("not JSON (%s): answered with a parse error", exc)
                await self._error(None, -32700, "Parse error", {"details": str(exc)})
                continue
            if not isinstance(message, dict) or not _is_message(message):
                request_id = message.get("id") if isinstance(message, dict) else None
                if not isinstance(request_id, str | int) or isinstance(request_id, bool):
                    request_id = None
                await self._error(
                    request_id,
                    -32600,
                    "Invalid request",
                    {"details": "expected a JSON-RPC 2.0 request, notification or response"},
                )
                continue
            return message

    async def _read_line(self) -> bytes | None:
        chunks: list[bytes] = []
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._reader.readexactly(exc.consumed))
                if sum(len(c) for c in chunks) > MAX_LINE:
                    # Drop the rest of the line: one huge message must not exhaust memory.
                    # Its id (near the start, as clients write it) gets the answer, so
                    # the client's request does not wait forever.
                    request_id = _leading_id(chunks[0][:4096])
                    dropped = sum(len(c) for c in chunks)
                    with contextlib.suppress(asyncio.IncompleteReadError, ValueError):
                        while True:
                            try:
                                dropped += len(await self._reader.readuntil(b"\n"))
                                break
                            except asyncio.LimitOverrunError as more:
                                dropped += len(await self._reader.readexactly(more.consumed))
                    log.warning(
                        "a message of %d bytes or more (id %r) is over the %d MiB limit: "
                        "answered with an error, not read",
                        dropped,
                        request_id,
                        MAX_LINE >> 20,
                    )
                    await self._error(
                        request_id,
                        -32600,
                        "Invalid request",
                        {"details": f"the message is over the limit of {MAX_LINE >> 20} MiB"},
                    )
                    chunks = []
                continue
            except asyncio.IncompleteReadError as exc:
                chunks.append(exc.partial)
                data = b"".join(chunks)
                return data if data.strip() else None
            chunks.append(chunk)
            return b"".join(chunks)

    async def _error(self, request_id: Any, code: int, message: str, data: Any) -> None:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": code, "message": message, "data": data},
                }
            )

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(Exception):
                self._writer.close()


_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')


def _leading_id(head: bytes) -> int | str | None:
    """The `id` of a JSON-RPC message from its first bytes, or None."""
    found = _ID.search(head)
    if found is None:
        return None
    with contextlib.suppress(ValueError):
        value = json.loads(found.group(1))
        if isinstance(value, int | str) and not isinstance(value, bool):
            return value
    return None


def _is_message(message: dict[str, Any]) -> bool:
    """A request/notification (a string `method`) or a response (an `id` and a result or
    error)."""
    if "method" in message:
        return isinstance(message["method"], str)
    return "id" in message and ("result" in message or "error" in message)
