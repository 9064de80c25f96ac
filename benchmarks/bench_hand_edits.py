"""The hand-edit guard's cost per model reply (agent/hand_edits.py), on a big folder.

    .venv/bin/python benchmarks/bench_hand_edits.py [--files 10000] [--repeats 9]

The guard tells the agent's changes from someone else's by what changes while the
model is asked: where such a wait begins (before a model request that follows
commands, `agent_waits`) and where it ends (before the next command, `agent_acts`).
Each repeat is one turn of two commands, each changing one file, with a hand edit of
another file while the "model" is asked between them. Two ways, in the same run:

- the kernel's events (inotify, where Linux can watch the folder: the default);
- without them (as where inotify cannot watch): a stat walk of a small folder, an
  incremental snapshot past 5,000 entries.

Printed (medians of --repeats): the time the second command waits (`agent_acts`),
the time the request after it waits (`agent_waits`), their sum (the guard's cost per
model reply that runs commands, after the turn's first), the first reply's (the
watch's listing of the folders, or the first walk), and, as the baseline,
`git status --porcelain` on the same tree. The budget (docs/user-guide.md,
"Checkpoints and rewind"): the sum stays within 4x `git status --porcelain`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from synapse_lsp.agent import hand_edits
from synapse_lsp.agent.hand_edits import HandEdits
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


def git_status(root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True)
    return time.perf_counter() - started


async def one_way(root: Path, tmp: Path, repeats: int, events: bool) -> dict[str, float]:
    """Medians of `repeats` turns (after one that warms the store up), in seconds."""
    hand_edits.EVENTS = events
    keeper = Checkpoints(root, tmp / f"home-{events}", "bench", tmp / f"records-{events}")
    guard = HandEdits(lambda: keeper)
    keeper.on_end = guard.on_end
    ours, theirs = root / "pkg000" / "mod00.py", root / "pkg001" / "mod00.py"
    times: dict[str, list[float]] = {"acts": [], "waits": [], "first": [], "status": []}
    for turn in range(1, 2 + repeats):
        keeper.begin_turn(turn, 0, f"turn {turn}")
        guard.begin(turn)
        await keeper.ready()
        await guard.agent_acts()  # the first command (the turn's first wait ends)
        ours.write_text(f"the agent's change {turn}\n")
        started = time.perf_counter()
        await guard.agent_waits()  # the model is asked again
        first = time.perf_counter() - started
        theirs.write_text(f"the user's edit {turn}\n")  # while the model is asked
        started = time.perf_counter()
        await guard.agent_acts()  # the second command may run now
        acts = time.perf_counter() - started
        ours.write_text(f"the agent's second change {turn}\n")
        started = time.perf_counter()
        await guard.agent_waits()  # the next model request may start now
        waits = time.perf_counter() - started
        status = git_status(root)
        keeper.end_turn()
        await keeper.settle()
        record = keeper.kept()[-1]
        assert record.foreign == ["pkg001/mod00.py"], f"the guard missed it: {record.foreign}"
        if turn > 1:
            for name, value in (("acts", acts), ("waits", waits), ("first", first)):
                times[name].append(value)
            times["status"].append(status)
    return {name: statistics.median(values) for name, values in times.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        make_tree(root, args.files)
        ways = {
            "events": await one_way(root, Path(tmp), args.repeats, events=True),
            "without": await one_way(root, Path(tmp), args.repeats, events=False),
        }
    print(f"folder: {args.files} files in a git repository; medians of {args.repeats}")
    print("| figure | kernel events | without them (walk or snapshot) |")
    print("|---|---|---|")
    rows = [
        ("before the second command (agent_acts)", "acts"),
        ("before the request after it (agent_waits)", "waits"),
        ("per model reply after the turn's first", None),
        ("the turn's first reply (agent_waits)", "first"),
        ("git status --porcelain, same tree", "status"),
    ]
    for label, key in rows:
        cells = []
        for way in ways.values():
            value = way["acts"] + way["waits"] if key is None else way[key]
            cells.append(f"{value * 1000:.2f} ms")
        print(f"| {label} | {' | '.join(cells)} |")
    for name, way in ways.items():
        ratio = (way["acts"] + way["waits"]) / way["status"]
        print(f"{name}: per reply / git status = {ratio:.2f}x (budget <= 4x)")


if __name__ == "__main__":
    asyncio.run(main())
