"""Process trees of a shell session: what a command started, and killing all of it
(formerly `synapse_lsp/proctree.py`, which stays importable as a shim).

bash does not run as our child. `supervised_preexec` (the PTY child's last step
before `exec bash`) forks once more: the child goes on to exec bash, the parent
execs a small interpreter running this file (`--supervise`): the *supervisor*,
a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`, allowed to any user).
Whatever the commands start — background jobs, double forks, `setsid`, `nohup`,
daemons — is then either a descendant of bash or, once orphaned,
re-parented to the supervisor instead of init, so the supervisor's descendants are
exactly the session's processes. The supervisor reaps those orphans (it has no
other children, so `waitpid(-1)` is safe there, unlike in the Synapse process), and
kills its whole tree when bash exits, on SIGTERM/SIGHUP (the PTY closing), or when
the Synapse process goes away by any means (a pipe whose write end only Synapse holds
reads end-of-file).

Sandboxed (`synapse_lsp.shell.sandbox`), the forked child execs bubblewrap instead, and
bwrap runs bash as its own child, in the same pid namespace (host pids everywhere):
the supervisor's direct child, the pid it waits for, is then bwrap, which exits with
bash's status; bash and everything it starts are still the supervisor's descendants.

This file imports nothing but the standard library: the supervisor runs it as a
script with `python -I -S`. Per command, the shell (`groups.py`) attributes
processes by start time (`/proc/PID/stat` field 22, clock ticks since boot): a
process is the command's if it started at or after the command's tick and its
nearest older ancestor is bash or the supervisor; older processes (background jobs
of earlier commands) and their children are spared.
When commands follow each other within two ticks, a pid snapshot settles it instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
KILL_ROUNDS = 200  # rounds of scan + SIGKILL; a fork bomb still ends (each round ~2 ms)


@dataclass(frozen=True)
class ProcInfo:
    ppid: int
    start: int  # clock ticks since boot
    zombie: bool
    pgrp: int = 0
    session: int = 0


def boot_ticks() -> int:
    """Now, in the unit of /proc/PID/stat's start time (ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK)


_LOADAVG: list[int] = []  # /proc/loadavg, kept open: read again at offset 0 per command


def last_pid() -> int | None:
    """The pid the kernel assigned last (/proc/loadavg), or None."""
    try:
        if not _LOADAVG:
            _LOADAVG.append(os.open("/proc/loadavg", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_LOADAVG[0], 256, 0).split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def scan(min_pid: int = 0) -> dict[int, ProcInfo]:
    """Every visible process (with a pid of at least `min_pid`): its parent, start tick
    and whether it is a zombie."""
    table: dict[int, ProcInfo] = {}
    try:
        names = os.listdir("/proc")  # noqa: PTH208 - a scan runs per kill round; Path is slower
    except OSError:
        return table
    for name in names:
        if not name.isdigit() or int(name) < min_pid:
            continue
        info = _info(name)
        if info is not None:
            table[int(name)] = info
    return table


def _info(pid: str) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:  # noqa: PTH123
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    zombie = fields[0] in (b"Z", b"X")
    return ProcInfo(int(fields[1]), int(fields[19]), zombie, int(fields[2]), int(fields[3]))


def subtree(root: int) -> dict[int, ProcInfo]:
    """`root` and its descendants, walked down `/proc/PID/task/TID/children`: a session's
    handful of processes, not every process of the machine (`scan`: hundreds on a
    desktop, ~2 ms a round here). Where the kernel has no such files
    (CONFIG_PROC_CHILDREN), the whole table."""
    if not HAS_CHILDREN:
        return scan()
    table: dict[int, ProcInfo] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        info = None if pid in table else _info(str(pid))
        if info is None:
            continue
        table[pid] = info
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):  # noqa: PTH208
                todo += _children(f"/proc/{pid}/task/{tid}/children")
    return table


def _children(path: str) -> list[int]:
    try:
        with open(path, "rb") as f:  # noqa: PTH123
            return [int(child) for child in f.read().split()]
    except OSError:
        return []


HAS_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")  # noqa: PTH110


