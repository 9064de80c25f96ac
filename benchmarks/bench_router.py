"""Router figures (issue 2): `true` and a 2,000-line `read` through BashRouter.

Prints medians and the ratio against spawning `bash -c true` measured in the same
run. Run: .venv/bin/python benchmarks/bench_router.py
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

RUNS = 500


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = Settings(synapse_home=root / "home")
        shell = ShellSession(root, settings)
        await shell.start()
        router = BashRouter(shell, settings)
        try:
            (root / "two-thousand.txt").write_text(
                "".join(f"line {i}: some ordinary source text\n" for i in range(2000))
            )
            for _ in range(20):
                await router.route("true")
                await router.route("read two-thousand.txt")
            routed_true = []
            for _ in range(RUNS):
                t = time.perf_counter()
                await router.route("true")
                routed_true.append(time.perf_counter() - t)
            raw_true = []
            for _ in range(RUNS):
                t = time.perf_counter()
                await shell.run("true")
                raw_true.append(time.perf_counter() - t)
            spawn = []
            for _ in range(RUNS):
                t = time.perf_counter()
                subprocess.run(["bash", "-c", "true"], check=True)
                spawn.append(time.perf_counter() - t)
            reads = []
            for _ in range(RUNS):
                t = time.perf_counter()
                result = await router.route("read two-thousand.txt")
                reads.append(time.perf_counter() - t)
            assert result.exit_code == 0
        finally:
            await shell.close()
    med = {
        k: statistics.median(v) * 1000
        for k, v in {
            "router true": routed_true,
            "shell true": raw_true,
            "spawn": spawn,
            "read": reads,
        }.items()
    }
    print(f"runs per figure: {RUNS}")
    print(f"`true` via router.route      median {med['router true']:.3f} ms")
    print(f"`true` via shell.run         median {med['shell true']:.3f} ms")
    print(f"subprocess bash -c true      median {med['spawn']:.3f} ms")
    print(f"speed-up router vs spawn     {med['spawn'] / med['router true']:.1f}x (target >= 3x)")
    print(f"read 2,000-line file, router median {med['read']:.3f} ms (target <= 0.5 ms)")


if __name__ == "__main__":
    asyncio.run(main())
