"""A command's process groups: the job that has the terminal is signalled (job
control: every command is a group of its own), SIGINT escalates to SIGKILL, and
whatever the command started is killed, background jobs and `setsid` children
included (`procs`: the session's process tree under its supervisor)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterator

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp.shell import procs
from synapse_lsp.shell.command import Run
from synapse_lsp.shell.terminal import Terminal

log = logging.getLogger(__name__)

# After SIGINT, how long the command gets before its process group is SIGKILLed,
# and how long after that before bash itself is presumed stuck and replaced.
INTERRUPT_GRACE_S = 1.0
KILL_GRACE_S = 2.0
STOP_POLL_S = 0.01  # while a command stops: how often a newly started job is looked for


class Groups:
    """Signals for the commands of the bash on `term`."""

    def __init__(self, term: Terminal) -> None:
        self.term = term

    def _bash_or_root(self, pgrp: int | None) -> bool:
        return pgrp is None or pgrp in (self.term.pid, self.term.supervisor_pid)

    def mark_start(self, run: Run) -> None:
        """Remember where the command starts, to kill only what it started: the start
        tick and, for processes started within that tick, the last pid given out (one
        read of /proc/loadavg; pids above it are new)."""
        run.since = procs.boot_ticks()
        run.last_pid = procs.last_pid()

    def signal_foreground(self, run: Run, sig: signal.Signals) -> None:
        pid = self.term.pid
        pgrp = self.term.foreground_pgrp()
        if pid is None:
            return
        if pgrp is None or pgrp in (pid, self.term.supervisor_pid):
            # bash itself runs (a builtin loop, or between two jobs): interrupt bash.
            if sig == signal.SIGINT:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            return
        self.signal_group(run, pgrp, sig)

    def interrupt_bash(self) -> None:
        """SIGINT bash itself before its job is killed: a job killed by another signal
        than SIGINT lets bash run the rest of the list (`ignores-int; touch f`), unless
        bash was interrupted while it waited. Only while a job has the terminal (bash
        waits for it): not while bash runs its prompt hook, which a SIGINT would cut
        short and run again."""
        pid = self.term.pid
        if pid is None or self._bash_or_root(self.term.foreground_pgrp()):
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)

    def signal_group(self, run: Run, pgrp: int, sig: signal.Signals) -> None:
        run.pgrps.add(pgrp)
        run.programs[pgrp] = program(pgrp)  # read before: a later exec is seen then
        with contextlib.suppress(OSError):
            os.killpg(pgrp, sig)

    async def await_stop(self, run: Run, sig: signal.Signals, seconds: float) -> None:
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
            pgrp = self.term.foreground_pgrp()
            if run.done.done() or pgrp is None or self._bash_or_root(pgrp):
                continue  # bash between jobs: the next job is caught when it starts
            if pgrp in run.programs:
                now = program(pgrp)
                if now is None or now == run.programs[pgrp]:
                    continue  # signalled already, and it runs the same program
            self.signal_group(run, pgrp, sig)

    def kill_groups(self, run: Run) -> None:
        pid, root = self.term.pid, self.term.supervisor_pid
        pgrp = self.term.foreground_pgrp()
        if pgrp is not None and pgrp not in (pid, root):
            run.pgrps.add(pgrp)
        if root is None:
            return
        # Only groups that still hold a process of this shell: a group recorded seconds
        # ago may be gone, and its id a new process's (pids wrap at 32768 on many
        # machines; a CI run wraps them), maybe another session's supervisor.
        table = procs.scan()
        ours = {table[p].pgrp for p in procs.descendants(root, table) if not table[p].zombie}
        for group in run.pgrps & ours:
            if group not in (pid, root) and group > 1:
                with contextlib.suppress(OSError):
                    os.killpg(group, signal.SIGKILL)

    def kill_command_tree(self, run: Run) -> None:
        """SIGKILL every process the command started, background jobs and `setsid`
        children included (they are re-parented to the supervisor, not to init); jobs
        of earlier commands are spared."""
        root, bash = self.term.supervisor_pid, self.term.pid
        if root is None:
            return
        roots = {root} if bash is None else {root, bash}
        mark = run.last_pid
        now = procs.last_pid()
        if mark is not None and (now is None or now < mark):
            mark = None  # pids wrapped since the command started: the tick alone decides
        count = procs.kill_all(
            lambda table: procs.command_processes(table, roots, run.since, after_pid=mark)
        )
        if count:
            log.debug("killed %d processes of command %d", count, run.seq)


def end_session(proc: PtyProcess) -> None:
    """Kill everything under the supervisor (bash, its jobs, orphans it adopted), then
    the supervisor itself; close the PTY and reap. Not once the supervisor is reaped:
    its pid (and session id) may be another process's by now, and it killed its own
    tree on exit."""
    for pause in _ending(proc):
        time.sleep(pause)


async def end_session_soon(proc: PtyProcess) -> None:
    """`end_session`, its waits awaited: the event loop goes on meanwhile."""
    for pause in _ending(proc):
        await asyncio.sleep(pause)


def _ending(proc: PtyProcess) -> Iterator[float]:
    """`end_session`'s steps, yielding the seconds to wait between them."""
    root = int(proc.pid)
    if not proc.terminated:
        yield from procs.kill_rounds(
            lambda table: procs.descendants(root, table), lambda: procs.subtree(root), set()
        )
        for group in _session_groups(root):
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(root, signal.SIGKILL)
    # Not proc.close(): it sleeps 0.1 s twice. Close the PTY and reap bash.
    with contextlib.suppress(Exception):
        proc.fileobj.close()
    proc.closed = True
    for _ in range(50):  # bash was just SIGKILLed: its status, without waiting for long
        with contextlib.suppress(Exception):
            if not proc.isalive():
                return
        yield 0.001


def exit_status(proc: PtyProcess) -> int:
    with contextlib.suppress(Exception):
        proc.isalive()
    if proc.exitstatus is not None:
        return int(proc.exitstatus)
    if proc.signalstatus is not None:
        return 128 + int(proc.signalstatus)
    return -1


def program(pid: int) -> str | None:
    """The program file a process runs (it changes at an exec only, not when a program
    renames itself), or None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/exe")  # noqa: PTH115 - per poll; str is enough
    except OSError:
        return None


def _session_groups(sid: int) -> set[int]:
    """Process groups of every process in session `sid` (the supervisor leads it).
    Where `procs.subtree` walks the supervisor's tree, `kill_all` has killed them all
    already: every process of the session descends from the supervisor, and one
    orphaned while it lives is its (a subreaper's), so the session is its own group
    only, without a scan of every process of the machine (ms on a desktop)."""
    groups = {sid}
    if procs.HAS_CHILDREN:
        return groups
    for info in procs.scan().values():
        if info.session == sid:
            groups.add(info.pgrp)
    return groups
