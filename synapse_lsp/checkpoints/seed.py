"""A new session's first checkpoint starts from the folder's last snapshot.

Each session keeps its own index in the folder's shadow store (`store.py`), and
a snapshot is incremental through it: git's stat cache re-reads only the files whose
size, times or inode changed since that index was written. A new session had no
index, so its first snapshot hashed the whole folder again (0.9 s for 10,000 files,
with the first command of the chat waiting for it). Its index now starts as a copy of
the index the store wrote last (another session's, that is the folder's last
snapshot): the first snapshot then re-reads only what changed since, as any later one
does (`benchmarks/bench_checkpoints.py`). The copy is only a cache: an entry whose
file's stat data differs is hashed again, the copy keeps the original's mtime (so
git's racy-entry check sees what it saw), and an index git cannot read (its shared
part expired) is dropped by the snapshot, which then starts from nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def latest_index(git_dir: Path, own: Path) -> Path | None:
    """The session index of the store written last (not `own`), if any."""
    best: tuple[int, Path] | None = None
    try:
        entries = list(os.scandir(git_dir))
    except OSError:
        return None
    for entry in entries:
        name = entry.name
        if not name.startswith("index-") or name.endswith(".lock") or name == own.name:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        newer = best is None or info.st_mtime_ns > best[0]
        if newer and entry.is_file(follow_symlinks=False) and info.st_size > 0:
            best = (info.st_mtime_ns, Path(entry.path))
    return best[1] if best is not None else None


def seed_index(git_dir: Path, index: Path) -> bool:
    """Give a session without an index (`index`) a copy of the store's latest one;
    True when it got one."""
    if index.exists():
        return False
    source = latest_index(git_dir, index)
    if source is None:
        return False
    partial = index.with_name(f"{index.name}.seed-{os.getpid()}.synapse-tmp")
    try:
        shutil.copy2(source, partial)  # with its mtime: git's racy-entry check agrees
        partial.replace(index)
    except OSError as exc:
        log.info("checkpoint index not seeded from %s: %s", source.name, exc)
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True
