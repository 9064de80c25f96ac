"""The stdio transport to an MCP server: the SDK's `stdio_client` with a linear reader.

The SDK reads a server's stdout as text and joins each 64 KiB chunk to the partial
line before it (`(buffer + chunk).split("\\n")`): quadratic in one message's length
(a 50 MB tool result took 74 s and ~690 MB). Here the partial line grows in one
`bytearray`, a newline is searched only in the bytes just read, and each message is
parsed straight from its bytes. A line longer than `MAX_MESSAGE_BYTES` is dropped
and surfaced to the session as an error, never buffered without bound.

Everything else follows the SDK's transport: the server starts in its own session
(process group) with the SDK's minimal inherited environment plus the config's
`env`; its stderr goes to `errlog`; shutdown (from the session's close, or at once
when the owner stops the server) closes stdin, waits (2 s, or until `signal_by()`: a
manager closing for good gives its start plus a short grace), then ends the process group
(SIGTERM, then SIGKILL), all shielded from the caller's cancellation. A group that
SIGTERM surely ends (no process of it catches, ignores or blocks it) is not waited
for.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import Process
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
_TERM_GRACE = 2.0  # after stdin closes, before SIGTERM; then again before SIGKILL
_FLUSH = 0.5


@contextlib.asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters,
    errlog: IO[str],
    signal_by: Callable[[], float | None] = lambda: None,
    stopping: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) for `mcp.Client`, like `mcp.client.stdio.stdio_client`.
    Shutdown begins when `stopping()` returns (the owner stops the server), not only
    when the session's close comes to the transport; `signal_by()`, read then, is the
    loop time of the SIGTERM at the latest (None: 2 s after the end of input)."""
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                async for message in read_messages(process.stdout):
                    await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            await _drain(process)

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for item in write_reader:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the end, not a hung request
        finally:
            writer_done.set()

    stopped, begun = anyio.Event(), [False]

    async def stop() -> None:  # once: the first caller ends the process, others wait
        with anyio.CancelScope(shield=True):
            if begun[0]:
                await stopped.wait()
                return
            begun[0] = True
            by = signal_by()
            try:
                await _stop(process, None if by is None else max(0.0, by - anyio.current_time()))
            finally:
                stopped.set()

    async def stop_when_stopping(stopping: Callable[[], Awaitable[object]]) -> None:
        await stopping()
        await stop()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        if stopping is not None:
            tasks.start_soon(stop_when_stopping, stopping)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                if not begun[0]:
                    with anyio.move_on_after(_FLUSH):
                        await writer_done.wait()
                await stop()
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
                await anyio.lowlevel.checkpoint()
            tasks.cancel_scope.cancel()


async def read_messages(stdout: Any) -> AsyncIterator[SessionMessage | Exception]:
    """The JSON-RPC messages of a newline-delimited byte stream, in linear time."""
    buffer = bytearray()
    dropping = False  # inside a line that passed MAX_MESSAGE_BYTES
    async for chunk in stdout:
        start = len(buffer)
        buffer += chunk
        search = start
        while (end := buffer.find(b"\n", search)) >= 0:
            line: bytes | bytearray
            if end == len(buffer) - 1:  # the usual end of a big message: no copy
                line, buffer = buffer, bytearray()
            else:
                line = buffer[:end]
                del buffer[: end + 1]
            search = 0
            if dropping:
                dropping = False
                continue
            if line.strip():
                yield _parse(line)
        if len(buffer) > MAX_MESSAGE_BYTES:
            if not dropping:
                yield ValueError(
                    f"MCP server sent a message over {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB; "
                    "dropped"
                )
            dropping = True
            buffer.clear()
    if buffer.strip() and not dropping:
        yield _parse(buffer)


def _parse(line: bytes | bytearray) -> SessionMessage | Exception:
    """One message. `json.loads` then `validate_python`: pydantic's `validate_json` of a
    96 MB message peaked at +431 MB, this at +53 MB (the strings are not copied)."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except ValueError as exc:
        logger.warning("MCP server wrote a line that is not a JSON-RPC message: %s", exc)
        return exc
    return SessionMessage(message)


async def _drain(process: Process) -> None:
    """Read and discard what the server still writes, so it can flush and exit."""
    assert process.stdout is not None
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        while True:
            await process.stdout.receive()


async def _stop(process: Process, grace: float | None = None) -> None:
    """Close stdin, wait `grace` seconds (None: `_TERM_GRACE`), then end the server's
    process group (SIGTERM, then SIGKILL after `_TERM_GRACE`)."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    if not await _exited(process, _TERM_GRACE if grace is None else grace):
        # The group as the SDK's `terminate_posix_process_tree` ends it (SIGTERM, then
        # SIGKILL), polled every 2 ms instead of its 10: an exit waits on this. Not
        # when SIGTERM surely ends it: the kernel's teardown of a server (10-20 ms)
        # is not worth an exit's wait, and init reaps what is left.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)  # the leader's pid is the group's id
            if sig == signal.SIGTERM and dies_of_sigterm(process.pid):
                break
            if await _group_gone(process, _TERM_GRACE):
                break
        else:
            logger.warning("MCP server %d still alive after SIGKILL; abandoning it", process.pid)
    with contextlib.suppress(Exception):
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()


def dies_of_sigterm(leader: int) -> bool:
    """Whether every process of a server's group below its leader (the leader too)
    dies of a SIGTERM sent now: none catches, ignores or blocks it, none is stopped.
    A process of the group that left the leader's tree (reparented, its group kept:
    rare, daemons call `setsid`) is not seen. False when the leader has ended already:
    its reaping, which is waited for then, is at hand (and must be the child watcher's,
    not a poll of the transport's close)."""
    from synapse_lsp.shell import procs

    table = procs.subtree(leader)
    if leader not in table or table[leader].zombie:
        return False
    for pid in ({leader} | procs.descendants(leader, table)) & table.keys():
        if table[pid].pgrp != leader or table[pid].zombie:
            continue
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as f:  # noqa: PTH123
                lines = f.read().splitlines()
        except OSError:
            continue  # gone already
        status = {name: value for name, _, value in (line.partition(":") for line in lines)}
        if status.get("State", "").strip()[:1] in ("T", "t"):
            return False  # stopped: SIGTERM waits for a SIGCONT
        term = 1 << (signal.SIGTERM - 1)
        try:
            if any(int(status[mask], 16) & term for mask in ("SigBlk", "SigIgn", "SigCgt")):
                return False
        except (KeyError, ValueError):
            return False  # cannot tell: wait for it
    return True


async def _group_gone(process: Process, timeout: float) -> bool:
    """Whether the server's whole process group ended within `timeout` (its leader
    reaped by reading `returncode`, or the group would stay alive as a zombie)."""
    deadline = anyio.current_time() + timeout
    while True:
        _ = process.returncode
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.002)


async def _exited(process: Process, timeout: float) -> bool:
    """Whether the process ended within `timeout` (returncode polled: `wait()` would also
    wait for a grandchild holding the pipes)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.002)  # a 2 ms poll: exit waits on it (bench_acp --mcp)
    return True
