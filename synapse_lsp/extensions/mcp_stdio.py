"""The stdio transport to an MCP server: the SDK's `stdio_client` with a linear reader.

The SDK reads a server's stdout as text and joins each 64 KiB chunk to the partial
line before it (`(buffer + chunk).split("\\n")`): quadratic in one message's length
(a 50 MB tool result took 74 s and ~690 MB). Here the partial line grows in one
`bytearray`, a newline is searched only in the bytes just read, and each message is
parsed straight from its bytes. A line longer than `MAX_MESSAGE_BYTES` is dropped
and surfaced to the session as an error, never buffered without bound.

Everything else follows the SDK's transport: the server starts in its own session
(process group) with the SDK's minimal inherited environment plus the config's
`env`; its stderr goes to `errlog`; shutdown closes stdin, waits (`grace()`: 2 s, or
the short grace of a manager closing for good), then ends the process group
(SIGTERM, then SIGKILL), all shielded from the caller's cancellation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
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
    grace: Callable[[], float | None] = lambda: None,
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) for `mcp.Client`, like `mcp.client.stdio.stdio_client`;
    `grace()` is read at shutdown: seconds from end of input to SIGTERM (None: 2 s)."""
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

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(_FLUSH):
                    await writer_done.wait()
                await _stop(process, grace())
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
        # SIGKILL), polled every 2 ms instead of its 10: an exit waits on this.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)  # the leader's pid is the group's id
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
