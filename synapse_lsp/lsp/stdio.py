"""Non-blocking stdio for the server: asyncio pipe transports instead of pygls' blocking writer.

A client that stops reading never blocks the event loop (so `$/cancelRequest`
still gets through): the transport's high-water mark pauses the session-update
pumps (`PipeWriter.drained`) instead, and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys

WRITE_HIGH_WATER = 256 * 1024


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


def _pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


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