def descendants(root: int, table: dict[int, ProcInfo]) -> set[int]:
    """Every process below `root` in `table` (not `root` itself)."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def command_processes(
    table: dict[int, ProcInfo],
    roots: Iterable[int],
    since: int,
    *,
    after_pid: int | None = None,
) -> set[int]:
    """The processes a command started: new ones (a start tick after `since`, the
    command's; in that very tick, a pid above `after_pid`, the last pid given out
    before it started) whose nearest older ancestor is one of `roots` (bash, the
    supervisor). Pids alone would mislead after a wrap; ticks alone within a tick."""
    root_set = set(roots)
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)

    def new(pid: int) -> bool:
        start = table[pid].start
        if after_pid is not None and start == since:
            # Started in the command's first tick, like what an earlier command left
            # running there may have: the pid, above the mark or not, decides.
            return pid > after_pid
        return start >= since

    out: set[int] = set()
    todo = list(root_set)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child in out or child in root_set or not new(child):
                continue  # an older process: its subtree is an earlier command's
            out.add(child)
            todo.append(child)
    return out


def kill_all(
    find: Callable[[dict[int, ProcInfo]], set[int]],
    table_of: Callable[[], dict[int, ProcInfo]] = scan,
) -> int:
    """SIGKILL what `find(table_of())` returns, again and again, until it returns nothing
    alive (a process forking while we kill is caught in the next round). Returns the
    count."""
    killed: set[int] = set()
    for pause in kill_rounds(find, table_of, killed):
        time.sleep(pause)
    return len(killed)


def kill_rounds(
    find: Callable[[dict[int, ProcInfo]], set[int]],
    table_of: Callable[[], dict[int, ProcInfo]],
    killed: set[int],
) -> Iterator[float]:
    """`kill_all`'s rounds, each yielding the seconds to wait before the next (an event
    loop awaits them instead of sleeping); `killed` gathers what was killed."""
    for rounds in range(KILL_ROUNDS):
        table = table_of()
        alive = {pid for pid in find(table) if pid in table and not table[pid].zombie}
        if not alive:
            return
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        killed |= alive
        # What was just killed is mostly gone within half a millisecond: look again
        # then, and back off to 2 ms while some still go (a fork bomb's rounds).
        yield min(0.002, 0.0005 * 2**rounds)


# ------------------------------------------------------------- the supervisor


def set_subreaper() -> bool:
    """Make this process a child subreaper (Linux >= 3.4; no privilege needed)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # the supervisor kills its tree and exits


def supervised_preexec(parent_fd: int, report_fd: int) -> None:
    """Run in the PTY child just before `exec bash` (or `exec bwrap`). Forks: the child
    returns (and execs, reporting its pid on `report_fd`); this process becomes the session's
    supervisor and never returns. `parent_fd` is the read end of a pipe whose write
    end only the Synapse process holds: end-of-file there means Synapse is gone."""
    set_subreaper()
    pid = os.fork()
    if pid == 0:
        os.write(report_fd, struct.pack("i", os.getpid()))
        os.close(report_fd)
        os.close(parent_fd)
        return
    os.close(report_fd)
    try:
        _exec_supervisor(pid, parent_fd)  # returns only if the exec failed
        _supervise(pid, parent_fd)
    finally:
        os._exit(1)


def _exec_supervisor(bash: int, parent_fd: int) -> None:
    """Become a fresh, small interpreter running `_supervise` (this file as a script,
    `-I -S`: no site-packages, ~10 MB) instead of staying a fork of the Synapse
    process: a fork keeps the whole heap (the SDK's included) and, as the parent goes
    on writing to it, ends up holding a private copy (PSS 50 MB per shell measured).
    bash stays this process's child across the exec; the subreaper flag is kept too."""
    _quiet_fds(parent_fd)
    # Until `_supervise` has its handlers (an interpreter starting takes tens of ms,
    # more on a loaded machine), the signals that end a session stay pending rather
    # than kill the supervisor unhandled: Synapse SIGKILLed then hung up the PTY, and a
    # supervisor still starting died of SIGHUP, leaving bash's jobs running.
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    with contextlib.suppress(OSError):
        os.set_inheritable(parent_fd, True)
        script = os.path.abspath(__file__)  # noqa: PTH100 - a forked child: no pathlib
        # An empty environment: the supervisor needs none, and Synapse's own (the
        # model's key among it) would be readable in its /proc/PID/environ.
        os.execve(
            sys.executable,
            [sys.executable, "-I", "-S", script, "--supervise", str(bash), str(parent_fd)],
            {},
        )


def _quiet_fds(keep: int) -> None:
    """No terminal and no inherited descriptors but `keep`: bash alone holds the PTY,
    so its end (exit, exec) is still seen as the PTY's end of file."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for fd in range(3, 1024):
        if fd != keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _supervise(bash: int, parent_fd: int) -> None:
    me = os.getpid()
    set_subreaper()  # kept across exec; set again in case a kernel does not
    _quiet_fds(parent_fd)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    stop = [False]

    def on_stop(signum: int, frame: object) -> None:
        stop[0] = True

    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, on_stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # one pending is handled now
    status: int | None = None
    parent_gone = False
    while True:
        while True:  # reap everything that ended: bash, and orphans re-parented to us
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == bash:
                status = raw
        if status is not None or parent_gone or stop[0]:
            break
        try:
            ready, _, _ = select.select([parent_fd, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            with contextlib.suppress(OSError):
                while os.read(wake_r, 512):
                    pass
        if parent_fd in ready:
            with contextlib.suppress(OSError):
                if not os.read(parent_fd, 512):
                    parent_gone = True
    kill_all(lambda table: descendants(me, table))
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, raw = os.waitpid(-1, 0)
            if pid == bash:
                status = raw
    code = 128 + signal.SIGKILL
    if status is not None:
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            code = 128 - code
    os._exit(code & 0xFF)


if __name__ == "__main__" and sys.argv[1:2] == ["--supervise"]:  # see _exec_supervisor
    try:
        _supervise(int(sys.argv[2]), int(sys.argv[3]))
    finally:
        os._exit(1)


def start_ticks(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot, field 22 of /proc/PID/stat), None if
    unknown: with the pid, it names one process even after pids wrap."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:  # noqa: PTH123 - no pathlib here
            raw = fh.read()
        return int(raw[raw.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None
