"""Fault drill, process lifetime: what a command starts must not outlive what the
result says killed it, nor the session, nor the server; background jobs a command
starts on purpose outlive the command (and only it)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp import proctree
from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession


def _token() -> str:
    """A unique `sleep` duration: it names this test's processes in /proc."""
    return f"{300 + secrets.randbelow(600)}.{secrets.randbelow(10**6):06d}"


def _sleeps(token: str, *, bare: bool = False) -> list[int]:
    """Live (non-zombie) `sleep TOKEN` processes anywhere on the machine (`bare`: only
    `sleep` itself, not a `setsid sleep TOKEN` that has yet to fork its sleep)."""
    needle = f"sleep\0{token}\0".encode()
    found = []
    table = proctree.scan()
    for pid, info in table.items():
        if info.zombie:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == needle or (not bare and cmdline.endswith(needle)):
            found.append(pid)
    return found


async def _until(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())


def _zombies_under(root: int) -> list[int]:
    table = proctree.scan()
    return [pid for pid in proctree.descendants(root, table) if table[pid].zombie]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(synapse_home=tmp_path / "home")


async def test_a_timeout_kills_the_two_hundred_background_jobs_it_started(
    tmp_path: Path, settings: Settings
) -> None:
    """The result says the command was killed: so are the 200 jobs it put in the
    background (they ignore nothing; only the foreground group used to be signalled)."""
    token = _token()
    shell = ShellSession(tmp_path, settings)
    await shell.start()
    try:
        result = await shell.run(
            f"for i in $(seq 200); do sleep {token} & done; sleep {token}", timeout=1
        )
        assert result.timed_out and result.exit_code == 124
        assert await _until(lambda: _sleeps(token) == [], 5.0), len(_sleeps(token))
        assert (await shell.run("echo alive")).stdout == "alive\n"
    finally:
        await shell.close()


async def test_a_timeout_kills_setsid_and_double_forked_children(
    tmp_path: Path, settings: Settings
) -> None:
    """`setsid` leaves bash's session and process group, `( … & )` leaves bash's
    tree: neither escapes the supervisor, to which orphans are re-parented."""
    token = _token()
    shell = ShellSession(tmp_path, settings)
    await shell.start()
    try:
        command = (
            f"setsid sleep {token} & (sleep {token} &); "
            f"nohup sleep {token} >/dev/null & sleep {token}"
        )
        result = await shell.run(command, timeout=1)
        assert result.timed_out
        assert await _until(lambda: _sleeps(token) == [], 5.0), _sleeps(token)
    finally:
        await shell.close()


