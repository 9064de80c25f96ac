"""A chat session's checkpoints: one before and one after each turn (`checkpoints/`).

The snapshot before a turn starts with the turn and runs beside the first model
request; the session's router waits for it (`ready`) before any command runs, so
nothing the turn does can slip in first. The snapshot after a turn is taken at its
end, before `TurnFinished` (incremental: tens of milliseconds on a 10,000-file
folder; `benchmarks/bench_checkpoints.py`); `chat -p`'s one turn leaves it to the
session's close (`closes_after_turn`). Between the two, the hand-edit guard
(`hand_edits.py`) notes what someone other than the agent changed.

A turn's checkpoint has the session's turn number (`turn_numbers.py`). A rewind
killed half-way is finished by the next start (`checkpoints/journal.py`): the
session's own when it is resumed (`rewinds.py`), any other session's files when a
session of the same folder first uses its checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from synapse_lsp.agent import stages
from synapse_lsp.agent.hand_edits import HandEdits
from synapse_lsp.agent.turn_numbers import label
from synapse_lsp.checkpoints import (
    Checkpoint,
    CheckpointError,
    Checkpoints,
    Decide,
    RewindReport,
    journal,
    store_dir,
)
from synapse_lsp.config import Settings
from synapse_lsp.events import Notice
from synapse_lsp.files import FileGateway
from synapse_lsp.policy.secrets import child_env

log = logging.getLogger(__name__)

CLOSE_WAIT = 10.0  # how long closing a session waits for its last snapshot
FINISH_WAIT = 30.0  # how long a turn's end waits for the snapshot of what it left


class TurnCheckpoints:
    def __init__(
        self,
        session_id: Callable[[], str],
        root: Callable[[], Path],
        settings: Callable[[], Settings],
        records: Callable[[], Path | None],
        files: FileGateway,
        notify: Callable[[Notice], None],
    ) -> None:
        self._session_id = session_id
        self._root = root
        self._settings = settings
        self._records = records
        self._files = files
        self._notify = notify
        self._keeper: Checkpoints | None = None
        self._told: set[str] = set()  # what the user was already told (skipped files...)
        self.guard = HandEdits(lambda: self._keeper)
        # The session closes right after its turn (`chat -p`): the turn's end does not
        # wait for its "after" snapshot; the close does (as long as the turn would have),
        # while the shells end beside it.
        self.closes_after_turn = False

    @property
    def disabled(self) -> str | None:
        """Why checkpoints are off for this session (None: on, or none taken yet)."""
        return self._keeper.disabled if self._keeper is not None else None

    def keeper(self) -> Checkpoints:
        if self._keeper is None:
            home = self._settings().synapse_home
            records = self._records()
            if records is None:
                records = store_dir(home, self._root()) / "records" / self._session_id()
            settings = self._settings()
            self._keeper = Checkpoints(
                self._root(),
                home,
                self._session_id(),
                records,
                files=self._files,
                env=child_env(os.environ, settings),  # git gets no secret either
            )
            self._keeper.on_end = self.guard.on_end
            self._finish_others(self._keeper)
        return self._keeper

    def _finish_others(self, keeper: Checkpoints) -> None:
        """Rewinds of other sessions of this folder that were killed half-way: their
        files are finished now (their conversations when they are resumed)."""
        for other in journal.pending(keeper.git_dir):
            if other == keeper.session_id:
                continue  # ours: `rewinds.recover` does it when the session is resumed
            try:
                found = journal.recover(keeper.git_dir, other, owner=False)
            except OSError as exc:
                log.warning("interrupted rewind of session %s: %s", other, exc)
                continue
            if found is not None:
                self._notify(Notice(f"Session {other}: {found.text()}", "warning"))

    def begin(self, turn: int, messages: int, prompt: str, events: int) -> None:
        """Turn `turn` starts: photograph the folder (in the background). A record of
        that number or later (a session stored with an older numbering) is never
        overwritten: the turn then takes the next free number."""
        if not self._settings().checkpoints:
            return
        keeper = self.keeper()
        turn = max(turn, keeper.next_turn())
        keeper.begin_turn(turn, messages, prompt, events)
        self.guard.begin(turn)

    async def ready(self) -> None:
        """Before a command runs: the snapshot of the folder before the turn is taken."""
        await stages.at("snapshot")
        keeper = self._keeper
        if keeper is None:
            return
        await keeper.ready()
        if keeper.disabled is not None and "off" not in self._told:
            self._told.add("off")
            self._notify(Notice(f"Checkpoints are off: {keeper.disabled}", "warning"))
        new = [p for p in keeper.last_skipped if p not in self._told]
        if new:
            self._told.update(new)
            shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
            self._notify(
                Notice(
                    f"Not kept in checkpoints (over {keeper.max_file_bytes >> 20} MiB; a "
                    f"rewind cannot restore them): {shown}",
                    "warning",
                )
            )
        await self.guard.agent_acts()  # the agent's command runs next: a wait ends

    async def agent_acts(self) -> None:
        """A Stop hook runs next: what changed while the model was asked is not the
        agent's (`hand_edits.py`)."""
        if self._keeper is not None:
            await self._keeper.ready()
            await self.guard.agent_acts()

    async def agent_waits(self) -> None:
        """A model request starts: the agent's commands since the last one are done."""
        await self.guard.agent_waits()

    async def finish(self) -> None:
        """The turn ended: photograph what it left. Part of the turn (its end waits for
        it, bounded), so no snapshot outlives the turn that started it; with
        `closes_after_turn`, part of the session's close instead."""
        await stages.at("finish")
        if self._keeper is None:
            return
        self.guard.turn_ends()  # its watch goes while the snapshot is taken
        self._keeper.end_turn()
        if self.closes_after_turn:
            return
        try:
            async with asyncio.timeout(FINISH_WAIT):
                await self._keeper.settle()
        except TimeoutError:
            log.warning("the checkpoint after the turn takes long; it goes on in the background")

    def kept(self) -> list[Checkpoint]:
        if self._keeper is None and self._records() is None:
            return []
        return self.keeper().kept()

    async def rewind(
        self,
        turn: int,
        decide: Decide | None = None,
        conversation: dict[str, int] | None = None,
    ) -> RewindReport:
        """Rewind the files (`Checkpoints.rewind`); with `conversation` (the cut the
        session makes next) the journal stays until `rewind_done`."""

        async def progress(path: str) -> None:
            await stages.at("rewind_write", path)

        return await self.keeper().rewind(
            turn, decide, conversation=conversation, progress=progress
        )

    def rewind_done(self) -> None:
        """The session cut its conversation: the rewind's journal goes."""
        keeper = self.keeper()
        journal.remove(keeper.git_dir, keeper.session_id)

    async def close(self) -> None:
        """The session ends: the last turn's "after" snapshot is taken (bounded), the
        hand-edit guard's watch ends."""
        self.guard.close()
        await self.settle()

    async def settle(self) -> None:
        if self._keeper is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FINISH_WAIT if self.closes_after_turn else CLOSE_WAIT):
                    await self._keeper.settle()

    async def forget(self) -> None:
        """The session is deleted: its snapshots go too (`Checkpoints.forget`), once
        the one still running (if any) has ended."""
        if self._keeper is not None:
            with contextlib.suppress(OSError, CheckpointError):
                await self._keeper.forget()

    def listing(self) -> str:
        """`/checkpoints`: the kept turns and what each changed."""
        kept = self.kept()
        if not kept:
            if self._keeper is not None and self._keeper.disabled:
                return f"Checkpoints are off: {self._keeper.disabled}"
            return "No checkpoints yet (one is taken before each turn)."
        lines = []
        for cp in kept:
            prompt = label(cp.prompt)
            if cp.after is None:
                what = "(running or not finished)"
            elif not cp.changed and not cp.ignored_changed:
                what = "no files changed"
            else:
                names = [
                    f"{'+' if s == 'A' else '-' if s == 'D' else '~'}{p}" for s, p in cp.changed
                ]
                names += [f"!{p}" for p in cp.ignored_changed]
                what = " ".join(names[:8]) + (
                    f" (+{len(names) - 8} more)" if len(names) > 8 else ""
                )
            lines.append(f'  turn {cp.turn}  "{prompt}": {what}')
        return "\n".join(
            [
                "Checkpoints (/rewind N puts the files back as they were before turn N;"
                " + created, ~ changed, - removed, ! ignored file):",
                *lines,
            ]
        )


