"""What the bubblewrap sandbox costs the persistent shell.

Prints, all measured in this one run, sandboxed (workspace-write, network off) vs
unsandboxed (full-access), the two interleaved so machine load hits both alike:
- round trip of `true` through ShellSession.run (median of 200 per mode);
- round trip of `cat -n` of a 2,000-line file (what `read` of such a file costs
  natively; median of 200 per mode);
- shell start (ShellSession.start: spawn until bash answered at its prompt; median
  of 20 per mode);
- the one-time probe of bwrap (`sandbox.status`, once per process).
and the ratios sandboxed / unsandboxed.

Run: .venv/bin/python benchmarks/bench_sandbox.py
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession

RUNS = 200
STARTS = 20
LINES = 2000
MODES = ("workspace-write", "full-access")


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _round_trips(
    shells: dict[str, ShellSession], command: str, expect: str | None
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {mode: [] for mode in shells}
    for _ in range(RUNS):
        for mode, shell in shells.items():
            started = time.perf_counter()
            result = await shell.run(command)
            samples[mode].append(time.perf_counter() - started)
            if result.exit_code != 0 or (expect is not None and expect not in result.stdout):
                raise SystemExit(f"{mode}: {command!r} failed: {result}")
    return samples


async def _starts(work: Path, settings: dict[str, Settings]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {mode: [] for mode in settings}
    for _ in range(STARTS):
        for mode, chosen in settings.items():
            shell = ShellSession(work, chosen)
            started = time.perf_counter()
            await shell.start()
            samples[mode].append(time.perf_counter() - started)
            await shell.close()
    return samples


def _report(name: str, samples: dict[str, list[float]]) -> None:
    boxed, free = (_median_ms(samples[mode]) for mode in MODES)
    print(
        f"{name:<34} sandboxed {boxed:8.3f} ms   full-access {free:8.3f} ms   "
        f"ratio {boxed / free:5.2f}x   (+{boxed - free:.3f} ms)"
    )


async def main() -> None:
    if shutil.which("bwrap") is None:
        raise SystemExit("bwrap is not installed: nothing to compare")
    base = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        work = base / "work"
        work.mkdir()
        (work / "big.txt").write_text(
            "".join(
                f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(LINES)
            )
        )
        settings = {
            mode: Settings(synapse_home=base / "home", sandbox=mode, network="off")
            for mode in MODES
        }
        started = time.perf_counter()
        status = sandbox.status(settings["workspace-write"])
        probe_ms = (time.perf_counter() - started) * 1000
        if not status.sandboxed:
            raise SystemExit(f"no sandbox here: {status.describe()}")
        print(f"bwrap probe (once per process): {probe_ms:.1f} ms; {status.describe()}")
        shells = {mode: ShellSession(work, chosen) for mode, chosen in settings.items()}
        for shell in shells.values():
            await shell.start()
        try:
            for shell in shells.values():  # warm-up
                for _ in range(20):
                    await shell.run("true")
            _report("`true` round trip (median of 200)", await _round_trips(shells, "true", None))
            _report(
                f"`cat -n` of {LINES} lines (median 200)",
                await _round_trips(shells, "cat -n big.txt", f"{LINES}\tline {LINES - 1}"),
            )
        finally:
            for shell in shells.values():
                await shell.close()
        _report("shell start (median of 20)", await _starts(work, settings))
        print(f"python {sys.version.split()[0]}, runs interleaved per mode")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