async def test_cancel_kills_the_tree_and_spares_jobs_of_earlier_commands(
    tmp_path: Path, settings: Settings
) -> None:
    """`npm run dev &` in a command that completes is on purpose: it outlives that
    command and a later one that is cancelled or times out; it dies with the session."""
    kept, doomed = _token(), _token()
    shell = ShellSession(tmp_path, settings)
    await shell.start()
    try:
        done = await shell.run(
            f"sleep {kept} & setsid sleep {kept} & (sleep {kept} &); echo started"
        )
        assert done.exit_code == 0 and done.stdout == "started\n"
        # All three forked (`setsid` forks its sleep a moment later, maybe after the
        # command ended: a process born after the next command starts would be that one's).
        assert await _until(lambda: len(_sleeps(kept, bare=True)) == 3)
        # Straight after (same clock tick: the snapshot decides), then later (start tick).
        timed = await shell.run(
            f"sleep {doomed} & setsid sleep {doomed} & sleep {doomed}", timeout=0.5
        )
        assert timed.timed_out
        await asyncio.sleep(0.05)
        task = asyncio.create_task(shell.run(f"setsid sleep {doomed} & sleep {doomed}"))
        assert await _until(lambda: len(_sleeps(doomed)) == 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _until(lambda: _sleeps(doomed) == [], 5.0), _sleeps(doomed)
        assert len(_sleeps(kept)) == 3, "an earlier command's background jobs were killed"
        task = asyncio.create_task(shell.run(f"sleep {doomed} & sleep {doomed}"))
        assert await _until(lambda: len(_sleeps(doomed)) == 2)
        shell.interrupt()
        assert (await task).cancelled
        assert await _until(lambda: _sleeps(doomed) == [], 5.0), _sleeps(doomed)
        assert len(_sleeps(kept)) == 3
    finally:
        await shell.close()
    assert await _until(lambda: _sleeps(kept) == [], 5.0), "jobs outlived the session"


async def test_orphans_are_reaped_not_left_as_zombies(tmp_path: Path, settings: Settings) -> None:
    shell = ShellSession(tmp_path, settings)
    await shell.start()
    try:
        result = await shell.run(
            "for i in $(seq 50); do setsid sh -c 'sleep 0.1' & (sleep 0.1 &); done; wait"
        )
        assert result.exit_code == 0
        root = shell.supervisor_pid
        assert root is not None
        await asyncio.sleep(0.5)
        assert await _until(lambda: _zombies_under(root) == [], 5.0), _zombies_under(root)
    finally:
        await shell.close()


# ------------------------------------------------------------------ the server


def _frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _server_with_jobs(home: Path, folder: Path, token: str) -> subprocess.Popen[bytes]:
    """`python -m synapse_lsp` whose folder shell has started background jobs (one in
    its own session) and answered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["SYNAPSE_HOME"] = str(home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    init: dict[str, Any] = {"capabilities": {}, "processId": None, "rootUri": folder.as_uri()}
    run = {
        "command": "synapse.shell.run",
        "arguments": [{"command": f"sleep {token} & setsid sleep {token} & echo started"}],
    }
    proc.stdin.write(
        _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        + _frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + _frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand", "params": run})
    )
    proc.stdin.flush()
    out = b""
    deadline = time.monotonic() + 60
    while b"started" not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    assert b"started" in out, out[-2000:]
    return proc


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "end of input", "SIGKILL"])
async def test_the_server_ending_takes_every_job_with_it(tmp_path: Path, how: str) -> None:
    """No handler for SIGTERM used to leave every shell's jobs running; SIGKILL
    cannot be handled, so each shell's supervisor sees the server's end itself."""
    token = _token()
    proc = _server_with_jobs(tmp_path / "home", tmp_path, token)
    assert proc.stdin is not None
    try:
        assert await _until(lambda: len(_sleeps(token)) == 2)
        if how == "end of input":
            proc.stdin.close()
        else:
            proc.send_signal(getattr(signal, how))
        code = await asyncio.to_thread(proc.wait, 60)
        if how == "SIGTERM":
            assert code == 128 + signal.SIGTERM
        assert await _until(lambda: _sleeps(token) == [], 10.0), f"{how}: jobs survived"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_the_supervisor_is_a_small_program_not_a_fork_of_synapse(tmp_path: Path) -> None:
    """The supervisor used to stay a fork of the Synapse process: a copy of its whole
    heap (the SDK's too) per shell, PSS ~50 MB, growing private as the parent wrote.
    It execs a fresh `python -I -S proctree.py --supervise` instead."""
    import anthropic  # noqa: F401  (a heavy parent, as a warmed-up server is)

    shell = ShellSession(tmp_path, Settings(synapse_home=tmp_path / "home"))
    await shell.start()
    try:
        assert (await shell.run("true")).exit_code == 0
        pid = shell.supervisor_pid
        assert pid is not None
        # (its exec may still be under way on a loaded machine: wait for it, bounded)
        for _ in range(200):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--supervise" in cmdline:
                break
            await asyncio.sleep(0.05)
        assert b"--supervise" in cmdline, cmdline
        rss_kb = next(
            int(line.split()[1])
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        assert rss_kb < 30 * 1024, f"supervisor RSS {rss_kb // 1024} MB"
    finally:
        await shell.close()


SLOW_START = r"""
import os, signal, struct, sys, time
from synapse_lsp import proctree
slow, token = sys.argv[1], sys.argv[2]
parent_r, parent_w = os.pipe()
report_r, report_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(parent_w)
    os.close(report_r)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # our caller waits for the end of our output
        os.dup2(null, fd)
    os.setsid()
    sys.executable = slow  # the supervisor's interpreter: slow to start
    proctree.supervised_preexec(parent_r, report_w)
    os.execvp("sleep", ["sleep", token])  # stands for bash
os.close(parent_r)
os.close(report_w)
struct.unpack("i", os.read(report_r, 4))
time.sleep(0.1)  # the supervisor is still starting
os.kill(pid, signal.SIGHUP)  # the PTY hung up: Synapse is gone
os.waitpid(pid, 0)
"""


async def test_a_hangup_while_the_supervisor_starts_still_ends_the_session(
    tmp_path: Path,
) -> None:
    """The supervisor is an interpreter that takes a moment to start: a SIGHUP (Synapse
    killed, the PTY hung up) in that moment waits for its handler instead of killing
    it unhandled, which left bash and its jobs running."""
    token = _token()
    slow = tmp_path / "slow-python"
    # Python, not sh: a shell waits for `sleep` with every signal unblocked.
    slow.write_text(
        f"#!{sys.executable}\nimport os, sys, time\ntime.sleep(0.5)\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n"
    )
    slow.chmod(0o755)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", SLOW_START, str(slow), token],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    survivors = _sleeps(token)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], "the session's processes outlived a hangup at start"


def test_a_killed_sessions_private_tmp_is_swept_at_the_next_start(tmp_path: Path) -> None:
    """Issue 28 item 3: SIGTERM (during a hook, say) left `/tmp/synapse-tmp-*` behind;
    only a clean close removed it. The next Synapse process removes the folders of
    processes that are gone, and keeps those of processes that run."""
    from synapse_lsp import sandbox

    code = (
        "import sys, time\nfrom synapse_lsp import sandbox\n"
        "print(sandbox.make_private_tmp(), flush=True)\ntime.sleep(120)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    doomed = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True
    )
    alive = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert doomed.stdout is not None and alive.stdout is not None
        gone_tmp = Path(doomed.stdout.readline().strip())
        kept_tmp = Path(alive.stdout.readline().strip())
        (gone_tmp / "left.txt").write_text("x")
        doomed.send_signal(signal.SIGTERM)
        doomed.wait(timeout=30)
        assert gone_tmp.is_dir()  # SIGTERM cannot clean up
        removed = sandbox.sweep_private_tmps(tmp_path)
        assert removed == [gone_tmp] and not gone_tmp.exists()
        assert kept_tmp.is_dir()
    finally:
        for proc in (doomed, alive):
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.parametrize("walk", ["children files", "whole table"])
async def test_closing_the_session_kills_every_job_it_left_running(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch, walk: str
) -> None:
    """`close()` walks the supervisor's tree down /proc/PID/task/TID/children (or scans
    every process where the kernel has no such files): background jobs, `setsid`
    and double-forked ones are all gone when it returns."""
    from synapse_lsp.shell import procs

    if walk == "whole table":
        monkeypatch.setattr(procs, "HAS_CHILDREN", False)
    token = _token()
    shell = ShellSession(tmp_path, settings)
    await shell.start()
    result = await shell.run(
        f"setsid sleep {token} & (sleep {token} &); nohup sleep {token} >/dev/null 2>&1 & "
        f"sleep {token} &"
    )
    assert result.exit_code == 0, result.stderr
    assert await _until(lambda: len(_sleeps(token)) == 4), _sleeps(token)
    root = shell.supervisor_pid
    assert root is not None
    jobs = set(_sleeps(token))  # found both ways (the tree may change between two looks)
    assert jobs <= procs.descendants(root, procs.scan())
    assert jobs <= procs.descendants(root, procs.subtree(root))
    await shell.close()
    assert _sleeps(token) == []
