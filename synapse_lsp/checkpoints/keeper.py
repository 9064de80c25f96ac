"""`Checkpoints`, the checkpoints of one session in one folder: the facade that owns
the helpers (`store.GitStore`, `snapshot.Snapshotter`, `records.Records`) and runs
a turn's two snapshots, the records, a rewind and a deleted session's cleanup.

Each turn gets a snapshot before it (started in the background as the turn begins;
a command waits for it, `ready`) and one after it, each a tree of the shadow store
named by a ref, and one record (`record.Checkpoint`) naming the two trees, the
number of history messages before the turn and what changed. The user's repository
index and HEAD are fingerprinted too: a rewind reports a `git mv`, `git add` or
commit made since, and never undoes it.

`rewind(turn)` restores the files the turns since `turn` changed to what they were
before it, only where a file still holds what the last turn left and nobody but the
agent changed it during those turns (`foreign`: agent/hand_edits.py); any other file
is a conflict: `decide` says whether to overwrite it, else it is skipped. A journal
is written first and each file is replaced by rename (`restore.py`, `journal.py`);
an editor's buffers get the old text as an edit through the file gateway (undoable,
unsaved), never behind their back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from synapse_lsp.checkpoints import journal
from synapse_lsp.checkpoints.fingerprints import ignored_changes, repo_fingerprint
from synapse_lsp.checkpoints.record import Checkpoint, CheckpointError
from synapse_lsp.checkpoints.records import Records
from synapse_lsp.checkpoints.restore import Decide, Progress, Restorer, RewindReport
from synapse_lsp.checkpoints.snapshot import Ignored, Snapshotter
from synapse_lsp.checkpoints.store import GitStore, store_dir
from synapse_lsp.files import FileGateway

log = logging.getLogger(__name__)

READY_WAIT = 120.0  # a command waits this long for the snapshot before its turn


async def forget_session(synapse_home: Path, root: Path, session_id: str) -> None:
    """A deleted session's snapshots of `root` go too (`Checkpoints.forget`)."""
    records = store_dir(synapse_home, root) / "records" / session_id
    with contextlib.suppress(CheckpointError, OSError):
        await Checkpoints(root, synapse_home, session_id, records).forget()


