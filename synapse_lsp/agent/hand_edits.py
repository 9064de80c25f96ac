"""Whose changes a turn made: the agent's, or someone else's (issue 31, item 4).

A rewind puts back, unasked, only what the agent changed: its built-ins, its
commands, its hooks. Everything else a turn's checkpoint saw change is a conflict
(`checkpoints/restore.py`: `onConflict` asks or skips). Two sources tell them apart:

- **The folder at the edges of the agent's work.** The agent works from the first
  command after a model reply until its next model request begins: its commands and
  built-ins, their PreToolUse and PostToolUse hooks, sub-agents and parallel calls,
  and a turn's Stop hooks. While the model is asked (the first request of a turn
  included), nothing of the agent's runs. A probe of the folder (an incremental
  snapshot, `Checkpoints.probe`, the same machinery as the turn's own) is taken where
  such a wait begins (before a model request that follows commands) and where it
  ends (before the next command or Stop hook); whatever differs between the two was
  changed by someone else: the user in another editor, another program, or a
  background job the agent started earlier (`cmd &` writing between commands counts
  as the user's: a safe conflict). The turn's last wait ends at its end snapshot.
  A wait that begins after commands is watched by the kernel where it can
  (`checkpoints/folder_events.py`, inotify): the turn's first such wait opens a watch
  of every folder (in a thread; the turn's end closes it), each wait's start reads
  the events (the agent's work, set aside) and its end reads them again: those are
  someone else's. No walk of the folder, whatever its size. Events that cannot tell
  (an overflowing queue, a moved folder) send that wait to the safe side (what
  changed since the turn began counts); a watch that cannot be opened, or breaks (a
  limit reached), leaves the session to what follows.
  In a small folder (up to `fingerprints.STAT_ENTRIES` entries) a wait that begins
  after commands is otherwise watched by two walks of the folder's stat data
  (`fingerprints.folder_stat`: every entry's inode, size, mtime and ctime, no git
  process; in a thread, but on the event loop in a folder of at most `INLINE_WALK`
  entries, where the thread's hand-off costs more than the walk): what came, went or
  changed between them is someone else's (a superset of what a snapshot would call
  changed: a file only touched counts too, a safe conflict). Cost: one incremental
  snapshot a turn (the first wait's end), then two reads of the events per model
  reply that runs commands (two walks without events; in a folder too large to walk,
  two snapshots), none for one that does not (`benchmarks/bench_hand_edits.py`).
- **The editor, for open documents** (the LSP face, `lsp/feedback.py`): a
  `didChange` that is neither the echo of the agent's own edit nor a reload from disk,
  and a `didSave` of text the agent did not write, are the user's, even while the
  agent's command runs.

The paths found go in the turn's record (`Checkpoint.foreign`). The limit that
remains: a write by someone else to a file the editor does not hold open, made while
the agent's own command (or hook) runs, is taken for the agent's.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from synapse_lsp.checkpoints import Checkpoint, Checkpoints, fingerprints
from synapse_lsp.checkpoints.fingerprints import Stat, folder_stat, stat_changes
from synapse_lsp.checkpoints.folder_events import FolderEvents, TooManyFoldersError

log = logging.getLogger(__name__)

Probe = tuple[str, dict[str, dict[str, Any]]]  # a snapshot's tree and ignored entries

# The kernel's events (`FolderEvents`) where they can be had; tests turn them off to try
# the walks and snapshots that stand in for them.
EVENTS = True

# A folder whose last walk found at most this many entries is walked on the event loop:
# ~3 µs an entry against ~100 µs for a thread's hand-off there and back (2 cores).
INLINE_WALK = 32


def ignored_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> set[str]:
    """Ignored entries whose size or mtime differ (or that came or went)."""
    keys = set(before) | set(after)
    return {
        k
        for k in keys
        if (before.get(k, {}).get("size"), before.get(k, {}).get("mtime"))
        != (after.get(k, {}).get("size"), after.get(k, {}).get("mtime"))
    }


class HandEdits:
    """One chat session's guard: which of a turn's changes were not the agent's."""

    def __init__(self, keeper: Callable[[], Checkpoints | None]) -> None:
        self._keeper = keeper
        self._lock = asyncio.Lock()
        self._watching = False  # a turn with a checkpoint runs
        self._turn = 0  # its number
        self._acting = False  # the agent works (between a command and the next request)
        # Where the current wait began: None = the turn's own before snapshot; a failed
        # probe leaves it unknown (`_lost`), and that wait's changes go unattributed.
        # "events": the wait began with a read of the folder's events; "ended": the
        # turn's end read them (`turn_ends`).
        self._since: Probe | Stat | Literal["events", "ended"] | None = None
        self._lost = False
        self._events: FolderEvents | None = None  # the running turn's watch
        self._last: set[str] | None = None  # what its last read found (None: unknown)
        self._no_events = False  # the folder could not be watched: walks or snapshots
        self._big = False  # the folder was too large to walk: snapshots only
        self._entries: int | None = None  # what the last walk found (None: not walked)
        self._editor: set[str] = set()  # the user's edits the editor reported this turn

    @property
    def watching(self) -> bool:
        """A turn with a checkpoint runs: the editor's reports count."""
        return self._watching

    def begin(self, turn: int) -> None:
        """A turn starts: the first wait (for the first model reply) begins with it."""
        self._close_events()  # one left by a turn that did not end (cancelled early)
        self._turn = turn
        self._watching = True
        self._acting = False
        self._since = None
        self._last = None
        self._lost = False
        self._editor = set()

    def _current(self) -> tuple[Checkpoints, Checkpoint] | None:
        keeper = self._keeper()
        current = keeper._current if keeper is not None else None  # the running turn's
        if keeper is None or current is None or not self._watching:
            return None
        return keeper, current

    async def agent_acts(self) -> None:
        """Before a command or a Stop hook: the wait ends, what changed in it is not
        the agent's."""
        if self._acting or not self._watching:
            return
        async with self._lock:
            running = self._current()
            if self._acting or running is None:
                return
            keeper, current = running
            since, lost = self._since, self._lost
            if since == "events":  # the wait began with a read of the folder's events
                changed = self._events.changes() if self._events is not None else None
                if changed is not None:
                    self._acting = True
                    self._foreign(current, changed)
                    return
                if self._events is not None and self._events.broken:  # walks from now on
                    self._close_events()
                    self._no_events = True
                since = None  # unknown (see folder_events): as below, the safe side
            if isinstance(since, str):  # the watch is gone: the safe side too
                since = None
            if isinstance(since, dict):  # a walk began the wait: a walk ends it
                walked = await self._walk(keeper)
                if walked is not None:
                    self._acting = True
                    if not lost:
                        self._foreign(current, stat_changes(since, walked))
                    return
                # The folder grew too large to walk while the agent waited: whatever
                # changed since the turn began counts (the agent's own too: asked, safe).
                since = None
            start = since or (current.before, current.ignored_before)
            now = await keeper.probe()
            self._acting = True
            if now is not None and not lost:
                await self._note(keeper, current, start, now)

    async def agent_waits(self) -> None:
        """Before a model request: the agent's work since its last wait ends here."""
        if not self._acting:
            return
        async with self._lock:
            running = self._current()
            if not self._acting or running is None:
                return
            keeper = running[0]
            events = await self._open_events(keeper)
            if events is not None:
                events.changes()  # the agent's work, up to here: set aside
                self._acting = False
                self._since, self._lost = "events", False
                return
            now: Probe | Stat | None = await self._walk(keeper)
            if now is None:
                now = await keeper.probe()
            self._acting = False
            self._since, self._lost = now, now is None

    async def _open_events(self, keeper: Checkpoints) -> FolderEvents | None:
        """The turn's watch of the folder's events (opened in a thread: it lists every
        folder once), or None where they cannot be had (then never again this session)."""
        if self._events is not None or self._no_events or not EVENTS:
            return self._events
        try:
            self._events = await asyncio.to_thread(FolderEvents, keeper.root, keeper.home_rel)
        except (OSError, TooManyFoldersError) as exc:
            log.info("hand-edit guard: no events for %s (%s): walks instead", keeper.root, exc)
            self._no_events = True
        return self._events

    def _close_events(self) -> None:
        if self._events is not None:
            self._events.close(background=True)  # the kernel's grace period: off the loop
            self._events = None

    def close(self) -> None:
        """The session ends: its watch (if a turn left one) goes."""
        self._close_events()

    async def _walk(self, keeper: Checkpoints) -> Stat | None:
        """The folder's stat data (`folder_stat`), or None when it is too large to walk
        (then never again this session)."""
        if self._big:
            return None
        if self._entries is not None and self._entries <= INLINE_WALK:
            cap = min(INLINE_WALK * 4, fingerprints.STAT_ENTRIES)
            walked = folder_stat(keeper.root, keeper.home_rel, limit=cap)
            if walked is None and cap < fingerprints.STAT_ENTRIES:  # it grew: a thread walks
                walked = await asyncio.to_thread(folder_stat, keeper.root, keeper.home_rel)
        else:
            walked = await asyncio.to_thread(folder_stat, keeper.root, keeper.home_rel)
        self._big = walked is None
        self._entries = None if walked is None else len(walked)
        return walked

    def turn_ends(self) -> None:
        """The turn's last answer came (before its end snapshot): a wait the events
        began ends here, and the watch goes (closed in a thread, see `FolderEvents`)."""
        events, self._events = self._events, None
        if events is None:
            return
        if self._since == "events" and not self._acting:
            self._last = events.changes()
            self._since = "ended"
        events.close(background=True)

    async def on_end(self, checkpoint: Checkpoint) -> None:
        """The turn's end snapshot is taken (`Checkpoints.on_end`): a wait still open
        ends there; the editor's reports join the record."""
        if not self._watching or checkpoint.turn != self._turn:
            return
        self._watching = False
        self.turn_ends()  # if `TurnCheckpoints.finish` did not say so
        since, changed, self._last = self._since, self._last, None
        keeper = self._keeper()
        if keeper is None or checkpoint.after is None:
            return
        if self._acting or self._lost:
            pass
        elif since == "ended" and changed is not None:
            self._foreign(checkpoint, changed)
        elif isinstance(since, dict) and (walked := await self._walk(keeper)) is not None:
            self._foreign(checkpoint, stat_changes(since, walked))
        else:  # a snapshot began the wait, or the folder grew too large to walk (as above)
            start = since if isinstance(since, tuple) else None
            start = start or (checkpoint.before, checkpoint.ignored_before)
            await self._note(
                keeper, checkpoint, start, (checkpoint.after, checkpoint.ignored_after)
            )
        checkpoint.foreign = sorted(set(checkpoint.foreign) | self._editor)

    async def _note(
        self, keeper: Checkpoints, checkpoint: Checkpoint, start: Probe, now: Probe
    ) -> None:
        changed = ignored_changes(start[1], now[1])
        try:
            changed.update(path for _, path in await keeper._changes(start[0], now[0]))
        except Exception as exc:  # a guard that fails must not end the turn
            log.info("hand-edit guard: %s", exc)
            return
        self._foreign(checkpoint, changed)

    def _foreign(self, checkpoint: Checkpoint, changed: set[str]) -> None:
        if changed:
            log.info("changed while the agent waited (not its own): %s", sorted(changed))
            checkpoint.foreign = sorted(set(checkpoint.foreign) | changed)

    def editor_changed(self, path: Path) -> None:
        """The editor reported the user's own change of `path` (not the agent's edit)."""
        keeper = self._keeper()
        if not self._watching or keeper is None:
            return
        try:
            rel = Path(os.path.realpath(path)).relative_to(keeper.root).as_posix()
        except ValueError:
            return  # not in this session's folder
        self._editor.add(rel)
        if keeper._current is not None:
            keeper._current.foreign = sorted(set(keeper._current.foreign) | {rel})
