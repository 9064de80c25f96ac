"""One bash, from its start to its end, and the command running in it.

A command is written to the command file and sourced by one line on the PTY; it is
over when its completion marker (`framing`) has come and bash is seen back at its
prompt (`terminal`); meanwhile its output arrives on its FIFOs (`streams`). A
timeout or a cancel stops it (`groups`); a marker that does not hold (a command
still running 1 s after it, or a prompt without one) is a protocol violation: the
command and bash are killed. docs/shell.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp.commands import OutputSink
from synapse_lsp.config import Settings
from synapse_lsp.errors import ShellError
from synapse_lsp.output import BoundedCapture
from synapse_lsp.shell import framing
from synapse_lsp.shell.command import INTERRUPT_EXIT_CODE, Run
from synapse_lsp.shell.framing import MarkerParser, Output
from synapse_lsp.shell.groups import (
    INTERRUPT_GRACE_S,
    KILL_GRACE_S,
    Groups,
    end_session,
    end_session_soon,
    exit_status,
)
from synapse_lsp.shell.spawn import START_TIMEOUT_S, ShellFiles
from synapse_lsp.shell.streams import IDLE_BUFFER, Readers, Streams
from synapse_lsp.shell.terminal import READ_SIZE, Terminal

log = logging.getLogger(__name__)

# Framing (docs/shell.md "Framing guarantees"). A completion marker counts only
# once bash is seen back at its prompt; a marker followed by a command still running
# this long is forged: the command is killed and the shell replaced.
MARKER_GRACE_S = 1.0
SETTLE_SPIN_S = 0.002  # spin this long for bash to reach its read before polling async
# bash seen idle at its prompt without a marker for the running command on two checks
# this far apart: the command broke the prompt hook; the shell is replaced.
SILENT_CHECK_S = 0.5


class Bash:
    """A started bash (`spawn.launch`) on `term`: its files, FIFOs and readers, the
    command in flight (`run`) and where bash is (`cwd`; `moved` hears of each change).
    `terminate` ends it for good; a session then starts another."""

    def __init__(
        self,
        term: Terminal,
        *,
        files: ShellFiles,
        streams: Streams,
        readers: Readers,
        nonce: str,
        pidfd: int,
        parent_w: int,
        cwd: Path,
        private_tmp: Path | None,
        moved: Callable[[Path], None],
        settings: Callable[[], Settings] | None = None,
    ) -> None:
        assert files.dir is not None
        self.term = term
        self.groups = Groups(term)
        self.files = files
        self.streams = streams
        self.nonce = nonce
        self.cwd = cwd
        self.run: Run | None = None
        self._readers = readers
        self._pidfd = pidfd
        self._parent_w = parent_w  # its end of file tells the supervisor that we are gone
        self._private_tmp = private_tmp  # the host directory a sandboxed bash sees as /tmp
        self._moved = moved
        self._seq = 0
        self._settings = settings
        # The next command's run, made ahead (`_tidy`) with the settings it was made
        # for: ~10 µs of objects off the next command's path.
        self._next: tuple[tuple[object, ...], Run] | None = None
        self._idle_out = bytearray()  # PTY output between commands
        self._line = framing.line_template(files.cmd_path, files.dir)

    async def handshake(self, stderr_fifo: Path, settings: Settings) -> None:
        """bash's first line (`framing.startup_line`), answered by its first marker;
        a ShellError (bash ended) when no marker comes."""
        run = Run(
            seq=0,
            stdout=BoundedCapture(settings.output, None),
            stderr=BoundedCapture(settings.output, None),
            on_output=None,
            done=asyncio.get_running_loop().create_future(),
            frame=MarkerParser(self.nonce, 0),
        )
        self._begin(run)
        try:
            self.term.send(framing.startup_line(stderr_fifo, self.nonce))
            await asyncio.wait({run.done}, timeout=START_TIMEOUT_S)
        finally:
            self._end(run)
        if not run.done.done() or run.shell_exit is not None:
            detail = run.stdout.text() + run.stderr.text()
            self.terminate()
            raise ShellError(f"bash did not start: {detail.strip() or 'no answer'}")

    def new_run(self, settings: Settings, on_output: OutputSink | None) -> Run:
        self._seq += 1
        made, self._next = self._next, None
        if made is not None and made[1].seq == self._seq and made[0] == _run_key(settings):
            made[1].on_output = on_output
            return made[1]
        return Run.start(self._seq, self.nonce, settings, on_output)

    async def execute(self, run: Run, command: str, timeout: float | None) -> bool:
        """Run `command` as `run` (from `new_run`); True when it timed out. A cancel
        interrupts it, reaps it, then goes through."""
        self.files.write(command)
        self.groups.mark_start(run)
        assert self.files.dir is not None
        self.streams.open_command_fifos(run, self.files.dir)
        self._begin(run)
        timed_out = False
        loop = asyncio.get_running_loop()
        waiter = run.waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _wake, waiter)
        try:
            self.term.prepare()
            run.watch = loop.call_later(SILENT_CHECK_S, self._silent_check, run)
            self.term.send(self._line.format(seq=run.seq))
            if not run.done.done():
                await waiter
            if not run.done.done():
                timed_out = True
                await self.stop(run)
        except asyncio.CancelledError:
            # Keep the session usable: interrupt, reap, then let the cancel through.
            run.cancelled = True
            await self.stop(run)
            self._finish(run)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self._end(run)
        self._finish(run)
        return timed_out

    def _finish(self, run: Run) -> None:
        self.streams.finish(run, alive=self.term.proc is not None)
        # Two loop turns on, once the caller has sent the result (a face's reply goes
        # out at the next turn): the FIFOs' upkeep, off the path of the next command.
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._tidy)

    def _tidy(self) -> None:
        if self.files.dir is not None and self.term.proc is not None:
            self.streams.tidy(self._seq + 1, self.files.dir)
            if self._settings is not None and self.run is None:
                settings = self._settings()
                made = Run.start(self._seq + 1, self.nonce, settings, None)
                self._next = (_run_key(settings), made)

    # -------------------------------------------------------- stopping it

    def interrupt(self) -> Run | None:
        """Ctrl-C for the running command (None: none runs); `stop` escalates."""
        run = self.run
        if run is None or run.done.done():
            return None
        run.cancelled = True
        self.groups.signal_foreground(run, signal.SIGINT)
        return run

    def kill(self) -> None:
        """SIGKILL the running command's process group now; bash stays."""
        run = self.run
        if run is None or run.done.done():
            return
        run.cancelled = True
        self.groups.interrupt_bash()
        self.groups.signal_foreground(run, signal.SIGKILL)
        self.groups.kill_command_tree(run)

    async def stop(self, run: Run, *, interrupted: bool = False) -> None:
        """SIGINT the foreground job; then SIGKILL its group; then replace a stuck bash.
        Survivors of the signalled groups (e.g. background grandchildren) are killed."""
        groups = self.groups
        if not interrupted:
            groups.signal_foreground(run, signal.SIGINT)
        await groups.await_stop(run, signal.SIGINT, INTERRUPT_GRACE_S)
        if not run.done.done():
            groups.interrupt_bash()
            groups.kill_groups(run)
            await groups.await_stop(run, signal.SIGKILL, KILL_GRACE_S)
        if not run.done.done() and self.run is run:
            log.warning("bash did not come back after SIGKILL of the command; restarting it")
            self.terminate()
        groups.kill_groups(run)
        groups.kill_command_tree(run)

    def terminate(self) -> None:
        """Kill bash and everything in its session; finish a command in flight."""
        self._let_go(end_session)

    async def close(self) -> None:
        """`terminate()` for good, its kill rounds and reap (ms: they wait between
        looks) awaited: meanwhile the event loop goes on (an exit's MCP servers get their
        signals). The command in flight is finished before its processes died."""
        proc = self._let_go(None)
        if proc is not None:
            await end_session_soon(proc)

    def _let_go(self, end: Callable[[PtyProcess], None] | None) -> PtyProcess | None:
        """Everything of `terminate()` but the session's killing, which `end` does in its
        place (before the command in flight is finished) or, when None, the caller after.
        The process is returned when `end` did not end it."""
        proc, self.term.proc = self.term.proc, None
        self.term.release()
        run = self.run
        self._readers.detach()
        if proc is not None and end is not None:
            end(proc)
        if run is not None and not run.done.done():
            if run.shell_exit is None and proc is not None:
                run.shell_exit = -signal.SIGKILL
            run.finish(INTERRUPT_EXIT_CODE if run.cancelled else -signal.SIGKILL)
        self.term.fd = -1
        self.streams.close(self.run)
        for fd in (self._pidfd, self._parent_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._pidfd = self._parent_w = -1
        self.files.close()
        return None if end is not None else proc

    # ------------------------------------------------------------- I/O

    def _begin(self, run: Run) -> None:
        """Make `run` the receiver of output; what arrived while idle is its first input."""
        self.run = run
        out = bytes(self._idle_out)
        self._idle_out.clear()
        self.streams.begin(run)
        if out:
            self._feed(run, out)
            run.frame.forget_marker()  # printed before the command was even sent: forged
        streams = self.streams
        self._readers.attach(
            (
                (self.term.fd, self._on_pty),
                (streams.err_r, lambda: streams.on_stderr(self.run)),
                (streams.out_r, lambda: streams.on_stdout(self.run)),
                (self._pidfd, self._on_exit),
            )
        )

    def _end(self, run: Run) -> None:
        if run.watch is not None:
            run.watch.cancel()
        if run.confirm is not None and run.confirm is not asyncio.current_task():
            run.confirm.cancel()
        if self.run is run:
            self.run = None
            self._idle_out += run.frame.take_pending()[-IDLE_BUFFER:]

    def _feed(self, run: Run, data: bytes) -> None:
        """The PTY's bytes through the framing: output to the command, markers noted."""
        for event in run.frame.feed(data):
            if isinstance(event, Output):
                run.stdout.feed(event.data)
                run.emit("stdout", event.text)

    def _on_pty(self) -> None:
        run = self.run
        if run is None:
            self._readers.read_idle(self.term.fd, self._idle_out)
            return
        # A short read ends this pump: the loop calls again while the PTY holds more,
        # and `_accept` reads it to its end before a marker counts.
        if self._pump(run, to_end=False) and run.frame.marker is not None and run.confirm is None:
            self._settle(run)

    def _pump(self, run: Run, *, to_end: bool = True) -> bool:
        """Read what the PTY holds (at most 16 chunks; until a short read unless
        `to_end`); False once the run is over."""
        for _ in range(16):
            if run.done.done() or self.run is not run or self.term.fd < 0:
                return False
            try:
                data = os.read(self.term.fd, READ_SIZE)
            except BlockingIOError:
                return True
            except OSError as exc:
                if exc.errno != errno.EIO:
                    log.warning("reading the shell failed: %s", exc)
                data = b""
            if not data:
                self._on_exit()
                return False
            self._feed(run, data)
            if not to_end and len(data) < READ_SIZE:
                break
        return not run.done.done()

    def _on_exit(self) -> None:
        """bash exited (`exit`, `exec`, killed): finish the command with its status."""
        run = self.run
        proc = self.term.proc
        if proc is None or run is None or run.done.done():
            if self._pidfd >= 0:
                self._readers.pause(self._pidfd)
            return
        # Read what is left on the PTY before it goes.
        if self.term.fd >= 0:
            with contextlib.suppress(OSError):
                while chunk := os.read(self.term.fd, READ_SIZE):
                    self._feed(run, chunk)
                    if run.done.done():
                        return
        if proc.isalive():
            if self._pidfd >= 0:
                # The PTY closed but the process lives on (`exec prog` with no terminal
                # fd): stop watching the PTY, whose EOF stays readable and would spin
                # the loop, and wait idle for the pidfd.
                self._readers.pause(self.term.fd)
                return
            # No pidfd: give it a moment to be reaped.
            time.sleep(0.01)
        status = exit_status(proc)
        self.streams.drain(run, self.streams.out_r, "stdout")
        self.streams.drain(run, self.streams.err_r, "stderr")
        run.shell_exit = status
        run.finish(status)
        self.terminate()

    # ------------------------------------------------------------ framing

    def _settle(self, run: Run) -> None:
        """A marker for `run` arrived: accept it once bash is back at its prompt. bash
        gets there microseconds after printing it, so spin briefly, then poll."""
        until = time.monotonic() + SETTLE_SPIN_S
        while not self._accept(run):
            if time.monotonic() >= until:
                run.confirm = asyncio.get_running_loop().create_task(self._confirm(run))
                return

    async def _confirm(self, run: Run) -> None:
        started = time.monotonic()
        delay = 0.001
        while not run.done.done() and self.run is run:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
            if self._accept(run):
                return
            if time.monotonic() - started >= MARKER_GRACE_S:
                self._violate(
                    run, "a completion marker was printed while the command was still running"
                )
                return

    def _accept(self, run: Run) -> bool:
        """Finish `run` with its last marker if bash waits at its prompt; True when over.
        A real marker is printed right before bash reads: the PTY is read to its end
        first (a forged marker earlier in the output is superseded by the real one)."""
        if run.done.done():
            return True
        if self.run is not run or not self.term.at_prompt():
            return False
        if not self._pump(run):
            return run.done.done()
        marker = run.frame.marker
        if marker is None or self.term.input_pending() or not self.term.at_prompt():
            return False
        self._set_cwd(marker.cwd)
        run.finish(marker.code)
        return True

    def _set_cwd(self, claimed: bytes | None) -> None:
        self.cwd = self.term.bash_cwd(claimed, self.cwd, self._private_tmp)
        self._moved(self.cwd)

    def _silent_check(self, run: Run) -> None:
        """bash idle at its prompt with no marker for the running command (the command
        disabled the prompt hook, e.g. `readonly PS1`, or an `extdebug` DEBUG trap):
        on the second check in a row the shell is replaced."""
        if run.done.done() or self.run is not run:
            return
        if run.frame.marker is None and self.term.at_prompt(strict=True):
            self._pump(run)
            if run.done.done() or self.run is not run:
                return
            if run.frame.marker is not None and run.confirm is None:
                # This read took the marker `_on_pty` would have seen (the command ended
                # right now): settle it here, or nothing will (the PTY is drained).
                self._settle(run)
                return
            if (
                run.frame.marker is None
                and not self.term.input_pending()
                and self.term.at_prompt(strict=True)
            ):
                run.silent += 1
                if run.silent >= 2:
                    self._violate(run, "the shell returned to its prompt without its marker")
                    return
            else:
                run.silent = 0
        else:
            run.silent = 0
        run.watch = asyncio.get_running_loop().call_later(SILENT_CHECK_S, self._silent_check, run)

    def _violate(self, run: Run, why: str) -> None:
        """The framing cannot be trusted: kill the command and bash (the session starts
        a fresh shell in bash's directory)."""
        if run.done.done():
            return
        log.warning("shell protocol violation in command %d: %s", run.seq, why)
        run.violation = why
        self._set_cwd(None)
        pid = self.term.pid
        if pid is not None:  # first, or it runs on (`wait; echo` once a job dies)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.groups.kill_groups(run)
        self.groups.kill_command_tree(run)
        for fd, stream in ((run.out_fd, "stdout"), (run.err_fd, "stderr")):
            self.streams.drain(run, fd, stream)  # what it wrote before it was killed
        self.terminate()


def _run_key(settings: Settings) -> tuple[object, ...]:
    """What of the settings a `Run` is made with (`Run.start`)."""
    return (
        settings.output,
        settings.synapse_home,
        settings.spill_max_bytes,
        settings.spill_total_bytes,
    )


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
