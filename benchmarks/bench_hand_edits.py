"""The hand-edit guard's cost per command (agent/hand_edits.py), on a big folder.

    .venv/bin/python benchmarks/bench_hand_edits.py [--files 10000] [--repeats 9]

The guard probes the folder (an incremental checkpoint snapshot) where the agent's
work begins (before the first command after a model reply: the probe, then a
compare with the probe where the wait began) and where it ends (before the next
model request). Each repeat is one turn of one command that changes one file, with a
hand edit of another file while the "model" is asked; the figures are the time the
command waits (`agent_acts`), the time the next model request waits (`agent_waits`),
their sum (the guard's cost per model reply that runs commands; a reply without
commands costs nothing) and, as the baseline, `git status --porcelain` on the same
tree. The budget (docs/user-guide.md, "Checkpoints and rewind"): the sum stays within
4x `git status --porcelain` of the folder. Medians of --repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

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


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        make_tree(root, args.files)
        keeper = Checkpoints(root, Path(tmp) / "home", "bench", Path(tmp) / "records")
        guard = HandEdits(lambda: keeper)
        keeper.on_end = guard.on_end
        ours, theirs = root / "pkg000" / "mod00.py", root / "pkg001" / "mod00.py"
        acts: list[float] = []
        waits: list[float] = []
        status: list[float] = []
        found: list[bool] = []
        for turn in range(1, 2 + args.repeats):  # the first turn warms the store up
            keeper.begin_turn(turn, 0, f"turn {turn}")
            guard.begin(turn)
            await keeper.ready()
            theirs.write_text(f"the user's edit {turn}\n")  # while the model is asked
            started = time.perf_counter()
            await guard.agent_acts()  # the command may run now
            acted = time.perf_counter()
            ours.write_text(f"the agent's change {turn}\n")  # the command
            waited = time.perf_counter()
            await guard.agent_waits()  # the next model request may start now
            done = time.perf_counter()
            status.append(git_status(root))
            keeper.end_turn()
            await keeper.settle()
            record = keeper.kept()[-1]
            found.append(record.foreign == ["pkg001/mod00.py"])
            if turn > 1:
                acts.append(acted - started)
                waits.append(done - waited)
        assert all(found), "the guard missed the hand edit"
        act, wait = statistics.median(acts), statistics.median(waits)
        base = statistics.median(status)
        print(f"folder: {args.files} files in a git repository; medians of {args.repeats}")
        print(f"before the first command (probe + compare): {act * 1000:8.1f} ms")
        print(f"before the next model request (probe):      {wait * 1000:8.1f} ms")
        print(f"per model reply that runs commands:         {(act + wait) * 1000:8.1f} ms")
        print(f"git status --porcelain, same tree:          {base * 1000:8.1f} ms")
        ratio = (act + wait) / base
        print(f"ratio per reply / git status:               {ratio:8.2f}x (budget <= 4x)")


if __name__ == "__main__":
    asyncio.run(main())
