"""The persistent shell session: one long-lived bash on a pseudo-terminal.

Each command is written to a file and sourced (`. FILE </dev/null`), so multi-line
text, heredocs and syntax errors need no quoting and cannot eat the protocol's
input. Completion is seen when bash's `PROMPT_COMMAND` prints a line carrying a
per-session random nonce, the command's sequence number, `$?` and `$PWD` — the
prompt is printed even after Ctrl-C, unlike a marker appended to the command.
bash sits on the PTY (job control: each command is a process group we can signal);
the command's stdout and stderr go to two FIFOs read concurrently, because a PTY
moves bulk output 50x slower than a pipe here. The measurements and the reasons:
docs/shell.md.

`ShellSession` is the public API; the parts: `spawn` (starting bash, with `sandbox`),
`bash` (one bash and the command running in it), `framing` (the marker protocol),
`streams` (FIFOs, background output), `terminal` (the PTY), `groups` and `procs`
(process groups and the session's process tree).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from synapse_lsp.commands import OutputSink
from synapse_lsp.config import MIN_TIMEOUT_S, Settings, SettingsSource, as_source
from synapse_lsp.errors import ShellError
from synapse_lsp.shell import sandbox, spawn
from synapse_lsp.shell.bash import Bash
from synapse_lsp.shell.command import ShellResult, result_of
from synapse_lsp.shell.sandbox import HOST_VIEW, PathView, SandboxStatus
from synapse_lsp.shell.spawn import START_TIMEOUT_S, ShellFiles, WrapperDir
from synapse_lsp.shell.streams import Readers, Streams
from synapse_lsp.shell.terminal import Terminal

log = logging.getLogger(__name__)


class ShellSession:
    """A bash kept alive between commands: cwd, exported variables and functions persist.

    `run` calls are serialized. Cancelling the task awaiting `run` interrupts the
    command (SIGINT, then SIGKILL of its process group) and keeps the session.

    Unless `settings.sandbox` is full-access, bash runs inside bubblewrap
    (`synapse_lsp.shell.sandbox`) where it works: `writable` (default: `cwd`, the
    workspace root) are the only writable roots in workspace-write mode, `/tmp` is the
    session's own (`private_tmp` on the host). The mode is read when a bash starts.
    `wrappers`: the extension registry's own wrappers and socket (none:
    `$SYNAPSE_HOME/bin` only).
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
        self._view: tuple[tuple[object, ...], PathView] | None = None  # `view`, and its inputs
        self._new_git: set[Path] = set()
        self._extra_env = dict(env or {})
        self._lock = asyncio.Lock()
        self._bash: Bash | None = None  # the current (or last) bash
        self._closed = False
        self._escalations: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ properties

    @property
    def cwd(self) -> Path:
        """The shell's current directory after the last command."""
        return self._cwd

    @property
    def pid(self) -> int | None:
        """bash's pid (its parent is the session's supervisor, `supervisor_pid`, or,
        sandboxed, bubblewrap below the supervisor)."""
        return None if self._bash is None else self._bash.term.pid

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
        files = self._bash.files.dir if self._bash is not None else None
        key = (tmp, self.settings.synapse_home, files, *self._writable)
        if self._view is not None and self._view[0] == key:
            return self._view[1]  # asked several times a command (the gate, built-ins)
        own = [*self._writable, self.settings.synapse_home]
        own += [Path(p) for p in sandbox.own_install_under_tmp()]
        if files is not None:
            own.append(files)
        view = PathView(tmp, tuple(own))
        self._view = (key, view)
        return view

    @property
    def supervisor_pid(self) -> int | None:
        """The session leader on the PTY: bash's parent and the subreaper of whatever
        the commands start (see `procs`)."""
        return None if self._bash is None else self._bash.term.supervisor_pid

    @property
    def alive(self) -> bool:
        return self._bash is not None and self._bash.term.alive

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    @property
    def settings(self) -> Settings:
        """The live settings (read at use: a changed limit reaches the next command)."""
        return self._settings()

    # -------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start bash (idempotent while alive). A closed session starts none: ShellError."""
        async with self._lock:
            if not self.alive:
                await self._spawn()

    async def restart(self) -> None:
        """A fresh bash in the initial directory with a fresh environment. A command
        still running is ended (its result says so)."""
        if self._bash is not None and self._bash.run is not None:
            self._terminate()
        async with self._lock:
            self._terminate()
            self._cwd = self._initial_cwd
            await self._spawn()

    async def close(self) -> None:
        """Kill bash and every process of its session; idempotent."""
        self._closed = True
        for task in list(self._escalations):
            task.cancel()
        if self._bash is not None:
            await self._bash.close()
        if self._private_tmp is not None and self._owns_tmp:
            shutil.rmtree(self._private_tmp, ignore_errors=True)
            self._private_tmp = None

    def interrupt(self) -> None:
        """Ctrl-C for the running command; it ends with exit code 130 and `cancelled`.
        A command that ignores SIGINT is killed after a grace period."""
        bash = self._bash
        run = None if bash is None else bash.interrupt()
        if bash is None or run is None:
            return
        task = asyncio.get_running_loop().create_task(bash.stop(run, interrupted=True))
        self._escalations.add(task)
        task.add_done_callback(self._escalations.discard)

    def kill(self) -> None:
        """SIGKILL the running command's process group now; the session stays."""
        if self._bash is not None:
            self._bash.kill()

    def forward_input(self, data: bytes) -> bool:
        """Keystrokes for the running command, from a face that lends it its terminal
        (`synapse chat`'s `!`, whose command reads `/dev/tty`). Written to the PTY only
        while a command's process group is in the terminal's foreground — never while
        bash itself reads there, where they would become a command line. False when not
        written (the caller may hold them and try again)."""
        bash = self._bash
        if bash is None or bash.run is None or bash.run.done.done() or bash.term.fd < 0:
            return False
        return bash.term.forward_input(data)

    def set_window_size(self, rows: int, cols: int) -> tuple[int, int] | None:
        """Resize the session's terminal (the foreground command gets SIGWINCH); the
        previous (rows, cols), or None without a terminal."""
        return None if self._bash is None else self._bash.term.set_window_size(rows, cols)

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
            alive = self.alive
            if alive and self._new_git:
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
            elif (
                alive
                and (changed := spawn.sandbox_change(self._sandbox, self.settings)) is not None
            ):
                # The mode or network setting changed (an editor setting, ACP's
                # session/set_mode): bwrap's mounts are fixed at start, so a fresh
                # bash in the same directory; its exports are gone, and it says so.
                self._terminate()
                await self._spawn()
                note = (
                    f"[the sandbox is now {changed.describe()}: a fresh shell started in "
                    f"{self._cwd}; exported variables and functions were reset]\n"
                )
            elif not alive:
                self._terminate()
                await self._spawn()
            result = await self._run_locked(command, wait_for, on_output)
            result.stderr = note + result.stderr + self._look_for_new_git(command)
            return result

    def _look_for_new_git(self, command: str) -> str:
        """After a command that may have made a repository: its git folder is protected
        from the next command on (`_new_git`), and what in it would make the user's
        next `git status` there run a program is said now."""
        new = spawn.new_repositories(self._sandbox, command, self._writable, self._nested_git)
        if not new:
            return ""
        self._new_git = new
        return spawn.new_git_warning(new)

    async def _run_locked(
        self, command: str, timeout: float | None, on_output: OutputSink | None
    ) -> ShellResult:
        bash = self._bash
        assert bash is not None
        started = time.perf_counter()
        run = bash.new_run(self.settings, on_output)
        timed_out = await bash.execute(run, command, timeout)
        if run.violation is not None and not self._closed:
            try:  # the notice promises a fresh shell in the command's directory
                await self._spawn()
            except ShellError as exc:
                log.warning("no fresh shell after a protocol violation: %s", exc)
        current = self._bash
        return result_of(
            run,
            started,
            timed_out,
            cmd_path=current.files.cmd_path if current is not None else "",
            cwd=self._cwd,
            notice=current.streams.notice() if current is not None else "",
        )

    # ---------------------------------------------------------- spawn / kill

    def starting_environment(self) -> dict[str, str]:
        """The environment a fresh bash of this session starts with (no secrets)."""
        return self._environment("" if self._bash is None else self._bash.nonce)

    def _environment(self, nonce: str) -> dict[str, str]:
        base = {**os.environ, **self._extra_env}
        return spawn.environment(base, self.settings, self.wrappers, nonce)

    async def _spawn(self) -> None:
        if self._closed:  # its owner closed it for good (a face's exit): no bash after
            raise ShellError("the shell session is closed")
        nonce = secrets.token_hex(8)
        files = ShellFiles()
        readers = Readers()
        streams = Streams(self._settings, readers)
        assert files.dir is not None
        fifo = streams.open(files.dir)
        cwd = self._cwd if self._cwd.is_dir() else self._initial_cwd
        argv = [shutil.which("bash") or "/bin/bash", "--norc", "--noprofile", "--noediting", "-i"]
        env = self._environment(nonce)
        status = sandbox.status(self.settings)
        self._sandbox = status

        def confine(info_fd: int, seccomp: int) -> list[str]:
            return self._confine(status, files, info_fd, cwd, seccomp)

        def cleanup() -> None:
            streams.close(None)
            files.close()

        launched = spawn.launch(
            argv,
            cwd=cwd,
            env=env,
            confine=confine if status.sandboxed else None,
            cleanup=cleanup,
        )
        term = Terminal(launched.proc, launched.bash_pid, keep_slave=launched.pidfd >= 0)
        self._bash = bash = Bash(
            term,
            files=files,
            streams=streams,
            readers=readers,
            nonce=nonce,
            pidfd=launched.pidfd,
            parent_w=launched.parent_w,
            cwd=self._cwd,
            private_tmp=self.private_tmp,
            moved=self._moved,
            settings=self._settings,
        )
        try:
            if launched.info_r >= 0:
                # The reported pid is bwrap's; bash is the sandboxed child it names.
                # (Awaited once `_bash` is set: a cancel here leaves nothing `close()`
                # cannot end.)
                term.bash_pid = None
                try:
                    term.bash_pid = await spawn.read_child_pid(launched.info_r, START_TIMEOUT_S)
                finally:
                    os.close(launched.info_r)
            await bash.handshake(fifo, self.settings)
            await term.learn()
        except BaseException:
            # Cancelled (or failed) half way: a bash whose framing never started would
            # take the next command and lose its output (exit 141); the next one starts
            # a fresh bash instead.
            self._terminate()
            raise
        log.debug("shell %s started in %s", launched.proc.pid, cwd)

    def _moved(self, cwd: Path) -> None:
        self._cwd = cwd

    def _confine(
        self, status: SandboxStatus, files: ShellFiles, info_fd: int, cwd: Path, seccomp: int
    ) -> list[str]:
        """bwrap's part of the command line (`sandbox.bwrap_argv`); the private /tmp is
        made once per session and kept across fresh shells until `close()`. bash starts
        in `cwd` as the sandbox spells it (`/tmp/x` for a host `<private_tmp>/x`)."""
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
            private_dir=files.dir,
            private_tmp=self._private_tmp,
            synapse_home=self.settings.synapse_home,
            info_fd=info_fd,
            extension_dirs=self.wrappers.visible if self.wrappers is not None else (),
            chdir=PathView(self._private_tmp).seen(cwd),
            seccomp=seccomp,
        )

    def _terminate(self) -> None:
        """Kill bash and everything in its session; finish a command in flight."""
        if self._bash is not None:
            self._bash.terminate()
