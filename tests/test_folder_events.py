"""The folder's changes as the kernel reports them (checkpoints/folder_events.py), on
real folders with real inotify: what a read between two moments says changed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from synapse_lsp.checkpoints import folder_events
from synapse_lsp.checkpoints.folder_events import FolderEvents, TooManyFoldersError


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    for rel in ("a.txt", "src/b.py", "src/deep/c.py", ".git/HEAD", "home/state.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    return root


@pytest.fixture
def events(tree: Path) -> Iterator[FolderEvents]:
    watch = FolderEvents(tree, skip="home")
    yield watch
    watch.close()


def test_nothing_changed_reads_empty(events: FolderEvents) -> None:
    assert events.changes() == set()
    assert events.changes() == set()


def test_writes_creations_deletions_touches_and_renames_are_seen(
    tree: Path, events: FolderEvents
) -> None:
    (tree / "a.txt").write_text("changed")
    (tree / "src/new.py").write_text("new")
    (tree / "src/deep/c.py").unlink()
    os.utime(tree / "src/b.py", (1, 1))  # only touched: counts, as a walk's mtime would
    assert events.changes() == {"a.txt", "src/new.py", "src/deep/c.py", "src/b.py"}
    (tree / "a.txt").rename(tree / "src/a2.txt")
    assert events.changes() == {"a.txt", "src/a2.txt"}
    assert events.changes() == set()  # each change once


def test_git_folders_and_the_skipped_folder_are_left_out(tree: Path, events: FolderEvents) -> None:
    (tree / ".git/HEAD").write_text("ref: other")
    (tree / ".git/index").write_text("x")
    (tree / "home/state.json").write_text("{}")
    (tree / "home/more").mkdir()
    assert events.changes() == set()


def test_a_new_folder_made_at_once_with_its_files_is_read_whole(
    tree: Path, events: FolderEvents
) -> None:
    """`mkdir -p x/y && echo > x/y/z`: the files exist before the watch of their folder;
    they count all the same, and later changes inside are seen too."""
    (tree / "x/y").mkdir(parents=True)
    (tree / "x/y/z.txt").write_text("z")
    (tree / "x/top.txt").write_text("t")
    assert events.changes() == {"x/y/z.txt", "x/top.txt"}
    (tree / "x/y/z.txt").write_text("again")
    assert events.changes() == {"x/y/z.txt"}


def test_a_moved_folder_is_unknown_then_watched_afresh(tree: Path, events: FolderEvents) -> None:
    (tree / "src").rename(tree / "lib")
    assert events.changes() is None  # the old entries' paths are not known: unknown
    (tree / "lib/deep/c.py").write_text("after the move")
    assert events.changes() == {"lib/deep/c.py"}


def test_a_symbolic_link_to_a_folder_is_not_followed(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tree / "link").symlink_to(outside)
    watch = FolderEvents(tree)
    try:
        (outside / "f.txt").write_text("not under the folder")
        assert watch.changes() == set()
        (tree / "link").unlink()
        assert watch.changes() == {"link"}
    finally:
        watch.close()


def test_an_overflowing_queue_is_unknown_then_seen_again(tree: Path, events: FolderEvents) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for i in range(limit + 10):  # two events each (the write and the close): past it
        (tree / "a.txt").write_text(str(i))
    assert events.changes() is None
    (tree / "src/b.py").write_text("after")
    assert events.changes() == {"src/b.py"}


def test_too_many_folders_refuse_to_watch_and_leave_no_descriptor(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folder_events, "MAX_FOLDERS", 2)
    before = inotify_instances()
    with pytest.raises(TooManyFoldersError):
        FolderEvents(tree)
    assert inotify_instances() == before


def inotify_instances() -> int:
    """The inotify instances this process holds."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            count += str(fd.readlink()) == "anon_inode:inotify"
    return count


def test_a_new_folder_that_cannot_be_watched_makes_it_unknown_for_good(
    tree: Path, events: FolderEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that comes past a limit (`max_user_watches`, `MAX_FOLDERS`): no answer
    from then on (the caller turns to walks), never an exception into the turn."""
    monkeypatch.setattr(folder_events, "MAX_FOLDERS", 3)
    (tree / "new").mkdir()
    (tree / "new/a.txt").write_text("a")
    assert events.changes() is None
    assert events.broken
    (tree / "a.txt").write_text("later")
    assert events.changes() is None
