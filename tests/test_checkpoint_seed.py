"""A new session's first checkpoint starts from the folder's last snapshot (another
session's index, `checkpoints/seed.py`): it stages only what changed since, and what
it keeps is the folder as it is now, so a rewind still restores exactly that."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.checkpoints import Checkpoints
from synapse_lsp.checkpoints import seed as checkpoint_seed


def tree(root: Path, files: int = 40) -> None:
    for i in range(files):
        folder = root / f"pkg{i // 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i % 10}.py").write_text(f"VALUE = {i}\n")


def kept(keeper: Checkpoints, tree_id: str, name: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={keeper.git_dir}", "show", f"{tree_id}:{name}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def staged_by(keeper: Checkpoints) -> list[str]:
    """Record the paths each `update-index --add` of `keeper` stages."""
    paths: list[str] = []
    git = keeper.store.git

    async def recording(*args: str, **kwargs: Any) -> Any:
        stdin = kwargs.get("stdin")
        if args[:2] == ("update-index", "--add") and stdin:
            paths.extend(p.decode() for p in stdin.split(b"\0") if p)
        return await git(*args, **kwargs)

    keeper.store.git = recording  # type: ignore[method-assign]
    return paths


async def turn(keeper: Checkpoints, number: int, change: Any = None) -> None:
    keeper.begin_turn(number, 0, f"turn {number}")
    await keeper.ready()
    if change is not None:
        change()
    keeper.end_turn()
    await keeper.settle()


async def test_a_new_session_stages_only_what_changed_since_the_last_snapshot(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    tree(root)
    home = tmp_path / "home"
    first = Checkpoints(root, home, "first", tmp_path / "records-first")
    await turn(first, 1)
    assert first.disabled is None
    # Meanwhile (no session running): one file changed, one removed, one created.
    (root / "pkg0" / "mod1.py").write_text("VALUE = 'changed'\n")
    (root / "pkg1" / "mod2.py").unlink()
    (root / "new.py").write_text("NEW = 1\n")

    second = Checkpoints(root, home, "second", tmp_path / "records-second")
    staged = staged_by(second)
    second.begin_turn(1, 0, "the new chat's first prompt")
    await second.ready()
    assert second.disabled is None
    assert second.index.exists()
    # Not the folder's 40 files: the changes since the first session's snapshot.
    assert sorted(staged) == ["new.py", "pkg0/mod1.py", "pkg1/mod2.py"]
    # The turn's own change, then a rewind to before it: the folder as the new chat
    # found it, not as the first session last saw it.
    (root / "pkg0" / "mod1.py").write_text("VALUE = 'the turn'\n")
    (root / "pkg2" / "mod3.py").unlink()
    second.end_turn()
    await second.settle()
    [checkpoint] = second.kept()
    assert kept(second, checkpoint.before, "pkg0/mod1.py") == "VALUE = 'changed'\n"
    assert kept(second, checkpoint.before, "new.py") == "NEW = 1\n"
    report = await second.rewind(1)
    assert sorted(report.restored) == ["pkg0/mod1.py", "pkg2/mod3.py"]
    assert (root / "pkg0" / "mod1.py").read_text() == "VALUE = 'changed'\n"
    assert (root / "pkg2" / "mod3.py").read_text() == "VALUE = 23\n"
    assert not (root / "pkg1" / "mod2.py").exists()  # removed before the chat began
    assert (root / "new.py").read_text() == "NEW = 1\n"


async def test_a_copied_index_git_cannot_read_is_dropped_for_a_full_snapshot(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    tree(root, 5)
    home = tmp_path / "home"
    first = Checkpoints(root, home, "first", tmp_path / "records-first")
    await turn(first, 1)
    for shared in first.git_dir.glob("sharedindex.*"):  # expired, say
        shared.unlink()
    first.index.write_bytes(b"DIRC not an index")
    second = Checkpoints(root, home, "second", tmp_path / "records-second")
    await turn(second, 1)
    assert second.disabled is None
    [checkpoint] = second.kept()
    assert kept(second, checkpoint.before, "pkg0/mod4.py") == "VALUE = 4\n"


def test_the_seed_is_the_latest_index_copied_with_its_mtime(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    older, newer = store / "index-a", store / "index-b"
    older.write_bytes(b"older")
    newer.write_bytes(b"newer")
    (store / "index-c.lock").write_bytes(b"being written")
    os.utime(older, ns=(1_000_000_000, 1_000_000_000))
    os.utime(newer, ns=(2_000_000_000, 2_000_000_000))
    own = store / "index-new"
    assert checkpoint_seed.seed_index(store, own)
    assert own.read_bytes() == b"newer"
    assert own.stat().st_mtime_ns == 2_000_000_000  # git's racy-entry check sees the same
    assert not checkpoint_seed.seed_index(store, own)  # it has one now
    assert not [p for p in store.iterdir() if "seed" in p.name]


@pytest.mark.parametrize("names", [[], ["index-own"], ["index-x.lock"]])
def test_nothing_to_seed_from(tmp_path: Path, names: list[str]) -> None:
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    own = tmp_path / "index-own"
    assert not checkpoint_seed.seed_index(tmp_path, own)
