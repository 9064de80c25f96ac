"""Non-blocking stdio for the server: asyncio pipe transports instead of pygls' blocking writer.

A client that stops reading never blocks the event loop (so `$/cancelRequest`
still gets through): the transport's high-water mark pauses the session-update
pumps (`PipeWriter.drained`) instead, and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import sys

WRITE_HIGH_WATER = 256 * 1024
log = logging.getLogger(__name__)


class WriteFlow(asyncio.BaseProtocol):
    """The write side's flow control: `resumed` is clear while the transport is full."""

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

    def __init__(self, transport: asyncio.WriteTransport, flow: WriteFlow) -> None:
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
    """`readline`/`readexactly` over an asyncio pipe, returning b"" at end of input.

    It also checks the framing: a header block without a `Content-Length`, or a
    `Content-Length` that does not frame one JSON message, would leave pygls reading
    out of step for good, silently (every later request unanswered). The stream
    cannot be trusted after that, so it ends: `broken` says why (logged as an error),
    the server disposes everything and exits non-zero, and the editor restarts it.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._length_seen = False
        self.broken: str | None = None

    def _break(self, reason: str) -> bytes:
        self.broken = reason
        log.error("LSP input out of step: %s; exiting so the editor restarts the server", reason)
        return b""

    async def readline(self) -> bytes:
        if self.broken is not None:
            return b""
        line = await self._reader.readline()
        if _CONTENT_LENGTH.fullmatch(line):
            length = int(line[len(b"Content-Length: ") : -2])
            if length > MAX_MESSAGE_BYTES:
                # Reading it would wait for (or hold) that much: the framing is lost.
                return self._break(
                    f"Content-Length {length} is over the limit of "
                    f"{MAX_MESSAGE_BYTES >> 20} MiB per message"
                )
            self._length_seen = True
        elif line in (b"\r\n", b"\n"):
            if not self._length_seen:
                return self._break("a message header without a valid Content-Length")
            self._length_seen = False
        elif line and not _HEADER.fullmatch(line):
            return self._break(f"not a message header: {line[:80]!r}")
        return line

    async def readexactly(self, n: int) -> bytes:
        if self.broken is not None:
            return b""
        try:
            body = await self._reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                short = n - len(exc.partial)
                return self._break(
                    f"input ended {short} bytes short of a Content-Length {n} message"
                )
            return b""
        # A JSON-RPC message is one object (or a batch array): a Content-Length that is
        # too short cuts it, one that is too long swallows the next message's header.
        framed = body.strip()
        if not (framed[:1] == b"{" and framed[-1:] == b"}") and not (
            framed[:1] == b"[" and framed[-1:] == b"]"
        ):
            return self._break(f"Content-Length {n} does not frame one JSON message")
        return body


_CONTENT_LENGTH = re.compile(rb"Content-Length: \d+\r\n")  # exactly what pygls reads
# The largest LSP message read (docs/protocol.md "Limits"): a document of tens of MB
# still fits; a bigger Content-Length ends the connection with a logged error.
MAX_MESSAGE_BYTES = 64 << 20
_HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]*: *[^\r\n]*\r?\n")


def _pipe_like(fd: int) -> bool:
    """Whether the event loop can watch `fd`: a pipe, a socket or a terminal. Not
    /dev/null, a character device epoll refuses (its end of input would never be seen)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def connect_stdio() -> tuple[PipeReader, PipeWriter]:
    """Pipes on this process's stdin/stdout; ValueError or OSError (and nothing touched)
    when either is something else, e.g. a file: the caller then uses blocking stdio."""
    if not (_pipe_like(sys.stdin.fileno()) and _pipe_like(sys.stdout.fileno())):
        raise ValueError("stdin and stdout are not both pipes")
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), sys.stdin.buffer)
    flow = WriteFlow()
    transport, _ = await loop.connect_write_pipe(lambda: flow, sys.stdout.buffer)
    transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
    return PipeReader(stream), PipeWriter(transport, flow)
