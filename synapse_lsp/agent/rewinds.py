"""A chat session's rewind: its files, its conversation, and one killed half-way.

`ChatSession.rewind` (one at a time, never while a turn runs) gives the turn here:

1. where the conversation is cut (`conversation_cut`: before the turn's prompt; after
   a compaction, when the turn is still whole among the kept messages);
2. the files go back (`Checkpoints.rewind`: decided, journaled with the cut, each
   file replaced by rename);
3. the conversation is cut (a `rewind` record in the store), then the journal goes.

A process killed in the middle leaves the journal: the session's next start (its
`resume`, in any face) finishes the files, the records and the cut (`recover`) and
tells what it could not do, as a notice kept in the session's replay.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from typing import Any, Protocol

from synapse_lsp.agent.history import estimate_tokens
from synapse_lsp.agent.loop import Loop
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.store import ChatStore, SavedChat
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.checkpoints import Checkpoint, Decide, RewindReport, journal
from synapse_lsp.errors import SynapseError
from synapse_lsp.events import Event, Notice, UserMessage
from synapse_lsp.router import BashRouter

log = logging.getLogger(__name__)

Message = dict[str, Any]


class RewindableChat(Protocol):
    """What a rewind uses of `session.ChatSession` (which calls it)."""

    id: str
    router: BashRouter
    checkpoints: TurnCheckpoints
    records: SessionRecords
    _loop: Loop


_REWINDING: weakref.WeakSet[Any] = weakref.WeakSet()


def busy_message(session: RewindableChat) -> str:
    """Why a rewind of a busy session is refused (nothing was changed)."""
    if session in _REWINDING:
        return (
            "Another rewind of this session is running: this one was not started "
            "(nothing was changed); see its result, then /checkpoints."
        )
    return "A turn (or a /compact) is running: rewind after it ends (or cancel it)."


def ends_with_text(message: Message, text: str) -> bool:
    """True when the message's last text block is `text` (a turn's prompt)."""
    content = message.get("content")
    if isinstance(content, str):
        return content == text
    if isinstance(content, list) and content:
        last = content[-1]
        return isinstance(last, dict) and last.get("text") == text
    return False


def conversation_cut(
    messages: list[Message], events: list[Event], target: Checkpoint
) -> int | None:
    """The index of the message that starts `target`'s turn (its prompt), or None when
    the turn is no longer whole in the history (a compaction summarised it).

    Before any compaction that is where the turn began (`target.messages`). After one,
    the turns it kept are found from the end: each later turn's prompt (the replay's
    user messages), newest first, then the target's own."""
    cut = target.messages
    if cut < len(messages) and _is_prompt(messages[cut], target.prompt):
        return cut
    prompts = [e.text for e in events[target.events :] if isinstance(e, UserMessage)]
    if not prompts or prompts[0] != target.prompt:
        return None
    at = len(messages)
    for prompt in reversed(prompts):
        at = next((i for i in range(at - 1, -1, -1) if _is_prompt(messages[i], prompt)), -1)
        if at < 0:
            return None
    return at


def _is_prompt(message: Message, prompt: str) -> bool:
    return message.get("role") == "user" and ends_with_text(message, prompt)


async def rewind(
    session: RewindableChat, turn: int, truncate: bool, decide: Decide | None
) -> RewindReport:
    """The files back as they were before `turn` and, with `truncate`, the conversation
    cut before it; the session is marked busy by the caller."""
    _REWINDING.add(session)
    try:
        return await _rewind(session, turn, truncate, decide)
    finally:
        _REWINDING.discard(session)


async def _rewind(
    session: RewindableChat, turn: int, truncate: bool, decide: Decide | None
) -> RewindReport:
    loop = session._loop
    records = session.records
    kept = {cp.turn: cp for cp in session.checkpoints.kept()}
    target = kept.get(turn)
    cut: int | None = None
    if truncate and target is not None:
        cut = conversation_cut(loop.messages, records.transcript, target)
    stored = records.store is not None and records.persisted
    plan = {"messages": cut, "events": target.events} if cut is not None and target else None
    report = await session.checkpoints.rewind(turn, decide, plan if stored else None)
    # Buffers the rewind put back go to disk too, as the agent's edits did (never a
    # buffer that holds the user's own unsaved edits): the editor saves them.
    reconcile = getattr(session.router.files, "reconcile", None)
    if reconcile is not None:
        with contextlib.suppress(Exception):
            await reconcile()
    if plan is not None and target is not None:
        kept_messages = loop.messages[: plan["messages"]]
        loop.messages = kept_messages
        loop.last_context_tokens = estimate_tokens(kept_messages)
        del records.transcript[target.events :]
        done = True
        if records.store is not None and stored:
            try:
                records.store.append_rewind(session.id, kept_messages, target.events)
            except (OSError, SynapseError) as exc:  # the journal stays: the next start cuts
                log.warning("cannot store the rewind: %s", exc)
                done = False
        if done and stored:
            session.checkpoints.rewind_done()
        report.truncated = True
    elif truncate and target is not None:
        report.problems.append(
            "The conversation was compacted since that turn (it is summarised): it is "
            "kept whole, and the next prompt follows it."
        )
    records.record(Notice(report.text().splitlines()[0]))
    return report


def recover(session: RewindableChat, store: ChatStore) -> SavedChat | None:
    """A rewind of this session killed half-way (its journal is there): finish its
    files, records and conversation cut now, keep a notice of what was done or could
    not be; the session as stored then (None: nothing to finish)."""
    try:
        keeper = session.checkpoints.keeper()
        found = journal.recover(keeper.git_dir, session.id, owner=True, limit=keeper.max_file_bytes)
    except OSError as exc:
        log.warning("cannot finish the interrupted rewind of %s: %s", session.id, exc)
        return None
    if found is None:
        return None
    lines = found.text()
    try:
        if found.conversation is not None:
            now = store.load(session.id)
            kept = now.messages[: found.conversation["messages"]]
            store.append_rewind(session.id, kept, found.conversation["events"])
            lines += f"\n  The conversation now ends before turn {found.turn}."
        store.append_event(session.id, Notice(lines, "warning"))
    except (OSError, SynapseError) as exc:
        log.warning("cannot finish the interrupted rewind of %s: %s", session.id, exc)
        return None
    journal.remove(keeper.git_dir, session.id)
    log.warning("%s", lines)
    return store.load(session.id)
