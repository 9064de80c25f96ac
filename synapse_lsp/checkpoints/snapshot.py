"""Taking a snapshot of the folder: what it stages, skips and notes.

A snapshot stages the folder's tracked and untracked files as the folder's own
`.gitignore` files see them, plus the text an editor holds unsaved for open files
(`open_texts` of the file gateway), skips files over `MAX_FILE_BYTES` (named in the
record, not restorable) and notes the ignored ones: each ignored entry (`.env`, a
local database; an ignored directory counts as one entry, by its own mtime) gets a
fingerprint, and small ignored files are kept whole up to `IGNORED_CAPTURE_BYTES`,
so a rewind can restore those and reports the others as not restorable. Nested
repositories and submodules get a fingerprint of their tree (`fingerprints.py`). A
new session's index starts from the folder's last snapshot (`seed.py`), so every
snapshot is incremental: git's stat cache re-reads only what changed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synapse_lsp.checkpoints.fingerprints import tree_fingerprint
from synapse_lsp.checkpoints.record import CheckpointError
from synapse_lsp.checkpoints.seed import seed_index
from synapse_lsp.checkpoints.store import GitStore
from synapse_lsp.files import FileGateway, read_regular

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 8 << 20  # a bigger file is not kept (a notice names it)
MAX_FILES = 100_000  # a folder with more files is not checkpointed at all
IGNORED_CAPTURE_BYTES = 64 << 10  # an ignored file this small is kept whole...
IGNORED_CAPTURE_TOTAL = 1 << 20  # ...up to this much per snapshot
IGNORED_CAPTURE_COUNT = 100  # ...and at most this many files
MAX_IGNORED_ENTRIES = 2000  # ignored entries fingerprinted (the rest are not watched)
MAX_NESTED_REPOS = 50  # nested repositories / submodules fingerprinted per snapshot
GC_EVERY = 25  # snapshots between background `git gc --auto`
# A `status --porcelain -z` record (each follows a NUL) that names a file to stage
# (new, or changed since the last snapshot: Y is M, D or T) or an ignored one.
_STATUS_RECORD = re.compile(rb"\0(\?\?|!!|[^\0][MDT]) ([^\0]+)")

Ignored = dict[str, dict[str, Any]]  # ignored entry -> its fingerprint (and kept blob)


def _z(path: str) -> bytes:
    """A path as `update-index -z --stdin` reads it."""
    return path.encode("utf-8", "surrogateescape") + b"\0"


class Snapshotter:
    """Takes the snapshots of one session's folder into its store (`take`)."""

    def __init__(self, store: GitStore, files: FileGateway | None, home_rel: str | None) -> None:
        self.store = store
        self.root = store.root
        self.files = files
        self.home_rel = home_rel  # $SYNAPSE_HOME inside the folder: never kept
        self.max_file_bytes = MAX_FILE_BYTES
        self.last_skipped: list[str] = []  # too large, at the last snapshot
        self.taken = 0
        # (the store's `index_writes`, the tree written then): a snapshot that changed
        # nothing in the index reuses the tree (no `write-tree`: one process less for
        # each of the hand-edit guard's probes that finds the folder as it was).
        self._tree: tuple[int, bytes] | None = None

    async def take(self) -> tuple[str, list[str], Ignored]:
        """(tree, paths skipped as too large, ignored entries' fingerprints)."""
        store = self.store
        await store.ensure()
        if not store.index.exists():  # a new session: from the folder's last snapshot
            self._tree = None
            await asyncio.to_thread(seed_index, store.git_dir, store.index)
        # One walk of the folder (git status: its stat cache, untracked cache and
        # threads) says what changed since the last snapshot, what is new, what is
        # ignored. The shadow store has no HEAD, so every kept file also shows as
        # "added" (X); Y is the work tree against the last snapshot.
        status = (
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching",
            "--no-renames",
        )  # fmt: skip
        try:
            _, out, _ = await store.git(*status)
        except CheckpointError as exc:
            if not store.index.exists():
                raise
            # The session's index is unreadable (its split index's shared part expired
            # while the session slept, a crash mid-write): start it anew, a full snapshot.
            log.warning(
                "checkpoint index of session %s unreadable (%s); rebuilt", store.session_id, exc
            )
            store.index.unlink()
            self._tree = None
            _, out, _ = await store.git(*status)
        candidates: list[str] = []
        ignored_listing: list[str] = []
        # Only the records that matter (of 10,000 "A " ones): a regex, 10x a Python loop.
        for xy, rel in _STATUS_RECORD.findall(b"\0" + out):
            name = rel.decode("utf-8", "surrogateescape")
            (ignored_listing if xy == b"!!" else candidates).append(name)
        if len(candidates) > MAX_FILES:
            raise CheckpointError(
                f"{self.root} has more than {MAX_FILES} files to keep; checkpoints are off "
                "for this session (open a smaller folder, or ignore build output in .gitignore)"
            )
        stage, skipped, gone, nested = self._sort(candidates)
        if skipped or gone:  # keep no stale copy of a file we no longer follow
            await store.git(
                "update-index", "--force-remove", "-z", "--stdin",
                stdin=b"".join(_z(p) for p in skipped + gone),
            )  # fmt: skip
        if stage:
            await store.git(
                "update-index", "--add", "--remove", "-z", "--stdin",
                stdin=b"".join(_z(p) for p in stage),
            )  # fmt: skip
        await self._overlay_open_texts()
        if self._tree is not None and self._tree[0] == store.index_writes:
            tree = self._tree[1]
        else:
            _, tree, _ = await store.git("write-tree")
            self._tree = (store.index_writes, tree)
        ignored = await self._ignored(sorted(ignored_listing))
        if nested:
            ignored.update(await asyncio.to_thread(self._nested_sync, sorted(nested)))
        self.taken += 1
        self.last_skipped = skipped
        if self.taken % GC_EVERY == 0:
            store.background_gc()
        # A snapshot is a tree (no commit object: nothing reads a history of them).
        return tree.decode().strip(), skipped, ignored

    def _sort(self, candidates: list[str]) -> tuple[list[str], list[str], list[str], list[str]]:
        """The paths git status named: (to stage, skipped as too large, no longer
        followed, nested repositories)."""
        stage: list[str] = []
        skipped: list[str] = []
        gone: list[str] = []
        nested: list[str] = []
        for rel in candidates:
            if rel.endswith("/"):  # a nested repository: git keeps it as a link only
                nested.append(rel)  # fingerprinted instead (`_nested_sync`)
                continue
            if self.beyond_link(rel):  # its folder became a link: the file is gone here
                gone.append(rel)
                continue
            try:
                info = os.lstat(self.root / rel)
            except FileNotFoundError:
                stage.append(rel)  # deleted: --remove drops it
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size > self.max_file_bytes:
                skipped.append(rel)
                continue
            if stat.S_ISDIR(info.st_mode):  # a file that became a directory
                gone.append(rel)
                continue
            stage.append(rel)
        return stage, skipped, gone, nested

    async def _overlay_open_texts(self) -> None:
        """What an editor holds unsaved for files of the folder is what the agent and
        the user see: stage that text instead of the disk's."""
        getter = getattr(self.files, "open_texts", None)
        if getter is None:
            return
        try:
            texts: Mapping[Path, str] = getter()
        except Exception:
            log.debug("open_texts failed", exc_info=True)
            return
        for path, text in texts.items():
            try:
                rel = Path(os.path.realpath(path)).relative_to(self.root)
            except ValueError:
                continue
            data = text.encode("utf-8", "surrogatepass")
            try:
                if (self.root / rel).read_bytes() == data:
                    continue
            except OSError:
                pass
            _, blob, _ = await self.store.git("hash-object", "-w", "--stdin", stdin=data)
            await self.store.git(
                "update-index", "--add", "--cacheinfo",
                f"100644,{blob.decode().strip()},{rel.as_posix()}",
            )  # fmt: skip

    async def _ignored(self, listing: list[str]) -> Ignored:
        """Fingerprints of the ignored entries (the first `MAX_IGNORED_ENTRIES`); small
        regular files kept whole. Read here, never by git from a name: a name is only
        ever a file of the folder (no FIFO, device or link followed), and git gets bytes."""
        if not listing:
            return {}
        return await asyncio.to_thread(self._ignored_sync, listing[:MAX_IGNORED_ENTRIES])

    def _ignored_sync(self, listing: list[str]) -> Ignored:
        entries: Ignored = {}
        budget, count = IGNORED_CAPTURE_TOTAL, IGNORED_CAPTURE_COUNT
        for rel in listing:
            name = rel.rstrip("/")
            if self.under_home(name):
                continue
            path = self.root / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            entry: dict[str, Any] = {"size": info.st_size, "mtime": info.st_mtime_ns}
            if stat.S_ISDIR(info.st_mode):
                entry = {"dir": True, "mtime": info.st_mtime_ns}
            elif (
                stat.S_ISREG(info.st_mode)
                and count > 0
                and info.st_size <= min(IGNORED_CAPTURE_BYTES, budget)
                and not self.beyond_link(name)
            ):
                try:
                    data = read_regular(path, IGNORED_CAPTURE_BYTES, follow=False)
                except OSError:
                    data = None
                if data is not None:
                    entry["blob"] = self.store.store_blob(data)
                    entry["mode"] = info.st_mode & 0o777
                    budget -= len(data)
                    count -= 1
            entries[name] = entry
        return entries

    def _nested_sync(self, listing: list[str]) -> Ignored:
        """Nested repositories and submodules (git keeps only a link to them): one entry
        each, `name/`, whose fingerprint changes when a file in them does; a rewind
        reports them as not restorable (their own git has their history)."""
        entries: Ignored = {}
        for rel in listing[:MAX_NESTED_REPOS]:
            name = rel.rstrip("/")
            if self.under_home(name) or self.beyond_link(name):
                continue
            entries[name + "/"] = {"nested": True, "size": 0, "mtime": tree_fingerprint(
                self.root / name)}  # fmt: skip
        return entries

    def ignored_tree(self, ignored: Ignored) -> str | None:
        """A tree of the blobs of the ignored files kept whole, written to the store
        (for a ref to make them reachable, as gc sees it); None when none was kept."""
        blobs = sorted({str(e["blob"]) for e in ignored.values() if e.get("blob")})
        if not blobs:
            return None
        tree = b"".join(b"100644 %s\0" % sha.encode() + bytes.fromhex(sha) for sha in blobs)
        return self.store.store_object(b"tree", tree)

    def under_home(self, rel: str) -> bool:
        """True for a path inside $SYNAPSE_HOME (when the folder holds it)."""
        home = self.home_rel
        return home is not None and (home == "." or rel == home or rel.startswith(home + "/"))

    def beyond_link(self, rel: str) -> bool:
        """True when a folder on `rel`'s path is a symbolic link."""
        parts = rel.split("/")[:-1]
        here = self.root
        for part in parts:
            here = here / part
            if here.is_symlink():
                return True
        return False
