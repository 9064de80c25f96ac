"""A live chat session's stored conversation: its title, its replay and its records.

`ChatSession` owns one `SessionRecords`, the one writer of the session's records in
the store (store.py): the events kept for replay (`transcript`), the model's
messages, compactions, usage and offloaded outputs, the title, and where the turns'
checkpoint records go. It holds the store's lock state: `locked` is set while another
process writes the session (the session is read-only), and `claim` tries the lock
again before a turn (or a `/compact`) changes anything.

Nothing here fails a conversation: a store that refuses a write (a full disk, a
damaged store) is logged and the session goes on; one that cannot create the session
at its first turn leaves it unsaved, said once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from synapse_lsp.agent.history import Message
from synapse_lsp.agent.pricing import Spend
from synapse_lsp.agent.store import CHECKPOINTS, DEFAULT_TITLE, SessionLockedError
from synapse_lsp.errors import SynapseError
from synapse_lsp.events import Event, UserMessage

if TYPE_CHECKING:
    from synapse_lsp.agent.store import ChatStore, SavedChat
    from synapse_lsp.config import Settings

log = logging.getLogger(__name__)


class SessionRecords:
    """What a live session keeps of itself, and writes to its stored conversation."""

    def __init__(
        self,
        store: ChatStore | None,
        session_id: str,
        settings: Callable[[], Settings],
        workspace: Callable[[], str],
    ) -> None:
        """`workspace`: the folder a new stored session is created for."""
        self.store = store
        self.id = session_id
        self._settings = settings
        self._workspace = workspace
        self.title = DEFAULT_TITLE
        self.transcript: list[Event] = []  # the events kept for replay
        self.persisted = store is not None and store.exists(session_id)
        # Set while another process writes this stored session (we are read-only).
        self.locked: SessionLockedError | None = None

    def path(self) -> str:
        """The stored conversation's file ("" without a store): what hooks are told."""
        return str(self.store.path(self.id)) if self.store is not None else ""

    def checkpoint_records(self) -> Path | None:
        """Where the turns' checkpoint records go (None: not stored)."""
        if self.store is None or not self.persisted:
            return None
        return self.store.folder(self.id) / CHECKPOINTS

    def claim(self, reload: Callable[[SavedChat], None]) -> SessionLockedError | None:
        """Be the stored session's writer before the turn changes anything; the error when
        another process is. A read-only session that gets the lock reloads the session
        first (`reload`: the other process may have added to it)."""
        if self.store is None or not self.persisted:
            return None  # nothing stored yet: `begin` creates (and locks) it
        try:
            self.store.lock(self.id)
        except SessionLockedError as exc:
            self.locked = exc
            return exc
        if self.locked is not None:
            self.locked = None
            reload(self.store.load(self.id))
        return None

    def begin(self, text: str) -> str | None:
        """Record the user's text (creating the stored session on the first turn); what
        to tell the user when the session cannot be saved (a full disk, a damaged
        store), else None."""
        unsaved: str | None = None
        if self.title == DEFAULT_TITLE:
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            if first:
                self.title = first if len(first) <= 60 else first[:59] + "\u2026"
                if self.store is not None and self.persisted:
                    try:
                        self.store.set_title(self.id, self.title)
                    except (OSError, SynapseError) as exc:
                        log.warning("cannot store the title: %s", exc)
        if self.store is not None and not self.persisted:
            workspace = self._workspace()
            try:
                self.store.create(self.id, self.title, workspace)
            except (OSError, SynapseError) as exc:
                unsaved = f"This session is not saved: {exc}"
                log.warning("%s", unsaved)
                self.store = None  # not retried each event: once said, it stays unsaved
            else:
                self.persisted = True
                self._prune()
        self.record(UserMessage(text))
        return unsaved

    def _prune(self) -> None:
        """With a cap on stored sessions (`maxSessions`), remove the oldest beyond it
        (never this one, one live in another process, or one with checkpoints)."""
        cap = self._settings().max_sessions
        if self.store is None or cap <= 0:
            return
        try:
            removed = self.store.prune(cap, keep={self.id})
        except (OSError, SynapseError) as exc:  # pruning is housekeeping: never fail a turn
            log.warning("cannot prune stored sessions: %s", exc)
            return
        if removed:
            log.info("pruned %d stored session(s) over maxSessions=%d", len(removed), cap)

    def record(self, event: Event) -> None:
        """Keep an event for replay (and store it)."""
        self.transcript.append(event)
        if self.store is not None and self.persisted:
            try:
                self.store.append_event(self.id, event)
            except (OSError, SynapseError) as exc:  # a full disk must not end the conversation
                log.warning("cannot store event: %s", exc)

    def message(self, message: Message) -> None:
        if self.store is not None and self.persisted:
            try:
                self.store.append_message(self.id, message)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store message: %s", exc)

    def compaction(self, messages: list[Message]) -> None:
        if self.store is not None and self.persisted:
            try:
                self.store.append_compaction(self.id, messages)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store compaction: %s", exc)

    def usage(self, spend: Spend) -> None:
        if self.store is not None and self.persisted:
            try:
                self.store.append_usage(self.id, spend)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store usage: %s", exc)

    def offload(self, tool_use_id: str, text: str) -> str | None:
        """Compaction's `Offload`: the output saved in the session folder; None without
        a stored session (or when the disk refuses)."""
        if self.store is None or not self.persisted:
            return None
        try:
            return str(self.store.write_offload(self.id, tool_use_id, text))
        except (OSError, SynapseError) as exc:
            log.warning("cannot offload a tool output: %s", exc)
            return None
