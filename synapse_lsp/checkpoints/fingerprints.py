"""Fingerprints of what a snapshot does not keep as files: a nested repository's
tree (`tree_fingerprint`), the user's repository index and HEAD
(`repo_fingerprint`), and which ignored entries changed between two snapshots
(`ignored_changes`). All read by walking or reading small files, never by running
git in the user's repositories.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from synapse_lsp.files import read_regular

NESTED_ENTRIES = 20_000  # entries of one nested repository walked for its fingerprint


def tree_fingerprint(top: Path, limit: int = NESTED_ENTRIES) -> str:
    """A hash of every entry's path, kind, size and mtime under `top` (its `.git` left
    out, links not followed, at most `limit` entries). Read by walking, never by running
    git there: a nested repository's config is the agent's to write, and `git status`
    would run what it names (`core.fsmonitor`)."""
    digest = hashlib.sha1(usedforsecurity=False)
    seen = 0
    stack = [top]
    while stack and seen < limit:
        folder = stack.pop()
        try:
            with os.scandir(folder) as items:
                entries = sorted(items, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            seen += 1
            digest.update(
                f"{entry.path}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0".encode(
                    "utf-8", "surrogateescape"
                )
            )
            if stat.S_ISDIR(info.st_mode):
                stack.append(Path(entry.path))
    return digest.hexdigest()


def ignored_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> list[str]:
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k, {}).get("mtime") != after.get(k, {}).get("mtime")
                  or before.get(k, {}).get("size") != after.get(k, {}).get("size"))  # fmt: skip


def repo_fingerprint(root: Path) -> str | None:
    """The user's repository index and HEAD, as a fingerprint (read only)."""
    git = root / ".git"
    parts: list[str] = []
    for name in ("index", "HEAD"):
        target = git / name
        try:
            if name == "HEAD":  # small regular files only: never a FIFO or a device
                head = read_regular(target, 4096, follow=False).decode(errors="replace")
                parts.append(head.strip())
                ref = head.strip()[5:] if head.startswith("ref: ") else ""
                if ref.startswith("refs/") and ".." not in ref.split("/"):
                    with contextlib.suppress(OSError):
                        data = read_regular(git / ref, 4096, follow=False)
                        parts.append(data.decode(errors="replace").strip())
            else:
                info = target.lstat()
                parts.append(f"{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "|".join(parts) if git.exists() else None


STAT_ENTRIES = 5_000  # a folder walked for `folder_stat`, at most (past it: None)

Stat = dict[str, tuple[int, int, int, int, int]]  # path -> mode, ino, size, mtime, ctime


def folder_stat(root: Path, skip: str | None = None, limit: int | None = None) -> Stat | None:
    """Every entry under `root` (relative path -> mode, inode, size, mtime, ctime; links
    not followed), `.git` folders and `skip` (a relative folder: Synapse's home) left out,
    as a snapshot leaves them out; None past `limit` entries. Two of them tell what
    changed between them (`stat_changes`) with no git process: the hand-edit guard's
    cheap probe of a small folder (`agent/hand_edits.py`)."""
    limit = STAT_ENTRIES if limit is None else limit
    found: Stat = {}
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        folder, rel = stack.pop()
        try:
            with os.scandir(folder) as items:
                entries = list(items)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            if path == skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[path] = (
                info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
            )  # fmt: skip
            if len(found) > limit:
                return None
            if stat.S_ISDIR(info.st_mode):
                stack.append((entry.path, path))
    return found if len(found) <= limit else None


def stat_changes(before: Stat, after: Stat) -> set[str]:
    """The paths that came, went or changed between two `folder_stat`s (a directory whose
    entries changed is left out: its entries say what)."""
    changed = set(before.keys() ^ after.keys())
    changed |= {p for p in before.keys() & after.keys() if before[p] != after[p]}
    return {p for p in changed if not stat.S_ISDIR((after.get(p) or before[p])[0])}
