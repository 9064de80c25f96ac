"""Checkpoints on a big folder: the time and disk of a snapshot, as a ratio to
`git status --porcelain` on the same tree in the same run, and a rewind's time.

    .venv/bin/python benchmarks/bench_checkpoints.py [--files 10000] [--repeats 7]

The folder is a git repository of N small files (100 per directory). Figures:
the first snapshot (the whole folder into the shadow store), an incremental one
after a 1-file change (the case of every turn), `git status --porcelain` after the
same change (the baseline; the target is <= 2x), the first snapshot of a new session
while the store exists (what the first command of each new chat waits for; the same
target), the shadow store's size on disk, and the time to rewind one turn that
changed one file. Medians of --repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from synapse_lsp.checkpoints import Checkpoints


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i % 100:02d}.py").write_text(f"# module {i}\nVALUE = {i}\n" * 4)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "tree"],
        cwd=root,
        check=True,
    )


def disk_usage(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def git_status(root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True)
    return time.perf_counter() - started


async def snapshot(keeper: Checkpoints, turn: int) -> float:
    started = time.perf_counter()
    keeper.begin_turn(turn, 0, f"turn {turn}")
    await keeper.ready()
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        make_tree(root, args.files)
        home = Path(tmp) / "home"
        keeper = Checkpoints(root, home, "bench", Path(tmp) / "records")
        first = await snapshot(keeper, 1)
        keeper.end_turn()
        await keeper.settle()
        first_disk = disk_usage(keeper.git_dir)
        target = root / "pkg000" / "mod00.py"
        incremental: list[float] = []
        status: list[float] = []
        for turn in range(2, 2 + args.repeats):
            target.write_text(f"changed {turn}\n")
            os.utime(target, None)
            status.append(git_status(root))
            incremental.append(await snapshot(keeper, turn))
            keeper.end_turn()
            await keeper.settle()
        after_disk = disk_usage(keeper.git_dir)
        fresh: list[float] = []
        fresh_status: list[float] = []
        for n in range(args.repeats):
            target.write_text(f"changed before session {n}\n")
            fresh_status.append(git_status(root))
            other = Checkpoints(root, home, f"bench-new-{n}", Path(tmp) / f"records-{n}")
            fresh.append(await snapshot(other, 1))
            other.end_turn()
            await other.settle()
        rewinds: list[float] = []
        for _ in range(args.repeats):
            turn = keeper.next_turn()
            await snapshot(keeper, turn)
            target.write_text(f"the turn's change {turn}\n")
            keeper.end_turn()
            await keeper.settle()
            started = time.perf_counter()
            report = await keeper.rewind(turn)
            rewinds.append(time.perf_counter() - started)
            assert report.restored == ["pkg000/mod00.py"], report
        inc, base = statistics.median(incremental), statistics.median(status)
        new, new_base = statistics.median(fresh), statistics.median(fresh_status)
        print(f"folder: {args.files} files in a git repository; medians of {args.repeats}")
        print(f"first snapshot (whole folder):        {first * 1000:8.1f} ms")
        print(f"incremental snapshot, 1 file changed: {inc * 1000:8.1f} ms")
        print(f"git status --porcelain, same change:  {base * 1000:8.1f} ms")
        print(f"ratio incremental / git status:       {inc / base:8.2f}x  (target <= 2x)")
        print(
            f"new session's first snapshot:         {new * 1000:8.1f} ms "
            f"({min(fresh) * 1000:.0f}-{max(fresh) * 1000:.0f})"
        )
        print(f"ratio new session / git status:       {new / new_base:8.2f}x  (target <= 2x)")
        print(f"shadow store on disk after the first: {first_disk / 1e6:8.2f} MB")
        print(
            f"... after {args.repeats} more snapshots:     {after_disk / 1e6:8.2f} MB "
            f"(+{(after_disk - first_disk) / 1e3:.1f} kB)"
        )
        print(f"rewind of a 1-file turn:              {statistics.median(rewinds) * 1000:8.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
