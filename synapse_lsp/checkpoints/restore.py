"""A rewind's files: decided, journaled, then put back one at a time by rename.

`Checkpoints.rewind` names the files the rewound turns changed; a `Restorer` decides
each (`plan`), then writes the journal and puts them back (`apply`,
`journal.py`). A file is put back without asking only when it holds
exactly what the last rewound turn left *and* nobody but the agent touched it during
those turns (`foreign`: the hand-edit guard's record, `agent/hand_edits.py`); any
other is a conflict: `decide` says whether to overwrite it, else it is skipped and
named. An open editor buffer gets the old text through the file gateway (an edit,
undoable), everything else is replaced by rename.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from synapse_lsp.checkpoints.journal import (
    OTHER,
    Step,
    blob_id,
    disk_id,
    inside,
    open_parent,
    put_at,
    target_id,
    temp_name,
    unlink_at,
)
from synapse_lsp.errors import SynapseError
from synapse_lsp.files import FileError, FileGateway

# Decides a conflict: the path, what it holds now vs what the turn left; True = overwrite.
Decide = Callable[[str], Awaitable[bool]]
# Awaited before each file a rewind puts back (its path): a stage for the crash tests.
Progress = Callable[[str], Awaitable[None]]

LS_TREE_CHUNK = 500  # paths per `git ls-tree` of a rewind's plan


@dataclass
class RewindReport:
    turn: int
    restored: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # changed by someone else: left as is
    overwritten: list[str] = field(default_factory=list)  # changed by someone, restored anyway
    not_restorable: list[str] = field(default_factory=list)
    repository_changed: bool = False
    truncated: bool = False
    problems: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"Rewound the files to before turn {self.turn}."]
        for label, paths in (
            ("restored", self.restored),
            ("removed (created by the turn)", self.deleted),
            ("restored over changes not the agent's", self.overwritten),
            (
                "skipped (changed by you or another program during or after the turn, "
                "not only by the agent; left as they are)",
                self.skipped,
            ),
            (
                "not restorable (ignored, too large, or a nested repository or submodule, "
                "which its own git keeps; changed)",
                self.not_restorable,
            ),
        ):
            if paths:
                lines.append(f"  {label}: {', '.join(paths)}")
        if not (self.restored or self.deleted or self.overwritten):
            lines.append("  No file needed restoring.")
        if self.repository_changed:
            lines.append(
                "  The git index or HEAD changed since then (git add/mv/commit): "
                "not undone; see `git status`."
            )
        if self.truncated:
            lines.append("  The conversation now ends before that turn.")
        lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "restored": self.restored,
            "deleted": self.deleted,
            "skipped": self.skipped,
            "overwritten": self.overwritten,
            "notRestorable": self.not_restorable,
            "repositoryChanged": self.repository_changed,
            "truncated": self.truncated,
            "problems": self.problems,
        }


class Store(Protocol):
    """What a rewind uses of `keeper.Checkpoints`."""

    root: Path
    files: FileGateway | None
    max_file_bytes: int

    async def _git(
        self, *args: str, stdin: bytes | None = None, check: bool = True, cwd: Path | None = None
    ) -> tuple[int, bytes, bytes]: ...

    def _under_home(self, rel: str) -> bool: ...


Entry = tuple[str, int]  # (blob id, mode) of a file in a snapshot's tree


class Restorer:
    """One rewind's files: `plan` each, then `apply` them all (after the journal)."""

    def __init__(
        self,
        store: Store,
        report: RewindReport,
        decide: Decide | None,
        progress: Progress | None = None,
    ) -> None:
        self.store = store
        self.root = store.root
        self.report = report
        self.decide = decide
        self.progress = progress
        self.steps: list[Step] = []
        self._overwrite: set[str] = set()
        self._tag = os.urandom(4).hex()

    async def entries(self, tree: str, paths: list[str]) -> dict[str, Entry]:
        """The files among `paths` in `tree` (a nested repository, a folder: not there)."""
        found: dict[str, Entry] = {}
        for at in range(0, len(paths), LS_TREE_CHUNK):
            chunk = paths[at : at + LS_TREE_CHUNK]
            _, out, _ = await self.store._git(
                "--literal-pathspecs", "ls-tree", "-r", "-z", tree, "--", *chunk, check=False
            )
            for line in out.decode("utf-8", "surrogateescape").split("\0"):
                if "\t" not in line:
                    continue
                meta, name = line.split("\t", 1)
                mode, kind, sha = meta.split(" ")
                if kind == "blob":
                    found[name] = (sha, int(mode, 8))
        return found

    async def _now(self, rel: str) -> tuple[str | None, bool]:
        """What `rel` holds now (`disk_id`'s terms): the editor's text when it has the
        file open, else the disk's; and whether the editor holds it."""
        if self.store.files is not None:
            try:
                text = await self.store.files.document_text(self.root / rel)
            except FileError:
                text = None
            if text is not None:
                return blob_id(text.encode("utf-8", "surrogatepass")), True
        return disk_id(self.root, rel, self.store.max_file_bytes), False

    async def plan(self, paths: list[str], base: str, last: str, foreign: set[str]) -> None:
        """Decide each file the rewound turns changed (asking `decide` about conflicts)."""
        before = await self.entries(base, paths)
        left = await self.entries(last, paths)
        for rel in paths:
            original = before.get(rel)
            want = target_id(*original) if original else None
            now, held = await self._now(rel)
            if now == want:
                continue  # already as it was
            left_id = target_id(*left[rel]) if rel in left else None
            if now == OTHER or now != left_id or rel in foreign:
                if self.decide is None or not await self.decide(rel):
                    self.report.skipped.append(rel)
                    continue
                self._overwrite.add(rel)
            if self.store._under_home(rel):
                self._refused(rel)
                continue
            sha, mode = original if original else (None, 0)
            editor = held and original is not None and not stat.S_ISLNK(mode)
            self._add(rel, sha, mode, editor)

    def _refused(self, rel: str) -> bool:
        if self.store._under_home(rel) or not inside(self.root, self.root / rel):
            self.report.problems.append(
                f"{rel}: a folder on its path now leads out of {self.root} (a link), or it "
                "is Synapse's own; not restored"
            )
            return True
        return False

    def _add(self, rel: str, blob: str | None, mode: int, editor: bool) -> None:
        was = disk_id(self.root, rel, self.store.max_file_bytes)
        self.steps.append(Step(rel, blob, mode, was, temp_name(rel, self._tag), editor))

    def plan_ignored(
        self,
        changed: set[str],
        before: dict[str, dict[str, Any]],
        last: dict[str, dict[str, Any]],
        foreign: set[str],
    ) -> None:
        """Ignored entries the turns changed: a small file kept whole is put back when it
        still is as the last turn left it and nobody else touched it; the others are
        reported."""
        for rel in sorted(changed):
            entry = before.get(rel)
            blob = entry.get("blob") if entry else None
            if entry is None or blob is None:
                self.report.not_restorable.append(rel)
                continue
            try:
                info = os.lstat(self.root / rel)
                now = {"size": info.st_size, "mtime": info.st_mtime_ns}
            except OSError:
                now = {}
            gone = last.get(rel, {})
            if (now.get("size"), now.get("mtime")) != (gone.get("size"), gone.get("mtime")):
                self.report.skipped.append(rel)  # changed again since the turn
                continue
            if rel in foreign:
                self.report.skipped.append(rel)  # changed during the turn, not by the agent
                continue
            if self.store._under_home(rel):
                self._refused(rel)
                continue
            self._add(rel, str(blob), stat.S_IFREG | int(entry.get("mode", 0o644)), False)

    async def apply(self, base: str) -> None:
        """Put each planned file back (the journal is written): by rename, or as an edit
        of the editor's buffer."""
        for step in self.steps:
            if self.progress is not None:
                await self.progress(step.path)
            if not step.editor and step.was != disk_id(
                self.root, step.path, self.store.max_file_bytes
            ):
                self.report.skipped.append(step.path)  # changed while the rewind asked
                continue
            if self._refused(step.path):  # checked now: an earlier step may have changed it
                continue
            try:
                if step.blob is None:
                    unlink_at(self.root, step.path)
                    self.report.deleted.append(step.path)
                    await self._remove_empty_parents(step.path, base)
                    continue
                _, data, _ = await self.store._git("cat-file", "blob", step.blob)
                if not (step.editor and await self._to_editor(step.path, data)):
                    put_at(self.root, step.path, data, step.mode, step.tmp)
            except (OSError, SynapseError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                self.report.problems.append(f"{step.path}: {why}")
                continue
            done = self.report.overwritten if step.path in self._overwrite else self.report.restored
            done.append(step.path)

    async def _to_editor(self, rel: str, data: bytes) -> bool:
        """An open buffer gets the text as an edit (undoable, unsaved); False when the
        bytes are not text or the buffer is gone."""
        files = self.store.files
        try:
            text = data.decode("utf-8") if b"\0" not in data[:8192] else None
        except UnicodeDecodeError:
            text = None
        path = self.root / rel
        if text is None or files is None or path.is_symlink():
            return False
        with contextlib.suppress(FileError):
            if await files.document_text(path) is not None:
                os.close(open_parent(self.root, rel, create=False))  # no link on the way
                await files.write(path, text)
                return True
        return False

    async def _remove_empty_parents(self, rel: str, base: str) -> None:
        """Folders the rewound turns created and left empty go too."""
        parts = rel.split("/")[:-1]
        while parts:
            folder = "/".join(parts)
            _, listed, _ = await self.store._git(
                "--literal-pathspecs", "ls-tree", base, "--", folder, check=False
            )
            if listed.strip():
                return  # it was there before the turn
            try:
                dfd = open_parent(self.root, folder, create=False)
                try:
                    os.rmdir(parts[-1], dir_fd=dfd)
                finally:
                    os.close(dfd)
            except OSError:
                return  # not empty, gone, or behind a link
            parts.pop()
