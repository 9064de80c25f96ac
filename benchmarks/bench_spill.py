"""Output volume: peak RSS of this process and the spill file for `yes | head -c 1000000000`
through a ShellSession with the default settings (spillMaxBytes 64 MiB, spillTotalBytes 1 GiB).

    .venv/bin/python benchmarks/bench_spill.py [BYTES]
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession


async def main(size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        shell = ShellSession(Path(tmp), Settings(synapse_home=home))
        await shell.start()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        try:
            result = await shell.run(f"yes | head -c {size}", timeout=600)
        finally:
            await shell.close()
        elapsed = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        spilled = sum(p.stat().st_size for p in (home / "outputs").glob("*.txt"))
        print(f"command: yes | head -c {size}  exit {result.exit_code}  {elapsed:.1f} s")
        print(f"peak RSS: {peak / 1024:.1f} MiB (before the command {before / 1024:.1f} MiB)")
        print(f"spill files: {spilled} bytes ({spilled / (1 << 20):.1f} MiB)")
        print(
            f"model sees {len(result.stdout)} chars; cut marker: "
            + next(line for line in result.stdout.splitlines() if line.startswith("[..."))
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000_000))
