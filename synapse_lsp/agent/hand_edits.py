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
  Cost: two incremental snapshots for each model reply that runs commands, none for
  one that does not (`benchmarks/bench_hand_edits.py` measures one, per command).
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
from typing import Any

from synapse_lsp.checkpoints import Checkpoint, Checkpoints

log = logging.getLogger(__name__)

Probe = tuple[str, dict[str, dict[str, Any]]]  # a snapshot's tree and ignored entries


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
        self._since: Probe | None = None
        self._lost = False
        self._editor: set[str] = set()  # the user's edits the editor reported this turn

    @property
    def watching(self) -> bool:
        """A turn with a checkpoint runs: the editor's reports count."""
        return self._watching

    def begin(self, turn: int) -> None:
        """A turn starts: the first wait (for the first model reply) begins with it."""
        self._turn = turn
        self._watching = True
        self._acting = False
        self._since = None
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
            start = self._since or (current.before, current.ignored_before)
            lost = self._lost
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
            now = await running[0].probe()
            self._acting = False
            self._since, self._lost = now, now is None

    async def on_end(self, checkpoint: Checkpoint) -> None:
        """The turn's end snapshot is taken (`Checkpoints.on_end`): a wait still open
        ends there; the editor's reports join the record."""
        if not self._watching or checkpoint.turn != self._turn:
            return
        self._watching = False
        keeper = self._keeper()
        if keeper is None or checkpoint.after is None:
            return
        if not self._acting and not self._lost:
            start = self._since or (checkpoint.before, checkpoint.ignored_before)
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
