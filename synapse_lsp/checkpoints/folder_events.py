"""What changed under a folder, as the kernel reports it (inotify, through
`inotify_simple`): the hand-edit guard's probe of a wait (`agent/hand_edits.py`).

Every directory of the folder is watched (`.git` folders and Synapse's home left out,
as a snapshot leaves them out; symbolic links not followed). `changes()` returns the
paths that came, went or changed (content or metadata: a `touch` counts) since its
last call, read from the kernel's queue with no walk of the folder: the events of a
change are queued before the call that made it returns, so a read sees every change
made before it, exactly. A directory that comes is watched at once and its entries
count as changed (they may have been made before the watch).

`changes()` returns None when it cannot tell: the kernel's queue overflowed (more than
`max_queued_events` changes since the last read), or a directory moved (the paths of
its old entries are not known). The folder is watched afresh then; the caller falls
back to a snapshot. Opening raises `OSError` where inotify cannot watch the folder
(another system, `max_user_instances` or `max_user_watches` reached) and
`TooManyFoldersError` past `MAX_FOLDERS` directories: the caller walks instead.

Not seen: a change made through a path outside the folder (a hard link elsewhere),
a write through a memory mapping (until the file is written or touched otherwise),
a change a network file system's server makes for another client.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from pathlib import Path

import inotify_simple
from inotify_simple import INotify, flags

if inotify_simple._libc is None:  # its own look-up of libc runs `ldconfig -p` (a process)
    inotify_simple._libc = ctypes.CDLL(None, use_errno=True)  # the process's libc

MAX_FOLDERS = 20_000  # directories watched, at most (past it: TooManyFoldersError)

_MASK = (
    flags.MODIFY
    | flags.ATTRIB
    | flags.CLOSE_WRITE
    | flags.CREATE
    | flags.DELETE
    | flags.MOVED_FROM
    | flags.MOVED_TO
    | flags.MOVE_SELF
    | flags.DONT_FOLLOW
    | flags.ONLYDIR
)
_GONE = {errno.ENOENT, errno.ENOTDIR}  # a directory gone (or replaced) before its watch


class TooManyFoldersError(Exception):
    """The folder has more than `MAX_FOLDERS` directories."""


class FolderEvents:
    """The changes under `root` (its relative folder `skip` left out)."""

    def __init__(self, root: Path, skip: str | None = None) -> None:
        self.root = root
        self.skip = skip
        self._inotify = INotify(nonblocking=True)
        self._folders: dict[int, str] = {}  # watch descriptor -> relative folder
        self.broken = False  # a folder that came could not be watched: no answer any more
        try:
            self._watch("")
        except BaseException:
            self.close()
            raise

    def close(self, background: bool = False) -> None:
        """End the watch. The kernel waits for a grace period before it lets go of the
        watches (10-20 ms here): `background` does that in a thread (the turn's end, which
        a `chat -p` exit follows, goes on meanwhile)."""
        if background:
            threading.Thread(target=self._inotify.close, name="synapse-unwatch").start()
        else:
            self._inotify.close()

    def _watch(self, top: str) -> set[str]:
        """Watch `top` and every directory under it; return the other entries under it."""
        found: set[str] = set()
        stack = [top]
        while stack:
            rel = stack.pop()
            folder = self.root / rel if rel else self.root
            try:
                # The watch first, then the listing: an entry made in between is in both.
                wd = self._inotify.add_watch(folder, _MASK)
                items = list(os.scandir(folder))
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                raise
            self._folders[wd] = rel
            if len(self._folders) > MAX_FOLDERS:
                raise TooManyFoldersError(f"more than {MAX_FOLDERS} folders")
            for entry in items:
                path = f"{rel}/{entry.name}" if rel else entry.name
                if entry.name == ".git" or path == self.skip:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
                else:
                    found.add(path)
        return found

    def changes(self) -> set[str] | None:
        """The files (and other non-directory entries) that came, went or changed since
        the last call; None when that cannot be told (see the module's docstring), and
        from then on when a new folder cannot be watched (`broken`: a limit reached)."""
        if self.broken:
            return None
        try:
            return self._changes()
        except (OSError, TooManyFoldersError):
            self.broken = True
            return None

    def _changes(self) -> set[str] | None:
        changed: set[str] = set()
        unknown = False
        for event in self._inotify.read(timeout=0):
            mask = event.mask
            if mask & flags.Q_OVERFLOW or mask & flags.MOVE_SELF:
                unknown = True
                continue
            if mask & flags.IGNORED:  # the watch ended (its directory went)
                self._folders.pop(event.wd, None)
                continue
            rel = self._folders.get(event.wd)
            if rel is None or not event.name:
                continue
            path = f"{rel}/{event.name}" if rel else event.name
            if event.name == ".git" or path == self.skip:
                continue
            if not mask & flags.ISDIR:
                changed.add(path)
            elif mask & flags.MOVED_FROM:
                unknown = True  # its entries went, under paths not known here
            elif mask & (flags.CREATE | flags.MOVED_TO):
                changed |= self._watch(path)
        if unknown:
            self._folders.clear()
            self._watch("")  # afresh: a watch already there keeps its descriptor
            return None
        return changed