REWIND_USAGE = "Usage: /rewind TURN [--keep-chat] [--force] (see /checkpoints)"


def _chat_session(host: object) -> object | None:
    getter = getattr(host, "chat_session", None)
    return getter() if callable(getter) else None


async def checkpoints_command(host: object, arg: str) -> str:
    session = _chat_session(host)
    checkpoints = getattr(session, "checkpoints", None)
    if not isinstance(checkpoints, TurnCheckpoints):
        return "/checkpoints is not available here (no chat session)."
    return checkpoints.listing()


async def rewind_command(host: object, arg: str) -> str:
    """`/rewind TURN [--keep-chat] [--force]`: files changed since are skipped unless
    --force; the conversation is cut before the turn unless --keep-chat."""
    from synapse_lsp.errors import SynapseError

    session = _chat_session(host)
    rewind = getattr(session, "rewind", None)
    if rewind is None:
        return "/rewind is not available here (no chat session)."
    words = arg.split()
    flags = {w for w in words if w.startswith("--")}
    rest = [w for w in words if not w.startswith("--")]
    unknown = flags - {"--keep-chat", "--force"}
    if unknown or len(rest) != 1 or not rest[0].isdigit():
        return (
            REWIND_USAGE if not unknown else f"Unknown option {sorted(unknown)[0]}. {REWIND_USAGE}"
        )
    force = "--force" in flags

    async def overwrite(path: str) -> bool:
        return force

    try:
        report: RewindReport = await rewind(
            int(rest[0]), truncate="--keep-chat" not in flags, decide=overwrite
        )
    except SynapseError as exc:
        return exc.message
    text = report.text()
    if report.skipped and not force:
        text += "\n  (/rewind " + rest[0] + " --force restores those too)"
    return text
