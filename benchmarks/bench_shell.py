"""Shell figures (issue 2): what the persistent session costs and why it is on a PTY.

Prints, all measured in this one run:
- round trip of `true` through ShellSession (median of 500) against
  `subprocess.run(["bash", "-c", "true"])` (median of 500) and the ratio;
- raw round trips of a bash kept on a PTY vs one kept on pipes (no asyncio, no
  result building), the measurement behind the PTY-or-pipes choice;
- 100 MB of output (`yes | head -c 100000000`) through ShellSession: MB/s and the
  growth of peak RSS; the same volume read raw from a PTY and from a pipe;
- the overhead BashRouter.route() adds over ShellSession.run() for `true`.

Run: .venv/bin/python benchmarks/bench_shell.py
"""

from __future__ import annotations

import asyncio
import os
import select
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

RUNS = 500
BIG = 100_000_000
PTY_BIG = 10_000_000
MARK = b"\x1eDONE"


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _bash_env() -> dict[str, str]:
    return dict(
        os.environ,
        PS1="",
        PS2="",
        TERM="dumb",
        HISTFILE="",
        PROMPT_COMMAND=f"printf '{MARK.decode()}%s\\n' $?",
    )


def _until_mark(read: Callable[[], bytes]) -> int:
    """Read until the marker line; returns bytes read (marker excluded)."""
    tail = b""
    total = 0
    while True:
        chunk = read()
        if not chunk:
            raise RuntimeError("bash went away")
        total += len(chunk)
        tail = (tail + chunk)[-64:]
        at = tail.find(MARK)
        if at >= 0 and tail.endswith(b"\n", at):
            return total


def raw_pty(command: bytes, runs: int) -> tuple[float, float]:
    """(median round trip ms, seconds for the last run) of a bash kept on a PTY."""
    proc = PtyProcess.spawn(
        ["bash", "--norc", "--noprofile", "--noediting", "-i"], env=_bash_env(), echo=False
    )
    fd = proc.fd

    def read() -> bytes:
        return os.read(fd, 1 << 16)

    try:
        # Let the start-up prompt (and its marker) come and go before measuring.
        os.write(fd, b"true\n")
        while select.select([fd], [], [], 0.3)[0]:
            read()
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            os.write(fd, command)
            _until_mark(read)
            samples.append(time.perf_counter() - started)
        return _median_ms(samples), samples[-1]
    finally:
        proc.terminate(force=True)


def raw_pipes(command: bytes, runs: int) -> tuple[float, float]:
    """The same with bash on pipes (the marker printed after each line)."""
    proc = subprocess.Popen(
        ["bash", "--norc", "--noprofile"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_bash_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdout.fileno()
    suffix = f"; printf '{MARK.decode()}%s\\n' $?\n".encode()

    def read() -> bytes:
        select.select([fd], [], [])
        return os.read(fd, 1 << 16)

    try:
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            proc.stdin.write(command.rstrip(b"\n") + suffix)
            proc.stdin.flush()
            _until_mark(read)
            samples.append(time.perf_counter() - started)
        return _median_ms(samples), samples[-1]
    finally:
        proc.kill()
        proc.wait()


def spawn_true(runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        samples.append(time.perf_counter() - started)
    return _median_ms(samples)


async def session_figures(root: Path) -> dict[str, float]:
    settings = Settings(synapse_home=root / "home", command_timeout=300)
    shell = ShellSession(root, settings)
    await shell.start()
    router = BashRouter(shell, settings)
    figures: dict[str, float] = {}
    try:
        for _ in range(50):
            await shell.run("true")
            await router.route("true")
        runs, routes = [], []
        for _ in range(RUNS):
            started = time.perf_counter()
            await shell.run("true")
            runs.append(time.perf_counter() - started)
            started = time.perf_counter()
            await router.route("true")
            routes.append(time.perf_counter() - started)
        figures["session_true_ms"] = _median_ms(runs)
        figures["route_true_ms"] = _median_ms(routes)

        streamed = 0

        def sink(stream: str, text: str) -> None:
            nonlocal streamed
            streamed += len(text)

        rss_before = _peak_rss_kb()
        started = time.perf_counter()
        result = await shell.run(f"yes | head -c {BIG}", on_output=sink)
        elapsed = time.perf_counter() - started
        assert result.truncated and streamed == BIG, (result.truncated, streamed)
        figures["big_s"] = elapsed
        figures["big_rss_growth_mb"] = (_peak_rss_kb() - rss_before) / 1024
        if result.full_output_path is not None:
            figures["big_file_mb"] = result.full_output_path.stat().st_size / 1e6
            result.full_output_path.unlink()
    finally:
        await shell.close()
    return figures


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(session_figures(Path(tmp)))
    spawn = spawn_true(RUNS)
    pty_true, _ = raw_pty(b"true\n", RUNS)
    pipe_true, _ = raw_pipes(b"true\n", RUNS)
    _, pty_big = raw_pty(f"yes | head -c {PTY_BIG}\n".encode(), 1)  # too slow for 100 MB
    _, pipe_big = raw_pipes(f"yes | head -c {BIG}\n".encode(), 1)

    session = figures["session_true_ms"]
    print(f"round trip of `true`, median of {RUNS}:")
    print(f"  ShellSession.run            {session:7.3f} ms")
    print(f"  BashRouter.route            {figures['route_true_ms']:7.3f} ms")
    print(f"  route() overhead            {figures['route_true_ms'] - session:7.3f} ms")
    print(f"  subprocess.run(bash -c)     {spawn:7.3f} ms")
    print(f"  ratio spawn / session       {spawn / session:7.1f} x")
    print(f"  raw bash on a PTY           {pty_true:7.3f} ms")
    print(f"  raw bash on pipes           {pipe_true:7.3f} ms")
    mb = BIG / 1e6
    print(f"100 MB of output (yes | head -c {BIG}):")
    print(
        f"  ShellSession.run            {figures['big_s']:7.2f} s  "
        f"{mb / figures['big_s']:7.0f} MB/s  peak RSS +{figures['big_rss_growth_mb']:.1f} MB  "
        f"(spill file {figures.get('big_file_mb', 0):.0f} MB)"
    )
    print(
        f"  raw PTY read ({PTY_BIG // 1_000_000} MB)         {pty_big:7.2f} s  "
        f"{PTY_BIG / 1e6 / pty_big:7.0f} MB/s"
    )
    print(f"  raw pipe read               {pipe_big:7.2f} s  {mb / pipe_big:7.0f} MB/s")


if __name__ == "__main__":
    main()
