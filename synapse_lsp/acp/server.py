"""`synapse acp`: the ACP agent on stdio (what Zed, JetBrains, Neovim ACP plugins spawn).

stdout carries the protocol and nothing else: the protocol gets its own copy of
file descriptor 1 and fd 1 itself is pointed at stderr, so a stray print (ours,
a library's, a child's) can never corrupt a message. Logs go to
`$SYNAPSE_HOME/logs/acp.log` (info and up) and to stderr (warnings). End of input,
SIGTERM and SIGHUP close every session first: turns, shells and MCP children.

End of input ends the process at once, as the LSP face does, even while the SDK is
still loading: a client that only asked `initialize` (or left before anything) does
not wait for an import it will never use (seconds on a loaded machine).

The agent module (the ACP SDK's schema) and then the model SDK (`anthropic`, ~1 s)
are imported in the background from the start, off the event loop, while
`initialize` is answered without them; a prompt waits for the model SDK without
blocking the loop (`cli/preload.py`, as `synapse chat` does).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from synapse_lsp.acp.handshake import early_initialize, has_api_key, initialize_result
from synapse_lsp.acp.transport import BlockingWriter, NdjsonTransport, Writer
from synapse_lsp.config import LiveSettings
from synapse_lsp.policy.secrets import protect_process

if TYPE_CHECKING:
    from synapse_lsp.acp.agent import SynapseAcpAgent

log = logging.getLogger(__name__)
AGENT_MODULE = "synapse_lsp.acp.agent"

READ_LIMIT = 1024 * 1024  # bytes buffered per read; longer lines are joined


class _HelpOnStderr(argparse.ArgumentParser):
    """argparse, but help, version and errors go to stderr: stdout carries the protocol."""

    def _print_message(self, message: str, file: Any = None) -> None:
        super()._print_message(message, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    from synapse_lsp import __version__

    parser = _HelpOnStderr(
        prog="synapse acp",
        description=(
            "Run Synapse as an Agent Client Protocol agent on stdin/stdout "
            "(for Zed, JetBrains IDEs, Neovim and other ACP clients; docs/acp.md)."
        ),
        epilog="Help and version go to stderr: stdout carries the protocol.",
    )
    parser.add_argument(
        "--log-file", type=Path, metavar="PATH",
        help="log file (default: $SYNAPSE_HOME/logs/acp.log)",
    )  # fmt: skip
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def setup_logging(log_file: Path | None) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(formatter)
    root.addHandler(stderr)
    if log_file is not None:
        with contextlib.suppress(OSError):
            log_file.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_file, encoding="utf-8", delay=True)
            handler.setLevel(logging.INFO)
            handler.setFormatter(formatter)
            root.addHandler(handler)


def take_stdout() -> int:
    """A private descriptor for the protocol; fd 1 (and `sys.stdout`) now go to stderr."""
    sys.stdout.flush()
    protocol = os.dup(1)
    os.set_inheritable(protocol, False)
    os.dup2(2, 1)
    return protocol


async def _streams(protocol_fd: int) -> tuple[asyncio.StreamReader, Writer]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    read_protocol = asyncio.StreamReaderProtocol(reader)
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        # A regular file, a terminal or /dev/null (which epoll refuses: the pipe
        # transport would never see its end of input): read it from a thread.
        _feed_from_thread(loop, reader)
    else:
        try:
            await loop.connect_read_pipe(lambda: read_protocol, sys.stdin)
        except (ValueError, OSError):
            _feed_from_thread(loop, reader)
    try:
        writer_transport, writer_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin,  # gives drain() its back-pressure
            os.fdopen(protocol_fd, "wb", buffering=0, closefd=False),
        )
    except (ValueError, OSError):  # stdout is a regular file: plain blocking writes
        return reader, BlockingWriter(protocol_fd)
    return reader, asyncio.StreamWriter(writer_transport, writer_protocol, None, loop)


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    def pump() -> None:
        try:
            while data := sys.stdin.buffer.readline():
                loop.call_soon_threadsafe(reader.feed_data, data)
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()


class _Loading:
    """The agent module (and with it the SDK) imported in a daemon thread, so that end of
    input can end the process without waiting for the import: `asyncio.to_thread`'s
    executor would be joined at exit, import or not."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[Any] = loop.create_future()
        self._loop = loop
        self.thread = threading.Thread(target=self._load, name="acp-sdk-import", daemon=True)
        # Imported here first: the model SDK (certifi) and our modules both import
        # importlib.resources; two threads at once can raise _DeadlockError (preload.py).
        import importlib.resources  # noqa: F401

        self.thread.start()

    def _load(self) -> None:
        from synapse_lsp.cli.preload import pause_collector, resume_collector

        pause_collector()  # until the SDK is imported too (preload.py)
        try:
            module = importlib.import_module(AGENT_MODULE)
        except BaseException as exc:  # handed to the waiting coroutine
            resume_collector()
            self._settle(exc, None)
        else:
            # Then the model SDK, still off the loop: a prompt finds it imported (a turn
            # awaits `preload.sdk_ready()` rather than import it on the loop's thread).
            from synapse_lsp.cli.preload import start_sdk_import

            start_sdk_import()
            self._settle(None, module)

    def _settle(self, exc: BaseException | None, module: Any) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if exc is not None:
                self.future.set_exception(exc)
            else:
                self.future.set_result(module)

        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(settle)


