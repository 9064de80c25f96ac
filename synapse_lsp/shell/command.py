"""One command: its state while it runs (`Run`, fed by the PTY and FIFO readers) and
what it comes to (`ShellResult`)."""

from __future__ import annotations

import asyncio
import codecs
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from synapse_lsp.commands import OutputSink
from synapse_lsp.config import Settings
from synapse_lsp.output import BoundedCapture, SpillBudget
from synapse_lsp.shell.framing import MarkerParser

log = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE = 124
INTERRUPT_EXIT_CODE = 130
VIOLATION_EXIT_CODE = 128 + signal.SIGKILL


@dataclass
class ShellResult:
    """One command's outcome. `stdout`/`stderr` are bounded for the model (head + tail and
    a cut marker); `full_output_path` names the file holding everything when cut."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    cancelled: bool = False
    truncated: bool = False
    full_output_path: Path | None = None
    duration: float = 0.0
    # The command broke the framing (a forged completion marker, or a prompt hook it
    # disabled): it was killed and the shell replaced; stderr says so.
    protocol_violation: bool = False
    # The command ended the shell itself (`exit`, `exec`): a fresh one starts next.
    shell_exited: bool = False


def _utf8() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")("replace")


@dataclass
class Run:
    """The state of the command in flight; the PTY/FIFO callbacks feed it."""

    seq: int
    stdout: BoundedCapture
    stderr: BoundedCapture
    on_output: OutputSink | None
    done: asyncio.Future[int]
    frame: MarkerParser  # the PTY's bytes: output and completion markers
    out_decoder: codecs.IncrementalDecoder = field(default_factory=_utf8)  # stdout FIFOs
    err_decoder: codecs.IncrementalDecoder = field(default_factory=_utf8)
    pgrps: set[int] = field(default_factory=set)  # process groups we signalled
    # The program each signalled group's leader ran then (/proc/PID/exe): a job still
    # between fork and exec catches a signal in bash's handler, and its program never
    # sees it, so a group whose leader has exec'd since is signalled again.
    programs: dict[int, str | None] = field(default_factory=dict)
    # What the command started: processes below bash or the supervisor with a pid
    # above `last_pid` (else newer than this tick; `procs.command_processes`).
    since: int = 0
    # The last pid the kernel gave out before the command: pids grow until they wrap,
    # so the command's processes are exactly those above it (None: unknown).
    last_pid: int | None = None
    out_fd: int = -1  # this command's own stdout FIFO (read end)
    err_fd: int = -1  # and stderr FIFO
    fifo_paths: tuple[str, ...] = ()
    cancelled: bool = False
    shell_exit: int | None = None  # bash itself exited during the command
    confirm: asyncio.Task[None] | None = None  # waits for bash to be back at its prompt
    # The caller's wait (`Bash.execute`): woken in the step that sets `done`, where a
    # wait on `done` itself would take one more turn of the loop (~5 µs); a cancel of
    # the caller cancels it, never `done`.
    waiter: asyncio.Future[None] | None = None
    watch: asyncio.TimerHandle | None = None  # `Bash._silent_check`
    silent: int = 0
    violation: str | None = None

    @classmethod
    def start(cls, seq: int, nonce: str, settings: Settings, on_output: OutputSink | None) -> Run:
        """A command's run: its output bounded as `settings` say, spilled to
        `$SYNAPSE_HOME/outputs` within one budget for both streams."""
        spill = settings.synapse_home / "outputs"
        budget = SpillBudget(settings.spill_max_bytes, settings.spill_total_bytes)
        return cls(
            seq=seq,
            stdout=BoundedCapture(settings.output, spill, name="stdout", budget=budget),
            stderr=BoundedCapture(settings.output, spill, name="stderr", budget=budget),
            on_output=on_output,
            done=asyncio.get_running_loop().create_future(),
            frame=MarkerParser(nonce, seq),
        )

    def finish(self, code: int) -> None:
        """The command is over with `code` (`done`), and its caller is woken."""
        self.done.set_result(code)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def emit(self, stream: str, text: str) -> None:
        if self.on_output is None or not text:
            return
        try:
            self.on_output(stream, text)
        except Exception:  # a face's bug must not break the session
            log.exception("on_output callback failed")


def result_of(
    run: Run, started: float, timed_out: bool, *, cmd_path: str, cwd: Path, notice: str
) -> ShellResult:
    """`run` as the caller sees it: bash's mentions of the command file (`cmd_path`)
    cut, `notice` (what background jobs wrote since) and what went wrong appended."""
    exit_code = run.done.result() if run.done.done() else -1
    stderr = run.stderr.text()
    if cmd_path:
        stderr = stderr.replace(f"{cmd_path}: ", "")
    if stderr == "\n" and (run.cancelled or timed_out):
        stderr = ""  # bash's newline after ^C
    stderr += notice
    if run.violation is not None:
        stderr += (
            f"\n[protocol violation: {run.violation}; the command was killed and the "
            f"shell replaced by a fresh one in {cwd}: variables, functions and "
            "aliases set by earlier commands are lost]\n"
        )
        exit_code = VIOLATION_EXIT_CODE
    elif run.shell_exit is not None:
        stderr += (
            f"\n[the shell exited (status {run.shell_exit}); "
            "a fresh shell starts with the next command]\n"
        )
    if timed_out:
        exit_code = TIMEOUT_EXIT_CODE
    elif run.cancelled:
        exit_code = INTERRUPT_EXIT_CODE if exit_code == 0 else exit_code
    return ShellResult(
        stdout=run.stdout.text(),
        stderr=stderr,
        exit_code=exit_code,
        timed_out=timed_out,
        cancelled=run.cancelled and not timed_out,
        truncated=run.stdout.truncated or run.stderr.truncated,
        full_output_path=run.stdout.full_output_path or run.stderr.full_output_path,
        duration=time.perf_counter() - started,
        protocol_violation=run.violation is not None,
        shell_exited=run.violation is None and run.shell_exit is not None,
    )