class Checkpoints:
    """The checkpoints of one session in one folder."""

    def __init__(
        self,
        root: Path,
        synapse_home: Path,
        session_id: str,
        records: Path,
        *,
        files: FileGateway | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        home = Path(os.path.realpath(synapse_home))
        # $SYNAPSE_HOME inside the folder (the folder is $HOME): never kept, never restored.
        self.home_rel: str | None = None
        if home == self.root or self.root in home.parents:
            self.home_rel = home.relative_to(self.root).as_posix() if home != self.root else "."
        # git's environment is `env`, without secrets (None: ours, no credentials).
        self.store = GitStore(
            self.root, store_dir(synapse_home, self.root), session_id,
            env=env, home_rel=self.home_rel,
        )  # fmt: skip
        self.snapshots = Snapshotter(self.store, files, self.home_rel)
        self.git_dir = self.store.git_dir
        self.session_id = session_id
        self.records = records
        self.turn_records = Records(records)
        self.files = files
        self.index = self.store.index
        self.disabled: str | None = None  # why, once checkpoints are off for the session
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        self._current: Checkpoint | None = None
        self._forgotten = False  # the session is deleted: nothing more is kept
        # Awaited with the turn's record once its end snapshot is taken, before it is
        # written (the hand-edit guard adds what changed since the agent's last command).
        self.on_end: Callable[[Checkpoint], Awaitable[None]] | None = None

    @property
    def max_file_bytes(self) -> int:
        """A file bigger than this is not kept (`snapshot.MAX_FILE_BYTES`)."""
        return self.snapshots.max_file_bytes

    @max_file_bytes.setter
    def max_file_bytes(self, value: int) -> None:
        self.snapshots.max_file_bytes = value

    @property
    def last_skipped(self) -> list[str]:
        """The files too large to keep, at the last snapshot."""
        return self.snapshots.last_skipped

    # ---------------------------------------------- what a rewind and the guard use

    async def _git(
        self, *args: str, stdin: bytes | None = None, check: bool = True, cwd: Path | None = None
    ) -> tuple[int, bytes, bytes]:
        return await self.store.git(*args, stdin=stdin, check=check, cwd=cwd)

    def _under_home(self, rel: str) -> bool:
        return self.snapshots.under_home(rel)

    async def _changes(self, a: str, b: str) -> list[tuple[str, str]]:
        return await self.store.changes(a, b)

    # ------------------------------------------------------------- snapshots

    async def _snapshot(self, label: str) -> tuple[str, list[str], Ignored]:
        """(tree, paths skipped as too large, ignored entries' fingerprints)."""
        return await self.snapshots.take()

    async def _keep_ignored(self, turn: int, phase: str, ignored: Ignored) -> None:
        """Make the ignored files kept whole reachable, as gc sees it: a tree of their
        blobs named by a ref beside the snapshot's (no tree or ref named them; any gc
        could drop them, and a rewind could not restore `.env`)."""
        tree = self.snapshots.ignored_tree(ignored)
        if tree is not None:
            await self._update_ref(turn, f"{phase}-ignored", tree)

    async def _update_ref(self, turn: int, phase: str, tree: str) -> None:
        """Keep the snapshot from gc: a ref naming its tree (none once forgotten)."""
        if self._forgotten:
            return
        self.store.write_ref(f"{turn}-{phase}", tree)

    # ------------------------------------------------------------------ turns

    def begin_turn(self, turn: int, messages: int, prompt: str = "", events: int = 0) -> None:
        """Start the snapshot of the folder before `turn` (in the background: the model
        request goes on meanwhile; `ready()` waits for it before a command runs)."""
        if self.home_rel == ".":
            self.disabled = f"{self.root} is $SYNAPSE_HOME itself"
        if self.disabled is not None:
            return
        previous = self._pending
        self._pending = asyncio.create_task(self._begin(turn, messages, prompt, events, previous))

    async def _begin(
        self,
        turn: int,
        messages: int,
        prompt: str,
        events: int,
        previous: asyncio.Task[None] | None,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is its own; our cancel is ours
        async with self._lock:
            try:
                commit, skipped, ignored = await self._snapshot(f"before turn {turn}")
                await self._update_ref(turn, "before", commit)
                await self._keep_ignored(turn, "before", ignored)
            except (CheckpointError, OSError) as exc:
                self.disabled = str(exc)
                log.warning("checkpoints off: %s", exc)
                return
            self._current = Checkpoint(
                turn=turn,
                before=commit,
                messages=messages,
                started_at=time.time(),
                prompt=prompt,
                events=events,
                skipped=skipped,
                ignored_before=ignored,
                repo_before=repo_fingerprint(self.root),
            )
            self._write(self._current)

    async def ready(self) -> None:
        """Wait for the snapshot in progress (before a command may change the folder);
        one that takes over `READY_WAIT` turns checkpoints off for the session."""
        pending = self._pending
        if pending is not None and not pending.done():
            # asyncio.wait, not wait_for: Python 3.11's wait_for drops a cancel that comes
            # as the snapshot ends, and the command would run in a cancelled turn.
            done, _ = await asyncio.wait({pending}, timeout=READY_WAIT)
            if not done:
                self.disabled = (
                    f"the snapshot of {self.root} took over {READY_WAIT:.0f} s; checkpoints "
                    "are off for this session"
                )
            elif not pending.cancelled() and pending.exception() is not None:
                log.debug("snapshot failed", exc_info=pending.exception())

    def end_turn(self) -> None:
        """Start the snapshot of what the turn left (in the background)."""
        if self.disabled is not None or self._pending is None:
            return
        previous = self._pending
        self._pending = asyncio.create_task(self._end(previous))

    async def _end(self, previous: asyncio.Task[None]) -> None:
        await asyncio.wait([previous])
        async with self._lock:
            current, self._current = self._current, None
            if current is None or self.disabled is not None:
                return
            try:
                commit, skipped, ignored = await self._snapshot(f"after turn {current.turn}")
                await self._update_ref(current.turn, "after", commit)
                await self._keep_ignored(current.turn, "after", ignored)
                current.after = commit
                current.skipped = sorted(set(current.skipped) | set(skipped))
                current.ignored_after = ignored
                current.repo_after = repo_fingerprint(self.root)
                current.changed = await self._changes(current.before, commit)
                current.ignored_changed = ignored_changes(current.ignored_before, ignored)
                if self.on_end is not None:
                    await self.on_end(current)
            except (CheckpointError, OSError) as exc:
                log.warning("checkpoint after turn %d: %s", current.turn, exc)
            self._write(current)
            await self._prune()

    async def probe(self) -> tuple[str, dict[str, dict[str, Any]]] | None:
        """The folder now, during a turn: a snapshot's tree and ignored entries, kept in
        no record or ref (the hand-edit guard compares two); None when none is taken."""
        if self.disabled is not None or self._current is None:
            return None
        async with self._lock:
            try:
                tree, _, ignored = await self._snapshot("probe")
            except (CheckpointError, OSError) as exc:
                log.info("checkpoint probe: %s", exc)
                return None
        return tree, ignored

    async def settle(self) -> None:
        """Wait for every snapshot started so far."""
        while self._pending is not None and not self._pending.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._pending)

    # ---------------------------------------------------------------- records

    def _write(self, checkpoint: Checkpoint) -> None:
        if not self._forgotten:
            self.turn_records.write(checkpoint)

    def kept(self) -> list[Checkpoint]:
        """The kept checkpoints, oldest first."""
        return self.turn_records.kept()

    def next_turn(self) -> int:
        return self.turn_records.next_turn()

    async def _prune(self) -> None:
        dropped = [old.turn for old in self.turn_records.over_limit()]
        if not dropped:
            return
        await self.store.drop_turns(dropped)
        self.turn_records.remove(dropped)

    async def forget(self) -> None:
        """The session is deleted: drop its snapshots (refs, index, records kept in the
        store), then collect what only they kept (old file versions, small ignored
        files such as `.env`: `GitStore.forget`). A snapshot still running (the
        session's last) names nothing once it ends."""
        if "/" in self.session_id or self.session_id in ("", ".", ".."):
            return
        self._forgotten = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READY_WAIT):
                await self.settle()
        with contextlib.suppress(OSError):
            self.index.unlink()
        shutil.rmtree(self.git_dir / "records" / self.session_id, ignore_errors=True)
        journal.forget(self.git_dir, self.session_id)  # a rewind it left unfinished
        await self.store.forget()

    # ----------------------------------------------------------------- rewind

    async def rewind(
        self,
        turn: int,
        decide: Decide | None = None,
        *,
        conversation: dict[str, int] | None = None,
        progress: Progress | None = None,
    ) -> RewindReport:
        """Put back the files the turns since `turn` changed, as they were before it:
        decided (conflicts asked), journaled, then each replaced by rename
        (`restore.py`, `journal.py`). With `conversation` (the session's cut) the
        journal stays for the session to finish (`journal.remove`)."""
        try:
            await asyncio.wait_for(self.settle(), READY_WAIT)
        except TimeoutError:
            raise CheckpointError(
                f"a snapshot of {self.root} is still being taken after {READY_WAIT:.0f} s; "
                "nothing was rewound"
            ) from None
        kept = self.kept()
        since = [c for c in kept if c.turn >= turn]
        if not since or since[0].turn != turn:
            have = ", ".join(str(c.turn) for c in kept) or "none"
            raise CheckpointError(f"no checkpoint before turn {turn} (kept: {have})")
        async with self._lock:
            with journal.locked(self.git_dir, self.session_id) as free:
                if not free:
                    raise CheckpointError("a rewind of this session is already running")
                return await self._rewind(since, decide, conversation, progress)

    async def _rewind(
        self,
        since: list[Checkpoint],
        decide: Decide | None,
        conversation: dict[str, int] | None,
        progress: Progress | None,
    ) -> RewindReport:
        base, turn = since[0], since[0].turn
        last_after = since[-1].after
        if last_after is None:  # the last turn did not finish its snapshot
            last_after, _, _ = await self._snapshot(f"rewind of {turn}")
        touched: set[str] = set()
        ignored: set[str] = set()
        foreign: set[str] = set()
        for cp in since:
            changes = await self._changes(cp.before, cp.after or last_after)
            touched.update(path for _, path in changes)
            ignored.update(cp.ignored_changed)
            foreign.update(cp.foreign)
        report = RewindReport(turn)
        restorer = Restorer(self, report, decide, progress)
        await restorer.plan(sorted(touched), base.before, last_after, foreign)
        restorer.plan_ignored(ignored, base.ignored_before, since[-1].ignored_after, foreign)
        if restorer.steps or conversation is not None:  # written before any file changes
            journal.Journal(
                self.session_id, turn, str(self.root), str(self.records), str(self.index),
                restorer.steps, conversation,
            ).write(journal.journal_path(self.git_dir, self.session_id))  # fmt: skip
        await restorer.apply(base.before)
        too_large = {p for cp in since for p in cp.skipped}
        report.not_restorable.extend(sorted(too_large - set(report.not_restorable)))
        now = repo_fingerprint(self.root)
        report.repository_changed = base.repo_before is not None and now != base.repo_before
        # The rewound turns are gone; the next snapshot starts from the folder as it is.
        self.turn_records.remove(cp.turn for cp in since)
        with contextlib.suppress(OSError):
            self.index.unlink()
        if conversation is None:
            journal.remove(self.git_dir, self.session_id)
        return report