def main(argv: list[str] | None = None) -> int:
    protect_process()  # started directly by an editor too, not only by `synapse`
    args = build_parser().parse_args(list(argv or []))
    protocol_fd = take_stdout()
    live = LiveSettings()
    setup_logging(
        args.log_file.expanduser() if args.log_file else live().synapse_home / "logs" / "acp.log"
    )
    for problem in live.problems:
        log.warning("settings: %s", problem)
    holder: list[SynapseAcpAgent] = []
    stopped_by: list[int] = []
    pids: list[int] = []  # the shells' process groups, if closing them failed
    loading: list[_Loading] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            log.info("signal %d: closing every session, then exiting", signum)
            stopped_by.append(signum)
            task.cancel()

        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop, sig)
        # The SDK (its pydantic schema: most of our start-up) loads in a thread while
        # `initialize` is answered without it.
        loading.append(_Loading(loop))
        sdk = loading[0].future
        reader, writer = await _streams(protocol_fd)
        transport = NdjsonTransport(reader, writer)
        try:
            first = await transport.receive()
            if first is None:
                return  # end of input before any message: nothing to do
            client = await _early_initialize(transport, first, live, sdk)
            if client is not None:
                # Nothing needs the SDK before the client's next message: when the input
                # ends instead (a client that only asked what we are), end now.
                following = await transport.receive()
                if following is None:
                    return
                transport.unread(following)
            module = await sdk
            agent: SynapseAcpAgent = module.SynapseAcpAgent(live)
            holder.append(agent)
            if client is not None:
                _accept_client(agent, client)
            transport.on_sent.append(agent.message_sent)
            from acp import Agent, run_agent

            # Our agent answers a subset of `acp.Agent`; the SDK's router sends
            # method-not-found for the rest.
            await run_agent(cast("Agent", agent), transport)
        except asyncio.CancelledError:
            if not stopped_by:
                raise
        finally:
            for agent in holder:
                pids.extend(agent.child_pids())
                await asyncio.shield(agent.close())
            await transport.close()

    code = 0
    try:
        asyncio.run(run())
        if stopped_by:
            code = 128 + stopped_by[0]
    except KeyboardInterrupt:
        code = 130
    finally:
        _kill_leftovers(pids)
        logging.shutdown()
    # Everything we own is closed (sessions stored, shells and MCP servers reaped): end
    # without the interpreter's teardown, freeing the SDK's objects one by one (tens of
    # ms), or waiting for an import still running (the input ended first).
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


async def _early_initialize(
    transport: NdjsonTransport,
    first: dict[str, Any],
    live: LiveSettings,
    sdk: asyncio.Future[Any],
) -> dict[str, Any] | None:
    """Answer the first message if it is a valid `initialize` and the SDK is still
    loading; its params (for the agent) then, else None (the message is left for the SDK)."""
    params = early_initialize(first)
    if params is None or sdk.done():
        transport.unread(first)
        return None
    settings = live()
    result = initialize_result(settings, has_key=has_api_key(settings))
    await transport.send({"jsonrpc": "2.0", "id": first["id"], "result": result})
    return params


def _accept_client(agent: SynapseAcpAgent, params: dict[str, Any]) -> None:
    from acp.schema import ClientCapabilities, Implementation

    try:
        caps = ClientCapabilities.model_validate(params.get("clientCapabilities") or {})
    except ValueError:
        caps = ClientCapabilities()
    try:
        info = params.get("clientInfo")
        client = Implementation.model_validate(info) if isinstance(info, dict) else None
    except ValueError:
        client = None
    agent.accept_client(caps, client)


def _kill_leftovers(pids: list[int]) -> None:
    """Last resort: SIGKILL the process groups of shells that are somehow still alive."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getsid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
