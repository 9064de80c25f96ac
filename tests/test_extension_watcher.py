"""The extension watcher (extensions/watcher.py) on real inotify: it watches what
holds extensions in `$SYNAPSE_HOME` (skills/, mcp/, the home itself), not the session
records and checkpoint store beside them; skills/ and mcp/ may appear, go and come back."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from synapse_lsp.extensions.watcher import ExtensionWatcher

GUARD = 20.0  # seconds: a hang guard, never what a test measures


async def _until(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + GUARD
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"hang guard: {what}"
        await asyncio.sleep(0.02)


def _watched_inodes() -> set[int]:
    """The inodes this process's inotify instances watch (/proc/self/fdinfo)."""
    found: set[int] = set()
    for fd in os.listdir("/proc/self/fd"):  # noqa: PTH208
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":  # noqa: PTH115
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("inotify wd:"):
                field = next(f for f in line.split() if f.startswith("ino:"))
                found.add(int(field[4:], 16))
    return found


def _started(home: Path) -> tuple[ExtensionWatcher, list[set[str]]]:
    """A running watcher of `home` and the kinds of change it reported, in order."""
    seen: list[set[str]] = []

    async def changed(kinds: set[str]) -> None:
        seen.append(kinds)

    watcher = ExtensionWatcher(home, None, changed)
    watcher.start()
    return watcher, seen


async def test_only_what_holds_extensions_is_watched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "skills" / "tool" / "scripts").mkdir(parents=True)
    (home / "mcp").mkdir()
    busy = [home / "checkpoints" / "objects" / f"{i:02x}" for i in range(20)]
    busy += [home / "sessions" / "s1", home / "outputs"]
    for folder in busy:
        folder.mkdir(parents=True)
    watcher, seen = _started(home)
    try:
        wanted = {p.stat().st_ino for p in (home, home / "skills", home / "skills" / "tool")}
        await _until(lambda: wanted <= _watched_inodes(), "the watches")
        assert not {p.stat().st_ino for p in busy} & _watched_inodes()
        (busy[0] / "abc").write_text("an object")
        (home / "skills" / "tool" / "scripts" / "run.sh").write_text("echo hi\n")
        await _until(lambda: {"skills"} in seen, "the skill's change")
        assert all(kinds <= {"skills", "mcp"} for kinds in seen)
    finally:
        await watcher.stop()


async def test_skills_and_mcp_folders_may_appear_go_and_come_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    watcher, seen = _started(home)
    try:
        await asyncio.sleep(0.2)  # the watches are up (nothing to see yet)
        (home / "mcp").mkdir()
        await _until(lambda: any("mcp" in k for k in seen), "mcp/ appearing")
        await asyncio.sleep(0.3)  # its own watch is up: a file in it is a change of its own
        seen.clear()
        (home / "mcp" / "mcp_servers.json").write_text("{}")
        await _until(lambda: any("mcp" in k for k in seen), "mcp_servers.json")
        for _ in range(2):  # gone and back at once, its files written with it
            if (home / "skills").exists():
                shutil.rmtree(home / "skills")
            seen.clear()
            (home / "skills" / "new" / "scripts").mkdir(parents=True)
            (home / "skills" / "new" / "SKILL.md").write_text("---\nname: new\n---\n")
            await _until(lambda: any("skills" in k for k in seen), "skills/ back")
            await asyncio.sleep(0.3)
            seen.clear()
            (home / "skills" / "new" / "scripts" / "later.sh").write_text("echo later\n")
            await _until(lambda: any("skills" in k for k in seen), "a file written later")
    finally:
        await watcher.stop()
    assert all(t.done() for t in watcher._tasks) and watcher._tasks == []


async def test_a_watch_that_fails_is_tried_again_after_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inotify refusing (its limits) is retried every 0.5 s, never in a busy loop."""
    import watchfiles

    home = tmp_path / "home"
    (home / "skills").mkdir(parents=True)
    tries: list[Path] = []
    real = watchfiles.awatch

    def awatch(root: Path, **kwargs: object) -> object:
        if root == home / "skills":
            tries.append(root)
            raise OSError(28, "inotify watch limit reached")
        return real(root, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watchfiles, "awatch", awatch)

    async def changed(kinds: set[str]) -> None:
        pass

    watcher = ExtensionWatcher(home, None, changed)
    watcher.start()
    try:
        await asyncio.sleep(1.2)
    finally:
        await watcher.stop()
    assert 1 <= len(tries) <= 4, len(tries)
