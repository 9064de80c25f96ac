"""bash's pseudo-terminal (ptyprocess), seen from the master side.

bash sits on the PTY for job control: each command is a process group, the one in
the terminal's foreground is what Ctrl-C and a timeout signal (`groups.py`). Only
markers and what a command writes to `/dev/tty` come through it; the commands'
stdout and stderr go to FIFOs (`streams.py`): a PTY moves bulk output 50x slower.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp.errors import ShellError

READ_SIZE = 1 << 16
T = TypeVar("T")


class Terminal:
    """bash on its PTY: the master's `fd` we read and write, bash's pid and the
    supervisor's (`procs`), and what bash looks like at its prompt. Learnt from each
    fresh bash (`learn`): its PTY slave, terminal modes and the read it waits in at its
    prompt (`/proc/PID/syscall`: number, fd, buffer, size). `proc` is None (and `fd`
    -1) once bash is ended."""

    def __init__(self, proc: PtyProcess, bash_pid: int | None, *, keep_slave: bool = False) -> None:
        self.proc: PtyProcess | None = proc
        self.bash_pid = bash_pid  # bash runs under a supervisor (`procs`)
        self.fd = int(proc.fd)
        os.set_blocking(self.fd, False)
        fcntl.fcntl(self.fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        self.slave = ""
        self.tty_attrs: list[Any] | None = None
        self._prompt_sig: tuple[str, ...] | None = None
        self._prompt_prefix = b""  # `prompt_sig` as /proc/PID/syscall begins with it
        self._proc_fds: dict[str, int] = {}
        # The slave, opened once and kept while bash lives (two opens a command spared)
        # where bash's end is seen on its pidfd: held open here, the slave would keep
        # the master from reading end of file when bash is gone.
        self._keep_slave = keep_slave
        self._slave_fd = -1

    @property
    def prompt_sig(self) -> tuple[str, ...] | None:
        """The read bash waits in at its prompt: /proc/PID/syscall's first four fields."""
        return self._prompt_sig

    @prompt_sig.setter
    def prompt_sig(self, fields: tuple[str, ...] | None) -> None:
        self._prompt_sig = fields
        self._prompt_prefix = " ".join(fields).encode() + b" " if fields else b""

    @property
    def pid(self) -> int | None:
        """bash's pid (None once ended)."""
        return None if self.proc is None else self.bash_pid

    @property
    def supervisor_pid(self) -> int | None:
        """The session leader on the PTY: bash's parent and the subreaper of whatever
        the commands start (see `procs`)."""
        return None if self.proc is None else int(self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc is not None and bool(self.proc.isalive())

    def send(self, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        while data:
            try:
                written = os.write(self.fd, data)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError as exc:
                raise ShellError(f"cannot write to the shell: {exc}") from exc
            data = data[written:]

    def foreground_pgrp(self) -> int | None:
        if self.fd < 0:
            return None
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def forward_input(self, data: bytes) -> bool:
        """Keystrokes written only while a command's process group, not bash, has the
        terminal (bash reading there would take them for a command line)."""
        pgrp = self.foreground_pgrp()
        if pgrp is None or pgrp in (self.pid, self.supervisor_pid):
            return False
        try:
            os.write(self.fd, data)
        except OSError:
            return False
        return True

    def set_window_size(self, rows: int, cols: int) -> tuple[int, int] | None:
        proc = self.proc
        if proc is None:
            return None
        try:
            previous: tuple[int, int] = tuple(proc.getwinsize())  # type: ignore[assignment]
            proc.setwinsize(rows, cols)
        except OSError:
            return None
        return previous

    # ------------------------------------------------------- bash at its prompt

    def at_prompt(self, *, strict: bool = False) -> bool:
        """bash waits for input at its prompt: the terminal's foreground group is its
        own, and it is off the CPU in the very read it was seen in at its first prompt
        (/proc/PID/syscall: the kernel shows a task's call only while it is not
        running), or, where that file cannot be read, it sleeps. What cannot be checked
        here (no /proc, no bash pid) counts as yes, unless `strict` (the silent-prompt
        check, which must never take a `wait` builtin for a prompt)."""
        pid = self.pid
        pgrp = self.foreground_pgrp()
        if pid is None or pgrp is None:
            return not strict
        if pgrp != pid:
            return False
        if self._prompt_prefix:
            syscall = self._read_proc("syscall")
            if syscall is not None:  # one read per look (the state's was a second)
                return syscall.startswith(self._prompt_prefix)
        stat = self._read_proc("stat")
        if stat is None:
            return not strict
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"S":
            return False
        return not strict

    def _read_proc(self, name: str) -> bytes | None:
        """bash's `/proc/PID/<name>`, read through a descriptor kept while this bash
        lives (`release`): it names this very process (a read fails once it is gone,
        its pid reused or not) and spares an open and a close at each look."""
        fd = self._proc_fds.get(name)
        if fd is None:
            if self.pid is None:
                return None
            try:
                fd = os.open(f"/proc/{self.pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            self._proc_fds[name] = fd
        try:
            return os.pread(fd, 4096, 0)
        except OSError:
            del self._proc_fds[name]
            os.close(fd)
            return None

    def release(self) -> None:
        """bash has ended: the descriptors `_read_proc` and `_on_slave` kept are closed."""
        for fd in self._proc_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._proc_fds.clear()
        fd, self._slave_fd = self._slave_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def input_pending(self) -> bool:
        """Complete lines wait in the terminal's input (our command line, unread)."""
        count = self._on_slave(lambda fd: fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))
        return count is not None and int.from_bytes(count, "little") > 0

    def _on_slave(self, op: Callable[[int], T]) -> T | None:
        """`op` on the slave (None: it cannot be opened, or `op` failed). While we hold
        the master (`fd`), its slave's name is this PTY's, bash alive or not: a PTY's
        number is given out again only once its master is closed."""
        if not self.slave or self.proc is None or self.fd < 0:
            return None
        fd = self._slave_fd
        if fd < 0:
            try:
                fd = os.open(self.slave, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return None
            if self._keep_slave:
                self._slave_fd = fd
        try:
            return op(fd)
        except (termios.error, OSError):
            if fd == self._slave_fd:
                self._slave_fd = -1  # hung up, say: the next look opens it afresh
            return None
        finally:
            if fd != self._slave_fd:
                os.close(fd)

    def prepare(self) -> None:
        """Before each command: the terminal modes bash started with (a command's
        `stty echo` would echo our command line into the output) and no pending input
        (text a command pushed with TIOCSTI would prefix our command line)."""
        if self.tty_attrs is not None and self.fd >= 0:
            with contextlib.suppress(termios.error, OSError):
                if termios.tcgetattr(self.fd) != self.tty_attrs:
                    termios.tcsetattr(self.fd, termios.TCSANOW, self.tty_attrs)
        self._on_slave(lambda fd: termios.tcflush(fd, termios.TCIFLUSH))

    async def learn(self) -> None:
        """After a fresh bash answered: its PTY slave, terminal modes, and the read
        it waits in at its prompt (no command has run yet, so this one is genuine)."""
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(OSError):
            self.slave = str(Path(f"/proc/{pid}/fd/0").readlink())
        if not self.slave.startswith("/dev/"):
            self.slave = ""
        with contextlib.suppress(termios.error, OSError):
            self.tty_attrs = termios.tcgetattr(self.fd)
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            if self.at_prompt():
                syscall = read_proc(f"/proc/{pid}/syscall")
                if syscall is None:
                    return  # not readable here: the weaker check stays
                fields = tuple(syscall.decode().split()[:4])
                if len(fields) == 4 and fields[0].isdigit() and fields[1] == "0x0":
                    self.prompt_sig = fields
                    return
            await asyncio.sleep(0.001)

    # ------------------------------------------------------------- bash's cwd

    def bash_cwd(self, claimed: bytes | None, known: Path, private_tmp: Path | None) -> Path:
        """bash's real working directory (`/proc/PID/cwd`). The marker's `$PWD`
        (`claimed`) is only a spelling of it (it keeps symlinks) and is used when it
        names the same directory, or when /proc cannot be read (then `known`, the
        last one, when it is not absolute)."""
        link = f"/proc/{self.pid}/cwd"
        try:
            real = os.readlink(link) if self.pid is not None else None  # noqa: PTH115
        except OSError:
            real = None
        if (
            claimed is not None
            and real is not None
            and os.fsencode(real) == claimed
            and (private_tmp is None or not (real == "/tmp" or real.startswith("/tmp/")))  # noqa: S108
        ):
            # The usual case, without a stat: $PWD is the very path /proc gives, which
            # is the host's too (the sandbox binds every path where it is, but /tmp).
            return known if str(known) == real else Path(real)
        if claimed is not None:
            path = Path(os.fsdecode(claimed))
            if real is None:
                return path if path.is_absolute() else known
            with contextlib.suppress(OSError):
                if path.is_absolute() and path.samefile(link):
                    return path
        if real is None:
            return known
        deleted = " (deleted)"
        if real.endswith(deleted) and not Path(real).exists():
            real = real[: -len(deleted)]
        return _host_path(Path(real), link, private_tmp)


def _host_path(path: Path, link: str, private_tmp: Path | None) -> Path:
    """A sandboxed bash's `/tmp/...` is under `private_tmp` on the host (/proc
    spells bash's cwd as seen inside); every other bind keeps its path."""
    if private_tmp is None or not (path == Path("/tmp") or path.is_relative_to("/tmp")):  # noqa: S108
        return path
    with contextlib.suppress(OSError):
        if path.samefile(link):
            return path
    return private_tmp / path.relative_to("/tmp")  # noqa: S108


def raw_output() -> None:
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


def read_proc(path: str) -> bytes | None:
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
