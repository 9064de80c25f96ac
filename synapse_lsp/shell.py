"""The persistent shell session: one long-lived bash on a pseudo-terminal.

Each command is written to a file and sourced (`. FILE </dev/null`), so multi-line
text, heredocs and syntax errors need no quoting and cannot eat the protocol's
input. Completion is seen when bash's `PROMPT_COMMAND` prints a line carrying a
per-session random nonce, the command's sequence number, `$?` and `$PWD` — the
prompt is printed even after Ctrl-C, unlike a marker appended to the command.
bash sits on the PTY (job control: each command is a process group we can signal);
the command's stdout and stderr go to two FIFOs read concurrently, because a PTY
moves bulk output 50x slower than a pipe here. The measurements and the reasons:
docs/architecture.md "The persistent shell".
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import re
import secrets
import shutil
import signal
import struct
import tempfile
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp import proctree, sandbox
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import OutputSink
from synapse_lsp.config import MIN_TIMEOUT_S, OutputLimits, Settings, SettingsSource, as_source
from synapse_lsp.errors import ShellError
from synapse_lsp.output import BoundedCapture, SpillBudget
from synapse_lsp.sandbox import HOST_VIEW, PathView, SandboxStatus

log = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE = 124
INTERRUPT_EXIT_CODE = 130
# After SIGINT, how long the command gets before its process group is SIGKILLed,
# and how long after that before bash itself is presumed stuck and replaced.
INTERRUPT_GRACE_S = 1.0
KILL_GRACE_S = 2.0
STOP_POLL_S = 0.01  # while a command stops: how often a newly started job is looked for
START_TIMEOUT_S = 30.0  # generous: a loaded CI machine can take seconds to fork
READ_SIZE = 1 << 16
FIFO_READ_SIZE = 1 << 18
DRAIN_LIMIT = 64
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, Linux; not exported before Python 3.10 on all builds
# Output that arrives between commands (background jobs) is kept up to this size for
# the next command; beyond it we stop reading so the job blocks instead of our memory growing.
IDLE_BUFFER = 1 << 16
# Framing (docs/architecture.md "Framing guarantees"). A completion marker counts only
# once bash is seen back at its prompt; a marker followed by a command still running
# this long is forged: the command is killed and the shell replaced.
MARKER_GRACE_S = 1.0
SETTLE_SPIN_S = 0.002  # spin this long for bash to reach its read before polling async
# bash seen idle at its prompt without a marker for the running command on two checks
# this far apart: the command broke the prompt hook; the shell is replaced.
SILENT_CHECK_S = 0.5
VIOLATION_EXIT_CODE = 128 + signal.SIGKILL
# Names the socket of the shell's extension registry (`wrapper_files.SOCKET_ENV`).
SOCKET_ENV = "SYNAPSE_EXT_SOCKET"
# Options that entering and leaving POSIX mode changes; the prompt hook restores them.
_POSIX_SHOPTS = (
    "interactive_comments",
    "sourcepath",
    "expand_aliases",
    "inherit_errexit",
    "shift_verbose",
)


@dataclass(frozen=True)
class WrapperDir:
    """The wrappers of the extension registry a shell belongs to
    (`wrapper_files.RunDir`): `bin_dir` goes first on PATH (before `$SYNAPSE_HOME/bin`),
    `socket` is exported as `$SYNAPSE_EXT_SOCKET`, and `visible` stays visible, read-only,
    in the sandbox, where the rest of `$SYNAPSE_HOME/run` (other registries' sockets)
    is hidden."""

    bin_dir: Path
    socket: Path
    visible: tuple[Path, ...]


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


@dataclass
class _Run:
    """The state of the command in flight; the PTY/FIFO callbacks feed it."""

    seq: int
    stdout: BoundedCapture
    stderr: BoundedCapture
    on_output: OutputSink | None
    done: asyncio.Future[int]
    out_decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    err_decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    pending: bytearray = field(default_factory=bytearray)  # PTY bytes not yet classified
    pgrps: set[int] = field(default_factory=set)  # process groups we signalled
    # The program each signalled group's leader ran then (/proc/PID/exe): a job still
    # between fork and exec catches a signal in bash's handler, and its program never
    # sees it, so a group whose leader has exec'd since is signalled again.
    programs: dict[int, str | None] = field(default_factory=dict)
    # What the command started: processes below bash or the supervisor with a pid
    # above `last_pid` (else newer than this tick; `proctree.command_processes`).
    since: int = 0
    # The last pid the kernel gave out before the command: pids grow until they wrap,
    # so the command's processes are exactly those above it (None: unknown).
    last_pid: int | None = None
    out_fd: int = -1  # this command's own stdout FIFO (read end)
    err_fd: int = -1  # and stderr FIFO
    fifo_paths: tuple[str, ...] = ()
    cancelled: bool = False
    shell_exit: int | None = None  # bash itself exited during the command
    marker: tuple[int, bytes] | None = None  # (exit code, claimed cwd) of the last marker
    confirm: asyncio.Task[None] | None = None  # waits for bash to be back at its prompt
    watch: asyncio.TimerHandle | None = None  # `_silent_check`
    silent: int = 0
    violation: str | None = None


@dataclass
class _Background:
    """A finished command's FIFO still held open by the background jobs it started:
    their output goes to its own capture (and spill file), never into a later command's
    output; the next results carry a notice saying how much arrived and where it is."""

    seq: int
    stream: str
    fd: int
    capture: BoundedCapture
    reported: int = 0


# A command that may have made a repository in the workspace (checked for one after).
_MAY_MAKE_REPO = re.compile(
    r"\bgit\b.*\b(?:init|clone|submodule|worktree)\b|\.git\b|"
    r"\b(?:tar|unzip|cp|mv|rsync|7z|bsdtar)\b"
)


class ShellSession:
    """A bash kept alive between commands: cwd, exported variables and functions persist.

    `run` calls are serialized. Cancelling the task awaiting `run` interrupts the
    command (SIGINT, then SIGKILL of its process group) and keeps the session.

    Unless `settings.sandbox` is full-access, bash runs inside bubblewrap
    (`synapse_lsp.sandbox`) where it works: `writable` (default: `cwd`, the workspace
    root) are the only writable roots in workspace-write mode, `/tmp` is the session's
    own (`private_tmp` on the host). The mode is read when a bash starts. `wrappers`:
    the extension registry's own wrappers and socket (none: `$SYNAPSE_HOME/bin` only).
    """

    def __init__(
        self,
        cwd: Path,
        settings: Settings | SettingsSource,
        env: dict[str, str] | None = None,
        *,
        writable: Sequence[Path] | None = None,
        wrappers: WrapperDir | None = None,
        private_tmp: Path | None = None,
    ) -> None:
        self._settings = as_source(settings)
        self.wrappers = wrappers
        self._initial_cwd = Path(cwd).resolve()
        self._cwd = self._initial_cwd
        self._writable = (
            [self._initial_cwd] if writable is None else [Path(p).resolve() for p in writable]
        )
        self._sandbox: SandboxStatus | None = None  # what the current bash runs under
        # The sandbox's /tmp, kept across fresh shells until close(); one given by the
        # caller (the folder's, shared by its shells and its registry) is the caller's.
        self._private_tmp: Path | None = private_tmp
        self._owns_tmp = private_tmp is None
        # Nested repositories whose git config and hooks the running bash keeps
        # read-only, and ones found since (a fresh bash binds them: `run`).
        self._nested_git: set[Path] = set()
        self._new_git: set[Path] = set()
        self._extra_env = dict(env or {})
        self._lock = asyncio.Lock()
        self._proc: PtyProcess | None = None
        self._fd = -1
        self._nonce = ""
        self._seq = 0
        self._dir: Path | None = None
        self._err_r = -1
        self._err_w = -1
        self._out_r = -1
        self._out_w = -1
        self._pidfd = -1
        self._bash_pid: int | None = None  # bash runs under a supervisor (`proctree`)
        self._parent_w = -1  # its end-of-file tells the supervisor that we are gone
        self._script_fd = -1
        self._script_len = 0
        self._reading: set[int] = set()
        self._idle_out = bytearray()
        self._idle_err = bytearray()
        self._idle_fifo = bytearray()
        self._run: _Run | None = None
        self._closed = False
        self._exit_note: str | None = None
        self._escalations: set[asyncio.Task[None]] = set()
        self._background: dict[int, _Background] = {}  # by FIFO fd
        # Learnt from each fresh bash: its PTY slave, terminal modes and the read it
        # waits in at its prompt (`/proc/PID/syscall`: number, fd, buffer, size).
        self._slave = ""
        self._tty_attrs: list[Any] | None = None
        self._prompt_sig: tuple[str, ...] | None = None

    # ------------------------------------------------------------ properties

    @property
    def cwd(self) -> Path:
        """The shell's current directory after the last command."""
        return self._cwd

    @property
    def pid(self) -> int | None:
        """bash's pid (its parent is the session's supervisor, `supervisor_pid`, or,
        sandboxed, bubblewrap below the supervisor)."""
        return None if self._proc is None else self._bash_pid

    @property
    def sandbox(self) -> SandboxStatus:
        """What the current bash runs under; before the first start, what it would."""
        if self._sandbox is not None:
            return self._sandbox
        return sandbox.status(self.settings)

    @property
    def roots(self) -> tuple[Path, ...]:
        """The workspace roots the shell was given (writable in workspace-write)."""
        return tuple(self._writable)

    @property
    def writable_paths(self) -> tuple[Path, ...]:
        """Where a sandboxed command may write, as it spells paths: the writable roots
        (none in read-only mode; their `.git` excepted) and `/tmp` (`private_tmp`).
        Unsandboxed: the writable roots given (nothing is enforced)."""
        status = self.sandbox
        if not status.sandboxed:
            return tuple(self._writable)
        roots = self._writable if status.mode == "workspace-write" else []
        return (*roots, Path("/tmp"))  # noqa: S108 - the sandbox's own

    @property
    def private_tmp(self) -> Path | None:
        """The host directory a sandboxed bash sees as `/tmp` (None unsandboxed)."""
        return self._private_tmp if self._sandbox and self._sandbox.sandboxed else None

    @property
    def view(self) -> PathView:
        """How this shell's commands spell paths (`sandbox.PathView`): what built-ins,
        skill scripts and hand-over files go through so every layer sees one world."""
        tmp = self.private_tmp
        if tmp is None:
            return HOST_VIEW
        own = [*self._writable, self.settings.synapse_home]
        own += [Path(p) for p in sandbox.own_install_under_tmp()]
        if self._dir is not None:
            own.append(self._dir)
        return PathView(tmp, tuple(own))

    @property
    def supervisor_pid(self) -> int | None:
        """The session leader on the PTY: bash's parent and the subreaper of whatever
        the commands start (see `proctree`)."""
        return None if self._proc is None else int(self._proc.pid)

    @property
    def alive(self) -> bool:
        return self._proc is not None and bool(self._proc.isalive())

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    # -------------------------------------------------------------- lifecycle

    @property
    def settings(self) -> Settings:
        """The live settings (read at use: a changed limit reaches the next command)."""
        return self._settings()

    async def start(self) -> None:
        """Start bash (idempotent while alive)."""
        async with self._lock:
            if not self.alive:
                await self._spawn()

    async def restart(self) -> None:
        """A fresh bash in the initial directory with a fresh environment. A command
        still running is ended (its result says so)."""
        if self._run is not None:
            self._terminate()
        async with self._lock:
            self._terminate()
            self._cwd = self._initial_cwd
            await self._spawn()

    async def close(self) -> None:
        """Kill bash and every process of its session; idempotent."""
        self._closed = True
        self._terminate()
        for task in list(self._escalations):
            task.cancel()
        if self._private_tmp is not None and self._owns_tmp:
            shutil.rmtree(self._private_tmp, ignore_errors=True)
            self._private_tmp = None

    def interrupt(self) -> None:
        """Ctrl-C for the running command; it ends with exit code 130 and `cancelled`.
        A command that ignores SIGINT is killed after a grace period."""
        run = self._run
        if run is None or run.done.done():
            return
        run.cancelled = True
        self._signal_foreground(run, signal.SIGINT)
        task = asyncio.get_running_loop().create_task(self._escalate(run))
        self._escalations.add(task)
        task.add_done_callback(self._escalations.discard)

    def kill(self) -> None:
        """SIGKILL the running command's process group now; the session stays."""
        run = self._run
        if run is None or run.done.done():
            return
        run.cancelled = True
        self._interrupt_bash()
        self._signal_foreground(run, signal.SIGKILL)
        self._kill_command_tree(run)

    def forward_input(self, data: bytes) -> bool:
        """Keystrokes for the running command, from a face that lends it its terminal
        (`synapse chat`'s `!`, whose command reads `/dev/tty`). Written to the PTY only
        while a command's process group is in the terminal's foreground — never while
        bash itself reads there, where they would become a command line. False when not
        written (the caller may hold them and try again)."""
        if self._run is None or self._run.done.done() or self._fd < 0:
            return False
        pgrp = self._foreground_pgrp()
        if pgrp is None or pgrp in (self.pid, self.supervisor_pid):
            return False
        try:
            os.write(self._fd, data)
        except OSError:
            return False
        return True

    def set_window_size(self, rows: int, cols: int) -> tuple[int, int] | None:
        """Resize the session's terminal (the foreground command gets SIGWINCH); the
        previous (rows, cols), or None without a terminal."""
        proc = self._proc
        if proc is None:
            return None
        try:
            previous: tuple[int, int] = tuple(proc.getwinsize())  # type: ignore[assignment]
            proc.setwinsize(rows, cols)
        except OSError:
            return None
        return previous

    async def _escalate(self, run: _Run) -> None:
        await self._stop(run, interrupted=True)

    # ------------------------------------------------------------------- run

    async def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        on_output: OutputSink | None = None,
    ) -> ShellResult:
        """Run one command line (any bash text); its stdin is /dev/null."""
        if self._closed:
            raise ShellError("the shell session is closed")
        limit = self.settings.command_timeout if timeout is None else timeout
        limit = max(limit, MIN_TIMEOUT_S)  # less could interrupt bash before the command
        wait_for: float | None = None if limit <= 0 or math.isinf(limit) else limit
        async with self._lock:
            note = ""
            if self.alive and self._new_git:
                # A repository appeared in the workspace (`git init`, a clone): bwrap's
                # mounts are fixed at start, so a fresh bash keeps its git config and
                # hooks read-only like the others'.
                found = ", ".join(str(g) for g in sorted(self._new_git))
                self._terminate()
                await self._spawn()
                note = (
                    f"[a new repository ({found}): its git config and hooks are now "
                    f"read-only in the sandbox; a fresh shell started in {self._cwd}; "
                    "exported variables and functions were reset]\n"
                )
            elif self.alive and (changed := self._sandbox_change()) is not None:
                # The mode or network setting changed (an editor setting, ACP's
                # session/set_mode): bwrap's mounts are fixed at start, so a fresh
                # bash in the same directory; its exports are gone, and it says so.
                self._terminate()
                await self._spawn()
                note = (
                    f"[the sandbox is now {changed.describe()}: a fresh shell started in "
                    f"{self._cwd}; exported variables and functions were reset]\n"
                )
            elif not self.alive:
                self._terminate()
                await self._spawn()
            result = await self._run_locked(command, wait_for, on_output)
            result.stderr = note + result.stderr + self._look_for_new_git(command)
            return result

    def _look_for_new_git(self, command: str) -> str:
        """After a command that may have made a repository (`_MAY_MAKE_REPO`): its git
        folder is protected from the next command on (`_new_git`), and what in it would
        make the user's next `git status` there run a program is said now."""
        status = self._sandbox
        if (
            status is None
            or not status.sandboxed
            or status.mode != "workspace-write"
            or not _MAY_MAKE_REPO.search(command)
        ):
            return ""
        new = sandbox.nested_git_dirs(self._writable) - self._nested_git
        if not new:
            return ""
        self._new_git = new
        warnings = [
            f"{git}: {', '.join(found[:5])}"
            for git in sorted(new)
            if (found := sandbox.programs_in_git_config(git))
        ]
        if not warnings:
            return ""
        return (
            "\n[warning: a new repository's git config or hooks make git run programs "
            "(a user's `git status` there would run them): " + "; ".join(warnings) + "]\n"
        )

    def _sandbox_change(self) -> SandboxStatus | None:
        """The status a bash started now would get, when it differs from the running one's."""
        current = self._sandbox
        if current is None:
            return None
        wanted = sandbox.status(self.settings)
        same_mode = (current.mode, current.sandboxed) == (wanted.mode, wanted.sandboxed)
        same_network = not wanted.sandboxed or current.network == wanted.network
        return None if same_mode and same_network else wanted

    async def _run_locked(
        self, command: str, timeout: float | None, on_output: OutputSink | None
    ) -> ShellResult:
        assert self._dir is not None
        started = time.perf_counter()
        self._seq += 1
        settings = self.settings
        spill = settings.synapse_home / "outputs"
        budget = SpillBudget(settings.spill_max_bytes, settings.spill_total_bytes)
        run = _Run(
            seq=self._seq,
            stdout=BoundedCapture(settings.output, spill, name="stdout", budget=budget),
            stderr=BoundedCapture(settings.output, spill, name="stderr", budget=budget),
            on_output=on_output,
            done=asyncio.get_running_loop().create_future(),
        )
        try:
            data = command.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = command.encode("utf-8", "replace")
        # Rewritten in place: re-creating a file costs ~0.3 ms on ext4, this ~0.02 ms.
        data += b"\n"
        os.pwrite(self._script_fd, data, 0)
        if len(data) < self._script_len:
            os.ftruncate(self._script_fd, len(data))  # ~0.15 ms even on tmpfs: only when shorter
        self._script_len = len(data)
        self._mark_start(run)
        self._open_command_fifos(run)
        self._begin(run)
        timed_out = False
        try:
            self._prepare_terminal()
            run.watch = asyncio.get_running_loop().call_later(
                SILENT_CHECK_S, self._silent_check, run
            )
            self._send(self._line_template.format(seq=run.seq))
            await asyncio.wait({run.done}, timeout=timeout)
            if not run.done.done():
                timed_out = True
                await self._stop(run)
        except asyncio.CancelledError:
            # Keep the session usable: interrupt, reap, then let the cancel through.
            run.cancelled = True
            await self._stop(run)
            self._finish_capture(run)
            raise
        finally:
            self._end(run)
        self._finish_capture(run)
        if run.violation is not None and not self._closed:
            try:  # the notice promises a fresh shell in the command's directory
                await self._spawn()
            except ShellError as exc:
                log.warning("no fresh shell after a protocol violation: %s", exc)
        return self._result(run, started, timed_out)

    def _result(self, run: _Run, started: float, timed_out: bool) -> ShellResult:
        exit_code = run.done.result() if run.done.done() else -1
        stderr = run.stderr.text().replace(f"{self._cmd_path}: ", "")
        if stderr == "\n" and (run.cancelled or timed_out):
            stderr = ""  # bash's newline after ^C
        stderr += self._background_notice()
        if run.violation is not None:
            stderr += (
                f"\n[protocol violation: {run.violation}; the command was killed and the "
                f"shell replaced by a fresh one in {self._cwd}: variables, functions and "
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

    async def _stop(self, run: _Run, *, interrupted: bool = False) -> None:
        """SIGINT the foreground job; then SIGKILL its group; then replace a stuck bash.
        Survivors of the signalled groups (e.g. background grandchildren) are killed."""
        if not interrupted:
            self._signal_foreground(run, signal.SIGINT)
        await self._await_stop(run, signal.SIGINT, INTERRUPT_GRACE_S)
        if not run.done.done():
            self._interrupt_bash()
            self._kill_groups(run)
            await self._await_stop(run, signal.SIGKILL, KILL_GRACE_S)
        if not run.done.done() and self._run is run:
            log.warning("bash did not come back after SIGKILL of the command; restarting it")
            self._terminate()
        self._kill_groups(run)
        self._kill_command_tree(run)

    async def _await_stop(self, run: _Run, sig: signal.Signals, seconds: float) -> None:
        """Wait for the prompt, giving `sig` to each job that takes the terminal meanwhile.
        A signal sent as bash forks the next job of a list (`a; sleep 60; touch f`)
        reaches bash, not the job, which would run on and, once killed, let the list
        go on: a job that dies of SIGINT makes interactive bash drop the rest."""
        deadline = time.monotonic() + seconds
        while not run.done.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.wait({run.done}, timeout=min(STOP_POLL_S, left))
            pgrp = self._foreground_pgrp()
            if run.done.done() or pgrp is None or pgrp in (self.pid, self.supervisor_pid):
                continue  # bash between jobs: the next job is caught when it starts
            if pgrp in run.programs:
                program = _program(pgrp)
                if program is None or program == run.programs[pgrp]:
                    continue  # signalled already, and it runs the same program
            self._signal_group(run, pgrp, sig)

    def _mark_start(self, run: _Run) -> None:
        """Remember where the command starts, to kill only what it started: the start
        tick and, for processes started within that tick, the last pid given out (one
        read of /proc/loadavg; pids above it are new)."""
        run.since = proctree.boot_ticks()
        run.last_pid = proctree.last_pid()

    def _kill_command_tree(self, run: _Run) -> None:
        """SIGKILL every process the command started, background jobs and `setsid`
        children included (they are re-parented to the supervisor, not to init); jobs
        of earlier commands are spared."""
        root, bash = self.supervisor_pid, self.pid
        if root is None:
            return
        roots = {root} if bash is None else {root, bash}
        mark = run.last_pid
        now = proctree.last_pid()
        if mark is not None and (now is None or now < mark):
            mark = None  # pids wrapped since the command started: the tick alone decides
        count = proctree.kill_all(
            lambda table: proctree.command_processes(table, roots, run.since, after_pid=mark)
        )
        if count:
            log.debug("killed %d processes of command %d", count, run.seq)

    def _finish_capture(self, run: _Run) -> None:
        self._drain(run, self._out_r, "stdout")
        self._drain(run, self._err_r, "stderr")
        self._release_command_fifos(run)
        for name, decoder in (("stdout", run.out_decoder), ("stderr", run.err_decoder)):
            tail = decoder.decode(b"", final=True)
            if tail:
                self._emit(run, name, tail)
        run.stdout.close()
        run.stderr.close()

    # ------------------------------------------------------------- signals

    def _foreground_pgrp(self) -> int | None:
        if self._fd < 0:
            return None
        try:
            return os.tcgetpgrp(self._fd)
        except OSError:
            return None

    def _signal_foreground(self, run: _Run, sig: signal.Signals) -> None:
        pid = self.pid
        pgrp = self._foreground_pgrp()
        if pid is None:
            return
        if pgrp is None or pgrp in (pid, self.supervisor_pid):
            # bash itself runs (a builtin loop, or between two jobs): interrupt bash.
            if sig == signal.SIGINT:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            return
        self._signal_group(run, pgrp, sig)

    def _interrupt_bash(self) -> None:
        """SIGINT bash itself before its job is killed: a job killed by another signal
        than SIGINT lets bash run the rest of the list (`ignores-int; touch f`), unless
        bash was interrupted while it waited. Only while a job has the terminal (bash
        waits for it): not while bash runs its prompt hook, which a SIGINT would cut
        short and run again."""
        pgrp = self._foreground_pgrp()
        if self.pid is None or pgrp is None or pgrp in (self.pid, self.supervisor_pid):
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGINT)

    def _signal_group(self, run: _Run, pgrp: int, sig: signal.Signals) -> None:
        run.pgrps.add(pgrp)
        run.programs[pgrp] = _program(pgrp)  # read before: a later exec is seen then
        with contextlib.suppress(OSError):
            os.killpg(pgrp, sig)

    def _kill_groups(self, run: _Run) -> None:
        pid, root = self.pid, self.supervisor_pid
        pgrp = self._foreground_pgrp()
        if pgrp is not None and pgrp not in (pid, root):
            run.pgrps.add(pgrp)
        if root is None:
            return
        # Only groups that still hold a process of this shell: a group recorded seconds
        # ago may be gone, and its id a new process's (pids wrap at 32768 on many
        # machines; a CI run wraps them), maybe another session's supervisor.
        table = proctree.scan()
        ours = {table[p].pgrp for p in proctree.descendants(root, table) if not table[p].zombie}
        for group in run.pgrps & ours:
            if group not in (pid, root) and group > 1:
                with contextlib.suppress(OSError):
                    os.killpg(group, signal.SIGKILL)

    # ---------------------------------------------------------- spawn / kill

    def starting_environment(self) -> dict[str, str]:
        """The environment a fresh bash of this session starts with (no secrets)."""
        return self._environment()

    def _environment(self) -> dict[str, str]:
        # The model's credentials and the `secretEnv` variables stay in this process:
        # nothing the model runs inherits them (`synapse_lsp.secrets`).
        from synapse_lsp.secrets import child_env

        env = child_env({**os.environ, **self._extra_env}, self.settings)
        # After the merge: `env=` may not bring back what bash would run or trip on.
        for name in ("BASH_ENV", "ENV", "PROMPT_COMMAND", "MAILCHECK", "HISTFILE", "CDPATH"):
            env.pop(name, None)
        env.update(
            {
                "TERM": "dumb",
                "PAGER": "cat",
                "GIT_PAGER": "cat",
                "MANPAGER": "cat",
                "SYSTEMD_PAGER": "cat",
                "NO_COLOR": "1",
                "PYTHONUNBUFFERED": "1",  # stdout is a pipe: stream Python output live
                "GIT_TERMINAL_PROMPT": "0",
                "PS1": "",
                "PS2": "",
                "HISTFILE": "",
                "SYNAPSE_HOME": str(self.settings.synapse_home),
                "PATH": os.pathsep.join([*self._bin_dirs(), env.get("PATH", os.defpath)]),
                "PROMPT_COMMAND": (
                    "__syn_rc=$?; printf '\\036%s:%s:%s:%s\\037%s' "
                    f'\'{self._nonce}\' "${{__syn_seq-}}" "$__syn_rc" "$PWD" \'{self._nonce}\''
                ),
            }
        )
        env.pop(SOCKET_ENV, None)  # one inherited from an enclosing Synapse is not ours
        if self.wrappers is not None:
            env[SOCKET_ENV] = str(self.wrappers.socket)
        return env

    def _bin_dirs(self) -> list[str]:
        own = [str(self.wrappers.bin_dir)] if self.wrappers is not None else []
        return [*own, str(self.settings.bin_dir)]

    async def _spawn(self) -> None:
        self._closed = False
        self._cmd_path = ""
        self._nonce = secrets.token_hex(8)
        self._dir = _private_dir()
        self._cmd_path = str(self._dir / "cmd")
        self._script_fd = os.open(self._cmd_path, os.O_WRONLY | os.O_CREAT, 0o600)
        self._script_len = 0
        fifo = self._dir / "stderr"
        out_fifo = self._dir / "stdout"
        os.mkfifo(fifo, 0o600)
        os.mkfifo(out_fifo, 0o600)
        # Our own write ends keep the FIFOs from reporting EOF between commands.
        self._err_r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._err_w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        self._out_r = os.open(out_fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._out_w = os.open(out_fifo, os.O_WRONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):  # fewer wake-ups for big outputs
            fcntl.fcntl(self._out_r, F_SETPIPE_SZ, 1 << 20)
        # `\.`: no alias applies to a quoted word (and the prompt hook removes a
        # function named `.`). bash's own stderr is /dev/null (prompts, traces of the
        # framing, job notices); the command's goes to the FIFO.
        self._line_template = (
            "__syn_seq={seq}; \\. "
            + quote(self._cmd_path).replace("{", "{{").replace("}", "}}")
            + " </dev/null >"
            + quote(str(self._dir)).replace("{", "{{").replace("}", "}}")
            + "/out.{seq} 2>"
            + quote(str(self._dir)).replace("{", "{{").replace("}", "}}")
            + "/err.{seq}\n"  # the command's own FIFOs (`_open_command_fifos`)
        )
        self._prompt_sig = None
        self._tty_attrs = None
        self._slave = ""
        cwd = self._cwd if self._cwd.is_dir() else self._initial_cwd
        bash = shutil.which("bash") or "/bin/bash"
        argv = [bash, "--norc", "--noprofile", "--noediting", "-i"]
        env = self._environment()
        # bash runs under a supervisor that reaps and kills everything the session
        # starts (`proctree`): it learns that we are gone from `parent_r`'s end of file,
        # and the process it forks reports its pid on `report_w` before it execs bash,
        # or bwrap, which then tells bash's pid on `info_w` (`--info-fd`).
        parent_r, parent_w = os.pipe2(os.O_CLOEXEC)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        info_r = info_w = filter_fd = -1
        status = sandbox.status(self.settings)
        if status.sandboxed:
            try:
                info_r, info_w = os.pipe2(os.O_CLOEXEC)
                filter_fd = sandbox.seccomp_fd()
                argv = self._sandbox_argv(status, info_w, cwd, filter_fd) + argv
            except OSError as exc:
                for fd in (parent_r, parent_w, report_r, report_w, info_r, info_w, filter_fd):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                self._cleanup_files()
                raise ShellError(f"cannot prepare the sandbox: {exc}") from exc
            env["TMPDIR"] = "/tmp"  # noqa: S108 - the sandbox's own /tmp
        self._sandbox = status

        def preexec() -> None:
            _raw_output()
            if info_w >= 0:
                os.set_inheritable(info_w, True)  # bwrap's --info-fd
            if filter_fd >= 0:
                os.set_inheritable(filter_fd, True)  # bwrap's --seccomp
            proctree.supervised_preexec(parent_r, report_w)

        try:
            proc = PtyProcess.spawn(
                argv,
                cwd=str(cwd),
                env=env,
                echo=False,
                dimensions=(50, 200),
                preexec_fn=preexec,
                pass_fds=tuple(fd for fd in (parent_r, report_w, info_w, filter_fd) if fd >= 0),
            )
            os.close(report_w)
            if filter_fd >= 0:
                os.close(filter_fd)  # bwrap has its copy
                filter_fd = -1
            report = os.read(report_r, 4)
            if info_w >= 0:
                os.close(info_w)
                info_w = -1
        except (OSError, Exception) as exc:  # ptyprocess raises plain Exception on exec failure
            for fd in (parent_r, parent_w, report_r, report_w, info_r, info_w, filter_fd):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._cleanup_files()
            raise ShellError(f"cannot start bash: {exc}") from exc
        os.close(parent_r)
        os.close(report_r)
        self._parent_w = parent_w
        self._bash_pid = struct.unpack("i", report)[0] if len(report) == 4 else None
        self._proc = proc
        self._fd = int(proc.fd)
        os.set_blocking(self._fd, False)
        fcntl.fcntl(self._fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self._pidfd = -1
        if info_r >= 0:
            # The reported pid is bwrap's; bash is the sandboxed child it names. (Awaited
            # once `_proc` is set: a cancel here leaves nothing `close()` cannot end.)
            self._bash_pid = None
            try:
                self._bash_pid = await _read_child_pid(info_r, START_TIMEOUT_S)
            finally:
                os.close(info_r)
        self._seq = 0
        self._idle_out.clear()
        self._idle_err.clear()
        self._idle_fifo.clear()
        self._reading.clear()
        run = _Run(
            seq=0,
            stdout=BoundedCapture(self.settings.output, None),
            stderr=BoundedCapture(self.settings.output, None),
            on_output=None,
            done=asyncio.get_running_loop().create_future(),
        )
        self._begin(run)
        try:
            self._send(
                f"exec 2>{quote(str(fifo))}; set +o history; "
                f"PROMPT_COMMAND={quote(_prompt_command(self._nonce))}; "
                "export -n PROMPT_COMMAND; readonly PROMPT_COMMAND; __syn_seq=0\n"
            )
            await asyncio.wait({run.done}, timeout=START_TIMEOUT_S)
        finally:
            self._end(run)
        if not run.done.done() or run.shell_exit is not None:
            detail = run.stdout.text() + run.stderr.text()
            self._terminate()
            raise ShellError(f"bash did not start: {detail.strip() or 'no answer'}")
        await self._learn_terminal()
        log.debug("shell %s started in %s", proc.pid, cwd)

    def _sandbox_argv(
        self, status: SandboxStatus, info_fd: int, cwd: Path, seccomp: int = -1
    ) -> list[str]:
        """bwrap's part of the command line (`sandbox.bwrap_argv`); the private /tmp is
        made once per session and kept across fresh shells until `close()`. bash starts
        in `cwd` as the sandbox spells it (`/tmp/x` for a host `<private_tmp>/x`)."""
        assert self._dir is not None
        if self._private_tmp is None or not self._private_tmp.is_dir():
            if self._private_tmp is not None and not self._owns_tmp:
                self._private_tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
            else:
                self._private_tmp = sandbox.make_private_tmp()
        self._nested_git = (
            sandbox.nested_git_dirs(self._writable) if status.mode == "workspace-write" else set()
        )
        self._new_git = set()
        return sandbox.bwrap_argv(
            status,
            nested_git=sorted(self._nested_git),
            writable=self._writable,
            private_dir=self._dir,
            private_tmp=self._private_tmp,
            synapse_home=self.settings.synapse_home,
            info_fd=info_fd,
            extension_dirs=self.wrappers.visible if self.wrappers is not None else (),
            chdir=PathView(self._private_tmp).seen(cwd),
            seccomp=seccomp,
        )

    def _terminate(self) -> None:
        """Kill bash and everything in its session; finish a command in flight."""
        proc, self._proc = self._proc, None
        run = self._run
        self._detach()
        if proc is not None:
            # Everything under the supervisor (bash, its jobs, orphans it adopted),
            # then the supervisor itself. Not once it is reaped: its pid (and session
            # id) may be another process's by now, and it killed its own tree on exit.
            root = int(proc.pid)
            if not proc.terminated:
                proctree.kill_all(lambda table: proctree.descendants(root, table))
                for group in _session_groups(root):
                    with contextlib.suppress(OSError):
                        os.killpg(group, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(root, signal.SIGKILL)
            # Not proc.close(): it sleeps 0.1 s twice. Close the PTY and reap bash.
            with contextlib.suppress(Exception):
                proc.fileobj.close()
            proc.closed = True
            _reap(proc)
        if run is not None and not run.done.done():
            if run.shell_exit is None and proc is not None:
                run.shell_exit = -signal.SIGKILL
            run.done.set_result(INTERRUPT_EXIT_CODE if run.cancelled else -signal.SIGKILL)
        self._fd = -1
        self._cleanup_files()

    def _cleanup_files(self) -> None:
        self._close_all_command_fifos()
        for fd in (
            self._err_r,
            self._err_w,
            self._out_r,
            self._out_w,
            self._pidfd,
            self._script_fd,
            self._parent_w,
        ):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._err_r = self._err_w = self._out_r = self._out_w = -1
        self._pidfd = self._script_fd = self._parent_w = -1
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # ------------------------------------------------------------- I/O

    def _send(self, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError as exc:
                raise ShellError(f"cannot write to the shell: {exc}") from exc
            data = data[written:]

    def _begin(self, run: _Run) -> None:
        """Make `run` the receiver of output; what arrived while idle is its first input."""
        self._run = run
        out, err, fifo = bytes(self._idle_out), bytes(self._idle_err), bytes(self._idle_fifo)
        self._idle_out.clear()
        self._idle_err.clear()
        self._idle_fifo.clear()
        if err:
            run.stderr.feed(err)
        if fifo:
            run.stdout.feed(fifo)
        if out:
            self._on_stdout_bytes(run, out)
            run.marker = None  # printed before the command was even sent: forged
        self._attach()

    def _end(self, run: _Run) -> None:
        if run.watch is not None:
            run.watch.cancel()
        if run.confirm is not None and run.confirm is not asyncio.current_task():
            run.confirm.cancel()
        if self._run is run:
            self._run = None
            self._idle_out += run.pending[-IDLE_BUFFER:]
            run.pending.clear()

    def _attach(self) -> None:
        """Readers stay registered between commands (re-registering costs ~0.15 ms a run)."""
        loop = asyncio.get_running_loop()
        for fd, callback in (
            (self._fd, self._on_pty),
            (self._err_r, self._on_stderr),
            (self._out_r, self._on_stdout_fifo),
            (self._pidfd, self._on_exit),
        ):
            if fd >= 0 and fd not in self._reading:
                loop.add_reader(fd, callback)
                self._reading.add(fd)

    def _pause(self, fd: int) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(fd)
        self._reading.discard(fd)

    def _detach(self) -> None:
        for fd in list(self._reading):
            self._pause(fd)

    def _emit(self, run: _Run, stream: str, text: str) -> None:
        if run.on_output is None or not text:
            return
        try:
            run.on_output(stream, text)
        except Exception:  # a face's bug must not break the session
            log.exception("on_output callback failed")

    def _on_stderr(self) -> None:
        run = self._run
        if run is None:
            self._read_idle(self._err_r, self._idle_err)
            return
        self._drain(run, self._err_r, "stderr", limit=8)

    def _on_stdout_fifo(self) -> None:
        run = self._run
        if run is None:
            self._read_idle(self._out_r, self._idle_fifo)
            return
        self._drain(run, self._out_r, "stdout", limit=8)

    def _read_idle(self, fd: int, buf: bytearray) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._pause(fd)  # EOF while idle: bash is gone; the next run() respawns
            return
        buf += data
        if len(buf) >= IDLE_BUFFER:
            self._pause(fd)

    def _drain(self, run: _Run, fd: int, stream: str, limit: int = DRAIN_LIMIT) -> bool:
        """Read a FIFO until it is empty (at most `limit` chunks: a background job that
        writes without pause must not hold us here). True at end of file (no writer)."""
        capture = run.stdout if stream == "stdout" else run.stderr
        decoder = run.out_decoder if stream == "stdout" else run.err_decoder
        for _ in range(limit):
            if fd < 0:
                return False
            try:
                data = os.read(fd, FIFO_READ_SIZE)
            except OSError:  # BlockingIOError: empty for now
                return False
            if not data:
                return True
            capture.feed(data)
            self._emit(run, stream, decoder.decode(data))
        return False

    # ------------------------------------------- per-command output FIFOs

    def _open_command_fifos(self, run: _Run) -> None:
        """Each command writes to FIFOs of its own (`>out.N 2>err.N`). A background job
        it starts inherits them, so what the job writes later is told apart from the
        next command's output: the FIFO outlives the command (`_Background`) until the
        last writer closes it."""
        assert self._dir is not None
        loop = asyncio.get_running_loop()
        paths = []
        for stream in ("stdout", "stderr"):
            path = str(self._dir / f"{'out' if stream == 'stdout' else 'err'}.{run.seq}")
            with contextlib.suppress(FileExistsError):
                os.mkfifo(path, 0o600)
            # No write end of ours: end of file says every writer (bash, jobs) is done.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            paths.append(path)
            if stream == "stdout":
                with contextlib.suppress(OSError):  # fewer wake-ups for big outputs
                    fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)
                run.out_fd = fd
            else:
                run.err_fd = fd
            loop.add_reader(fd, self._on_command_fifo, run, stream)
        run.fifo_paths = tuple(paths)

    def _on_command_fifo(self, run: _Run, stream: str) -> None:
        fd = run.out_fd if stream == "stdout" else run.err_fd
        if fd < 0:
            return
        if self._drain(run, fd, stream, limit=8):
            self._close_command_fd(run, stream)  # the command closed it (`exec >&-`)

    def _close_command_fd(self, run: _Run, stream: str) -> None:
        fd = run.out_fd if stream == "stdout" else run.err_fd
        if fd < 0:
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
        if stream == "stdout":
            run.out_fd = -1
        else:
            run.err_fd = -1

    def _release_command_fifos(self, run: _Run) -> None:
        """The command is over: drain its FIFOs; one that a background job still holds
        becomes a `_Background` sink, the others are closed."""
        for stream in ("stdout", "stderr"):
            fd = run.out_fd if stream == "stdout" else run.err_fd
            if fd < 0:
                continue
            if self._drain(run, fd, stream) or self._proc is None:
                self._close_command_fd(run, stream)
                continue
            settings = self.settings
            capture = BoundedCapture(
                OutputLimits(max_bytes=2048, max_lines=40),
                settings.synapse_home / "outputs",
                name=f"background-{run.seq}-{stream}",
                # The command's own allowance: what its jobs write later counts against
                # the same per-command cap (a `yes &` gets one cap, not one per sink).
                budget=run.stdout.budget,
            )
            loop = asyncio.get_running_loop()
            with contextlib.suppress(Exception):
                loop.remove_reader(fd)
            sink = _Background(run.seq, stream, fd, capture)
            self._background[fd] = sink
            loop.add_reader(fd, self._on_background, sink)
            if stream == "stdout":
                run.out_fd = -1
            else:
                run.err_fd = -1
        for path in run.fifo_paths:
            with contextlib.suppress(OSError):
                Path(path).unlink()
        run.fifo_paths = ()

    def _on_background(self, sink: _Background) -> None:
        for _ in range(8):
            try:
                data = os.read(sink.fd, FIFO_READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close_background(sink)
                return
            sink.capture.feed(data)

    def _close_background(self, sink: _Background) -> None:
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(sink.fd)
        with contextlib.suppress(OSError):
            os.close(sink.fd)
        sink.capture.close()
        sink.fd = -1
        # Kept until its last bytes are reported (`_background_notice`).
        if sink.capture.total_bytes <= sink.reported:
            self._background = {k: v for k, v in self._background.items() if v is not sink}

    def _background_notice(self) -> str:
        """What background jobs of earlier commands wrote since the last result."""
        notes = []
        for key, sink in list(self._background.items()):
            new = sink.capture.total_bytes - sink.reported
            if new > 0:
                capture = sink.capture
                where = (
                    f"saved in {capture.full_output_path}"
                    if capture.full_output_path is not None
                    else "dropped"
                    if capture.truncated
                    else "it follows:\n" + capture.text().rstrip("\n")
                )
                if capture.dropped:
                    where += f" ({capture.dropped} bytes past the per-command cap dropped)"
                notes.append(
                    f"[background jobs of command {sink.seq} wrote {new} bytes to "
                    f"{sink.stream} since; not part of this command's output; {where}]"
                )
                sink.reported = capture.total_bytes
            if sink.fd < 0:
                del self._background[key]
        return "".join(f"\n{note}\n" for note in notes)

    def _close_all_command_fifos(self) -> None:
        run = self._run
        if run is not None:
            for stream in ("stdout", "stderr"):
                fd = run.out_fd if stream == "stdout" else run.err_fd
                if fd >= 0:
                    self._drain(run, fd, stream)
                    self._close_command_fd(run, stream)
        for sink in list(self._background.values()):
            if sink.fd >= 0:
                self._close_background(sink)
        self._background.clear()

    def _on_pty(self) -> None:
        run = self._run
        if run is None:
            self._read_idle(self._fd, self._idle_out)
            return
        if self._pump_pty(run) and run.marker is not None and run.confirm is None:
            self._settle(run)

    def _pump_pty(self, run: _Run) -> bool:
        """Read what the PTY holds (at most 16 chunks); False once the run is over."""
        for _ in range(16):
            if run.done.done() or self._run is not run or self._fd < 0:
                return False
            try:
                data = os.read(self._fd, READ_SIZE)
            except BlockingIOError:
                return True
            except OSError as exc:
                if exc.errno != errno.EIO:
                    log.warning("reading the shell failed: %s", exc)
                data = b""
            if not data:
                self._on_exit()
                return False
            self._on_stdout_bytes(run, data)
        return not run.done.done()

    # ------------------------------------------------------------ framing

    def _settle(self, run: _Run) -> None:
        """A marker for `run` arrived: accept it once bash is back at its prompt. bash
        gets there microseconds after printing it, so spin briefly, then poll."""
        until = time.monotonic() + SETTLE_SPIN_S
        while not self._accept(run):
            if time.monotonic() >= until:
                run.confirm = asyncio.get_running_loop().create_task(self._confirm(run))
                return

    async def _confirm(self, run: _Run) -> None:
        started = time.monotonic()
        delay = 0.001
        while not run.done.done() and self._run is run:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
            if self._accept(run):
                return
            if time.monotonic() - started >= MARKER_GRACE_S:
                self._violate(
                    run, "a completion marker was printed while the command was still running"
                )
                return

    def _accept(self, run: _Run) -> bool:
        """Finish `run` with its last marker if bash waits at its prompt; True when over.
        A real marker is printed right before bash reads: the PTY is read to its end
        first (a forged marker earlier in the output is superseded by the real one)."""
        if run.done.done():
            return True
        if self._run is not run or not self._at_prompt():
            return False
        if not self._pump_pty(run):
            return run.done.done()
        if run.marker is None or self._input_pending() or not self._at_prompt():
            return False
        code, claimed = run.marker
        self._cwd = self._bash_cwd(claimed)
        run.done.set_result(code)
        return True

    def _silent_check(self, run: _Run) -> None:
        """bash idle at its prompt with no marker for the running command (the command
        disabled the prompt hook, e.g. `readonly PS1`, or an `extdebug` DEBUG trap):
        on the second check in a row the shell is replaced."""
        if run.done.done() or self._run is not run:
            return
        if run.marker is None and self._at_prompt(strict=True):
            self._pump_pty(run)
            if run.done.done() or self._run is not run:
                return
            if run.marker is not None and run.confirm is None:
                # This read took the marker `_on_pty` would have seen (the command ended
                # right now): settle it here, or nothing will (the PTY is drained).
                self._settle(run)
                return
            if run.marker is None and not self._input_pending() and self._at_prompt(strict=True):
                run.silent += 1
                if run.silent >= 2:
                    self._violate(run, "the shell returned to its prompt without its marker")
                    return
            else:
                run.silent = 0
        else:
            run.silent = 0
        run.watch = asyncio.get_running_loop().call_later(SILENT_CHECK_S, self._silent_check, run)

    def _violate(self, run: _Run, why: str) -> None:
        """The framing cannot be trusted: kill the command and bash (`_run_locked`
        starts a fresh shell in bash's directory)."""
        if run.done.done():
            return
        log.warning("shell protocol violation in command %d: %s", run.seq, why)
        run.violation = why
        self._cwd = self._bash_cwd(None)
        if self.pid is not None:  # first, or it runs on (`wait; echo` once a job dies)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self._kill_groups(run)
        self._kill_command_tree(run)
        for fd, stream in ((run.out_fd, "stdout"), (run.err_fd, "stderr")):
            self._drain(run, fd, stream)  # what it wrote before it was killed
        self._terminate()

    def _at_prompt(self, *, strict: bool = False) -> bool:
        """bash waits for input at its prompt: the terminal's foreground group is its
        own, it sleeps, and (where /proc/PID/syscall is readable) in the very read it
        was seen in at its first prompt. What cannot be checked here (no /proc, no
        bash pid) counts as yes, unless `strict` (the silent-prompt check, which must
        never take a `wait` builtin for a prompt)."""
        pid = self.pid
        pgrp = self._foreground_pgrp()
        if pid is None or pgrp is None:
            return not strict
        if pgrp != pid:
            return False
        stat = _read_proc(f"/proc/{pid}/stat")
        if stat is None:
            return not strict
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"S":
            return False
        syscall = _read_proc(f"/proc/{pid}/syscall") if self._prompt_sig else None
        if syscall is None:
            return not strict
        return tuple(syscall.decode().split()[:4]) == self._prompt_sig

    def _input_pending(self) -> bool:
        """Complete lines wait in the terminal's input (our command line, unread)."""
        fd = self._open_slave()
        if fd < 0:
            return False
        try:
            count = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
            return int.from_bytes(count, "little") > 0
        except OSError:
            return False
        finally:
            os.close(fd)

    def _open_slave(self) -> int:
        if not self._slave or not self.alive:
            return -1
        try:
            return os.open(self._slave, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return -1

    def _prepare_terminal(self) -> None:
        """Before each command: the terminal modes bash started with (a command's
        `stty echo` would echo our command line into the output) and no pending input
        (text a command pushed with TIOCSTI would prefix our command line)."""
        if self._tty_attrs is not None and self._fd >= 0:
            with contextlib.suppress(termios.error, OSError):
                if termios.tcgetattr(self._fd) != self._tty_attrs:
                    termios.tcsetattr(self._fd, termios.TCSANOW, self._tty_attrs)
        fd = self._open_slave()
        if fd >= 0:
            with contextlib.suppress(termios.error, OSError):
                termios.tcflush(fd, termios.TCIFLUSH)
            os.close(fd)

    async def _learn_terminal(self) -> None:
        """After a fresh bash answered: its PTY slave, terminal modes, and the read
        it waits in at its prompt (no command has run yet, so this one is genuine)."""
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(OSError):
            self._slave = str(Path(f"/proc/{pid}/fd/0").readlink())
        if not self._slave.startswith("/dev/"):
            self._slave = ""
        with contextlib.suppress(termios.error, OSError):
            self._tty_attrs = termios.tcgetattr(self._fd)
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            if self._at_prompt():
                syscall = _read_proc(f"/proc/{pid}/syscall")
                if syscall is None:
                    return  # not readable here: the weaker check stays
                fields = tuple(syscall.decode().split()[:4])
                if len(fields) == 4 and fields[0].isdigit() and fields[1] == "0x0":
                    self._prompt_sig = fields
                    return
            await asyncio.sleep(0.001)

    def _bash_cwd(self, claimed: bytes | None) -> Path:
        """bash's real working directory (`/proc/PID/cwd`). The marker's `$PWD` is
        only a spelling of it (it keeps symlinks) and is used when it names the same
        directory, or when /proc cannot be read."""
        link = Path(f"/proc/{self.pid}/cwd")
        try:
            real = str(link.readlink()) if self.pid is not None else None
        except OSError:
            real = None
        if claimed is not None:
            path = Path(os.fsdecode(claimed))
            if real is None:
                return path if path.is_absolute() else self._cwd
            with contextlib.suppress(OSError):
                if path.is_absolute() and path.samefile(link):
                    return path
        if real is None:
            return self._cwd
        deleted = " (deleted)"
        if real.endswith(deleted) and not Path(real).exists():
            real = real[: -len(deleted)]
        return self._host_path(Path(real), link)

    def _host_path(self, path: Path, link: Path) -> Path:
        """A sandboxed bash's `/tmp/...` is under `private_tmp` on the host (/proc
        spells bash's cwd as seen inside); every other bind keeps its path."""
        tmp = self.private_tmp
        if tmp is None or not (path == Path("/tmp") or path.is_relative_to("/tmp")):  # noqa: S108
            return path
        with contextlib.suppress(OSError):
            if path.samefile(link):
                return path
        return tmp / path.relative_to("/tmp")  # noqa: S108

    def _on_stdout_bytes(self, run: _Run, data: bytes) -> None:
        start = b"\x1e" + self._nonce.encode() + b":"
        end = b"\x1f" + self._nonce.encode()
        buf = run.pending
        buf += data
        while True:
            at = buf.find(start)
            if at < 0:
                # Hold back only a possible beginning of the marker.
                keep = buf.rfind(b"\x1e", max(0, len(buf) - len(start) + 1))
                cut = keep if keep >= 0 and start.startswith(bytes(buf[keep:])) else len(buf)
                self._stdout(run, bytes(buf[:cut]))
                del buf[:cut]
                return
            close = buf.find(end, at)
            if close < 0:
                self._stdout(run, bytes(buf[:at]))
                del buf[:at]
                return
            at = buf.rfind(start, at, close)  # a torn marker before it is output
            fields = bytes(buf[at + len(start) : close]).split(b":", 2)
            before = bytes(buf[:at])
            del buf[: close + len(end)]
            if len(fields) == 3 and fields[0] == str(run.seq).encode():
                # A candidate: it counts once bash is seen at its prompt (`_settle`);
                # a later one replaces it. What follows is still this command's output.
                self._stdout(run, before)
                try:
                    code = int(fields[1])
                except ValueError:
                    code = 1
                run.marker = (code, fields[2])
                continue
            # A stale marker (a previous prompt, or a cancelled command): drop its output.

    def _stdout(self, run: _Run, data: bytes) -> None:
        if data:
            run.stdout.feed(data)
            self._emit(run, "stdout", run.out_decoder.decode(data))

    def _on_exit(self) -> None:
        """bash exited (`exit`, `exec`, killed): finish the command with its status."""
        run = self._run
        proc = self._proc
        if proc is None or run is None or run.done.done():
            if self._pidfd >= 0:
                self._pause(self._pidfd)
            return
        # Read what is left on the PTY before it goes.
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                while chunk := os.read(self._fd, READ_SIZE):
                    self._on_stdout_bytes(run, chunk)
                    if run.done.done():
                        return
        if proc.isalive():
            if self._pidfd >= 0:
                # The PTY closed but the process lives on (`exec prog` with no terminal
                # fd): stop watching the PTY, whose EOF stays readable and would spin
                # the loop, and wait idle for the pidfd.
                self._pause(self._fd)
                return
            # No pidfd: give it a moment to be reaped.
            time.sleep(0.01)
        status = _exit_status(proc)
        self._drain(run, self._out_r, "stdout")
        self._drain(run, self._err_r, "stderr")
        run.shell_exit = status
        run.done.set_result(status)
        self._terminate()


def _raw_output() -> None:
    """In the child, before bash starts (so bash saves these as the terminal's state):
    bytes out exactly as written (no \\n -> \\r\\n), no echo of what we send. Python
    ignores SIGPIPE and SIGXFSZ; children must not inherit that (`yes | head` would
    complain of a broken pipe)."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    attrs = termios.tcgetattr(0)
    attrs[1] &= ~termios.OPOST
    attrs[3] &= ~(termios.ECHO | termios.ECHONL)
    termios.tcsetattr(0, termios.TCSANOW, attrs)


def _prompt_command(nonce: str) -> str:
    """bash's prompt hook: it resets what a command could have changed to break the
    framing, then prints the marker. No word in it can be shadowed: every command word
    is quoted (aliases do not apply) and runs while POSIX mode is on (`POSIXLY_CORRECT=`
    is an assignment), where special builtins (`unset`, `exec`) are found before
    functions; `unset -f builtin .` then makes `\\builtin X` and the next command line's
    `\\.` safe. POSIX mode and the shell options it changes are restored."""
    save = "".join(
        f"__syn_s{i}=${{__syn_o/*:{name}:*/-s}};__syn_s{i}=${{__syn_s{i}/#:*/-u}};"
        for i, name in enumerate(_POSIX_SHOPTS)
    )
    restore = "".join(
        f'\\builtin shopt "$__syn_s{i}" {name};' for i, name in enumerate(_POSIX_SHOPTS)
    )
    return (
        "__syn_rc=$?;__syn_o=:$BASHOPTS:;"
        "__syn_u=${POSIXLY_CORRECT+__syn_u};__syn_u=${__syn_u:-POSIXLY_CORRECT};"
        + save
        + "POSIXLY_CORRECT=y;\\unset -f builtin . source;"
        "\\builtin enable . builtin enable exec printf shopt trap unset;"
        "\\builtin trap - INT DEBUG;\\exec 2>/dev/null;"
        "PS0=;PS1=;PS2=;PS4='+ ';"
        '\\unset "$__syn_u";'
        + restore
        + f"\\builtin printf '\\036%s:%s:%s:%s\\037%s' {nonce} \"${{__syn_seq-}}\" "
        f'"$__syn_rc" "$PWD" {nonce}'
    )


async def _read_child_pid(fd: int, timeout: float) -> int | None:
    """bwrap's `--info-fd` JSON (`{"child-pid": N, ...}`): the sandboxed bash's pid,
    or None when bwrap failed before writing it (its message is on the PTY)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    os.set_blocking(fd, False)
    data = bytearray()
    while b"}" not in data:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _set_once, ready)
            try:
                await asyncio.wait({ready}, timeout=max(0.0, deadline - loop.time()))
            finally:
                loop.remove_reader(fd)
            if not ready.done():
                return None
            continue
        except OSError:
            return None
        if not chunk:
            break
        data += chunk
    try:
        pid = json.loads(bytes(data))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _program(pid: int) -> str | None:
    """The program file a process runs (it changes at an exec only, not when a program
    renames itself), or None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/exe")  # noqa: PTH115 - per poll; str is enough
    except OSError:
        return None


def _read_proc(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _reap(proc: PtyProcess) -> None:
    """Collect bash's exit status (it was just SIGKILLed) without blocking for long."""
    for _ in range(50):
        with contextlib.suppress(Exception):
            if not proc.isalive():
                return
        time.sleep(0.001)


def _exit_status(proc: PtyProcess) -> int:
    with contextlib.suppress(Exception):
        proc.isalive()
    if proc.exitstatus is not None:
        return int(proc.exitstatus)
    if proc.signalstatus is not None:
        return 128 + int(proc.signalstatus)
    return -1


def _session_groups(sid: int) -> set[int]:
    """Process groups of every process in session `sid` (bash is its session leader).
    Linux /proc; elsewhere just bash's own group."""
    groups = {sid}
    for info in proctree.scan().values():
        if info.session == sid:
            groups.add(info.pgrp)
    return groups


def _private_dir() -> Path:
    """A 0700 directory for the command file and the stderr FIFO, on tmpfs when there is one."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or None  # unset: not the default dir
    for base in (runtime, "/dev/shm", None) if runtime else ("/dev/shm", None):
        if base is not None and not os.access(base, os.W_OK | os.X_OK):
            continue
        with contextlib.suppress(OSError):
            return Path(tempfile.mkdtemp(prefix="synapse-shell-", dir=base))
    raise ShellError("cannot create a private temporary directory")
