"""A chat session: one conversation, one turn at a time, as a stream of events.

One core, two faces: the REPL and the LSP server both consume `ChatSession.run_turn`'s
event stream (events.py). A turn runs in a worker task that feeds a queue, so
events from inside a tool call (live output, plan updates, a sub-agent's whole
stream) reach the consumer while the call is still running, and `cancel()` can
interrupt any await: the model stream is closed, the running command is
interrupted (cancelling the task awaiting `router.route` interrupts it), and the
history is repaired so every `tool_use` has a `tool_result`.

With a store, a session is its stored conversation's one writer (store.py): it takes
the store's lock when it is created or resumed and releases it on `close()`. A
session resumed while another process writes it is **read-only** (`read_only`): its
messages and transcript can be read and replayed, and each turn first tries the
lock again — while another process holds it the turn ends at once with
TurnFinished("error", …) saying so; once the lock is free the session reloads what
the other process wrote and goes on. `ChatSession.fork` continues a copy under a
new id instead.

The parts: `loop.py` (the per-turn model <-> router loop), `history.py` (message
rules), `compaction.py`, `subagents.py` (`task:<type>`), `transcript.py` (what is
stored for replay). Their public names are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import instructions as instructions_
from synapse_lsp.agent import prompts, rewinds, stages
from synapse_lsp.agent.compaction import (
    COMPACT_RATIO,
    DEFAULT_CONTEXT_WINDOW,
    KEEP_RECENT_TURNS,
    CompactionSettings,
    compact,
)
from synapse_lsp.agent.context import ContextReport, measure
from synapse_lsp.agent.editor_notes import EditorFeedback
from synapse_lsp.agent.event_queue import EventQueue
from synapse_lsp.agent.history import (
    CANCELLED_RESULT,
    INTERRUPTED_RESULT,
    NOT_RUN_RESULT,
    Message,
    add_message,
    estimate_tokens,
    repair_history,
)
from synapse_lsp.agent.loop import Emit, Loop, LoopResult
from synapse_lsp.agent.pricing import Cost, Spend, context_window, merged, spend_cost
from synapse_lsp.agent.skill_enhance import BackgroundSkills, Job, last_turn, tool_calls
from synapse_lsp.agent.store import CHECKPOINTS, DEFAULT_TITLE, SessionLockedError, new_session_id
from synapse_lsp.agent.subagents import run_subagent
from synapse_lsp.agent.transcript import Recorder
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.agent.turn_numbers import count_turns
from synapse_lsp.checkpoints import Decide, RewindReport
from synapse_lsp.commands import CommandOutput, FailureCategory
from synapse_lsp.config import as_source
from synapse_lsp.errors import ModelError, SessionBusyError, SynapseError
from synapse_lsp.events import NO_ANSWER, Event, Notice, TurnFinished, Usage, UserMessage
from synapse_lsp.files import uri_to_path
from synapse_lsp.policy.hooks import HookScope, context_block, of_gate
from synapse_lsp.policy.hooks import current as hook_scope
from synapse_lsp.policy.hooks import enter as enter_hook_scope

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.agent.store import ChatStore, SavedChat
    from synapse_lsp.config import Settings, SettingsSource
    from synapse_lsp.router import BashRouter

__all__ = [
    "CANCELLED_RESULT",
    "COMPACT_RATIO",
    "DEFAULT_CONTEXT_WINDOW",
    "INTERRUPTED_RESULT",
    "KEEP_RECENT_TURNS",
    "MAX_SELECTION_CHARS",
    "NOT_RUN_RESULT",
    "Attachment",
    "ChatSession",
    "Emit",
    "LoopResult",
    "Message",
    "Selection",
    "TurnContext",
    "add_message",
    "context_text",
    "estimate_tokens",
    "repair_history",
]

log = logging.getLogger(__name__)

MAX_SELECTION_CHARS = 20_000


@dataclass(frozen=True)
class Selection:
    uri: str
    text: str
    # LSP range, 0-based, as the editor sent it
    start_line: int
    start_character: int
    end_line: int
    end_character: int


@dataclass(frozen=True)
class Attachment:
    """A resource the client attached to the prompt (ACP: an embedded resource, whose
    `text` the model gets, or a resource link, `text` None: the model is told of it)."""

    uri: str
    text: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class TurnContext:
    """What the editor knows, given to the model alongside the user's text."""

    active_file: str | None = None
    selection: Selection | None = None
    open_files: tuple[str, ...] = field(default_factory=tuple)
    attachments: tuple[Attachment, ...] = field(default_factory=tuple)


def _uri_to_path(uri: str) -> str:
    path = uri_to_path(uri, resolve=False)
    return uri if path is None else str(path)


def context_text(context: TurnContext) -> str | None:
    """The editor context as the model sees it, or None when there is nothing to say."""
    lines: list[str] = []
    if context.active_file:
        lines.append(f"Active file: {_uri_to_path(context.active_file)}")
    if context.open_files:
        lines.append("Open files: " + ", ".join(_uri_to_path(f) for f in context.open_files))
    sel = context.selection
    if sel is not None and sel.text:
        text = sel.text
        if len(text) > MAX_SELECTION_CHARS:
            text = text[:MAX_SELECTION_CHARS] + "\n[... selection cut ...]"
        lines.append(
            f"Selected text in {_uri_to_path(sel.uri)} (lines {sel.start_line + 1}-"
            f"{sel.end_line + 1}):\n```\n{text}\n```"
        )
    budget = MAX_SELECTION_CHARS * 5  # all attached text together
    for item in context.attachments:
        where = _uri_to_path(item.uri)
        if item.text is None:
            lines.append(f"Referenced: {where}" + (f" ({item.name})" if item.name else ""))
            continue
        text = item.text
        if len(text) > min(budget, MAX_SELECTION_CHARS * 2):
            text = text[: max(0, min(budget, MAX_SELECTION_CHARS * 2))] + "\n[... cut ...]"
        budget -= len(text)
        lines.append(f"Attached {where}:\n```\n{text}\n```")
    if not lines:
        return None
    return prompts.editor_context_text("\n".join(lines))


class _TurnIterator:
    """The stream of one turn. Closing it (or leaving the `async for`) cancels the turn."""

    def __init__(self, gen: AsyncIterator[Event], release: Callable[[], None]) -> None:
        self._gen = gen
        self._release = release
        self._started = False

    def __aiter__(self) -> _TurnIterator:
        return self

    async def __anext__(self) -> Event:
        self._started = True
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        if not self._started:
            self._release()
        closer = getattr(self._gen, "aclose", None)
        if closer is not None:
            await closer()


class ChatSession:
    """One conversation. One turn at a time; `run_turn` while busy raises SessionBusyError."""

    def __init__(
        self,
        router: BashRouter,
        settings: Settings | SettingsSource,
        *,
        model: ModelClient | None = None,
        store: ChatStore | None = None,
        session_id: str | None = None,
        workspace_root: Path | None = None,
        context_window: int | None = None,
    ) -> None:
        """`context_window`: tokens; None = the model's (pricing.MODELS, per turn)."""
        self.id = session_id or new_session_id()
        self.settings_source = as_source(settings)
        self.store = store
        self.workspace_root = workspace_root
        self.title = DEFAULT_TITLE
        self.usage = Usage()
        self.spend: Spend = {}  # the session's usage per model (stored as usage records)
        self.last_turn_spend: Spend = {}
        self._window = context_window
        self._model = model
        self._owns_model = False  # a client we built ourselves is ours to close
        self._persisted = store is not None and store.exists(self.id)
        # Set while another process writes this stored session (we are read-only).
        self._locked: SessionLockedError | None = None
        self._busy = False
        self._worker: asyncio.Task[None] | None = None
        self._emit: Emit = _drop
        self._transcript: list[Event] = []
        self._system_cache: list[dict[str, Any]] | None = None
        self._instructions: instructions_.Found | None = None
        self._cwd = router.shell.cwd
        self.checkpoints = TurnCheckpoints(
            lambda: self.id,
            lambda: self.workspace_root or self._cwd,
            self.settings_source,
            self._checkpoint_records,
            router.files,
            lambda notice: self._notify(notice),
        )
        self.router = router.derive(
            subagent=self._run_subagent,
            in_subagent=False,
            before_command=self.checkpoints.ready,
        )
        self._loop = Loop(
            router=self.router,
            settings=self.settings_source,
            model=self._ensure_model,
            system=self._system,
            context_window=context_window or DEFAULT_CONTEXT_WINDOW,
            on_message=self._store_message,
            on_compaction=self._store_compaction,
            todo_reminder=True,
        )
        self._loop.offload = self._offload
        self._loop.before_request = self.checkpoints.agent_waits  # hand_edits.py
        # What the editor reports after the agent's edits (problems, the user's changes),
        # noted once to the model by the loop.
        self.feedback = EditorFeedback(
            enabled=lambda: self.settings.editor_feedback,
            root=workspace_root,
            tool_running=lambda: self._loop.current_tool_call_id is not None,
        )
        self._loop.notes = self.feedback.take
        # Hooks (hooks.py): the folder's, as its permission gate carries them; run for
        # this session's turns (`_work` makes them the turn's `HookScope`).
        self.hooks = of_gate(router.permission)
        self._hook_source = "startup"  # SessionStart's `source` ("resume" when resumed)
        self._hooks_started = False
        # `/skill enhance on|off` for this session (None: the `skillEnhance` setting), and
        # its background run (skill_enhance.py); notices from it wait in `_pending` for a
        # turn to show them in.
        self.skill_enhance: bool | None = None
        self._skills = BackgroundSkills(f"session-{self.id}")
        self._pending: list[Event] = []

    @property
    def settings(self) -> Settings:
        return self.settings_source()

    # ------------------------------------------------------------ public API

    @classmethod
    def resume(
        cls,
        store: ChatStore,
        session_id: str,
        router: BashRouter,
        settings: Settings | SettingsSource,
        *,
        model: ModelClient | None = None,
        workspace_root: Path | None = None,
    ) -> ChatSession:
        """A stored session made live again (SessionNotFoundError if there is none).

        It becomes the session's writer; if another process writes it, it is read-only
        (`read_only`; see the module docstring) — never an error here."""
        locked: SessionLockedError | None = None
        try:
            store.lock(session_id)  # before reading: nobody appends behind our back
        except SessionLockedError as exc:
            locked = exc
        try:
            stored = store.load(session_id)
            root = workspace_root
            if root is None and stored.info.workspace:
                root = Path(stored.info.workspace)
            session = cls(
                router,
                settings,
                model=model,
                store=store,
                session_id=session_id,
                workspace_root=root,
            )
        except BaseException:
            if locked is None:
                store.close(session_id)
            raise
        session._locked = locked
        if locked is None:  # a rewind killed half-way is finished first (rewinds.py)
            stored = rewinds.recover(session, store) or stored
        session._restore(stored)
        session._hook_source = "resume"
        return session

    @classmethod
    def fork(
        cls,
        store: ChatStore,
        session_id: str,
        router: BashRouter,
        settings: Settings | SettingsSource,
        *,
        model: ModelClient | None = None,
        workspace_root: Path | None = None,
        new_id: str | None = None,
    ) -> ChatSession:
        """A copy of a stored session under a new id, live and writable — the way to go on
        with a conversation another process is writing."""
        info = store.fork(session_id, new_id)
        return cls.resume(
            store, info.id, router, settings, model=model, workspace_root=workspace_root
        )

    def _restore(self, stored: SavedChat) -> None:
        self.title = stored.info.title
        self._loop.messages = repair_history(stored.messages)
        self._loop.last_context_tokens = estimate_tokens(self._loop.messages)
        self._transcript = list(stored.events)
        self.usage = Usage()
        for event in stored.events:
            if isinstance(event, TurnFinished):
                self.usage = self.usage + event.usage
        # Sessions stored before usage records: their tokens, under no model (no price).
        self.spend = dict(stored.usage) if stored.usage is not None else {"": self.usage}
        if stored.usage is not None:
            self.usage = spend_cost(self.spend).usage
        self.last_turn_spend = {}

    @property
    def read_only(self) -> bool:
        """True while another process writes this stored session (as of the last try)."""
        return self._locked is not None

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def turns(self) -> int:
        """The turns so far: the next prompt is turn `turns + 1` (turn_numbers.py)."""
        return count_turns(self._transcript)

    @property
    def messages(self) -> list[Message]:
        """The model's view of the history (API message dicts)."""
        return self._loop.messages

    def transcript(self) -> list[Event]:
        """Stored events for replay (text coalesced), user prompts as UserMessage."""
        return list(self._transcript)

    def run_turn(self, text: str, context: TurnContext | None = None) -> AsyncIterator[Event]:
        """Stream the turn's events; the last one is always a TurnFinished."""
        if self._busy:
            raise SessionBusyError(
                "This chat session is already running a turn: wait for it to finish or cancel it."
            )
        self._busy = True
        return _TurnIterator(self._turn(text, context), self._release)

    def cancel(self) -> None:
        """Stop the running turn: interrupt the command, close the stream; the
        iterator ends with TurnFinished(stop_reason="cancelled")."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    async def close(self) -> None:
        self.cancel()
        await self._skills.aclose()  # a background enhancement still running ends here
        if self._worker is not None:
            with contextlib.suppress(BaseException):
                await self._worker
        await self.checkpoints.settle()  # the last turn's "after" snapshot
        if self.store is not None:
            self.store.close(self.id)
        if self._owns_model and self._model is not None:
            model, self._model, self._owns_model = self._model, None, False
            with contextlib.suppress(Exception):
                await model.close()

    # ------------------------------------------------------------ checkpoints

    def _checkpoint_records(self) -> Path | None:
        if self.store is None or not self._persisted:
            return None
        return self.store.folder(self.id) / CHECKPOINTS

    async def rewind(
        self, turn: int, *, truncate: bool = True, decide: Decide | None = None
    ) -> RewindReport:
        """Put the folder's files back as they were before `turn` (checkpoints.py) and,
        with `truncate`, end the conversation before that turn (a `rewind` record in the
        store: the history and the replay both end before the turn)."""
        if self._busy:
            raise SessionBusyError(rewinds.busy_message(self))
        if self.read_only:
            raise SynapseError("This session is read-only here (another process writes it).")
        self._busy = True  # no turn starts while files and history are put back
        try:
            return await rewinds.rewind(self, turn, truncate, decide)
        finally:
            self._busy = False

    # -------------------------------------------------------------- the turn

    def _release(self) -> None:
        self._busy = False

    async def _turn(self, text: str, context: TurnContext | None) -> AsyncIterator[Event]:
        queue = EventQueue()  # bounded: merges and, past a cap, drops live output
        recorder = Recorder(self._record)

        def emit(event: Event) -> None:
            self.feedback.observe(event)
            recorder.add(event)
            queue.put_nowait(event)

        worker = queue.feed_from(self._work(text, context, emit, recorder, queue))
        self._worker = worker
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            if not worker.done():
                worker.cancel()
            with contextlib.suppress(BaseException):
                await worker
            self._worker = None
            self._emit = _drop
            self._busy = False

    async def _work(
        self,
        text: str,
        context: TurnContext | None,
        emit: Emit,
        recorder: Recorder,
        queue: EventQueue,
    ) -> None:
        self._emit = emit
        enter_hook_scope(self._hook_scope(emit))
        for pending in self._pending:  # what background work said meanwhile
            emit(pending)
        self._pending.clear()
        finished: TurnFinished
        try:
            locked = self._claim()
            if locked is not None:  # read-only: nothing of this turn is kept or stored
                queue.put_nowait(TurnFinished("error", Usage(), locked.message))
                queue.put_nowait(None)
                return
            await stages.at("prompt_hooks")
            blocked, hooked = await self._prompt_hooks(text)
            if blocked is not None:  # a hook blocked the prompt: nothing of it is kept
                queue.put_nowait(TurnFinished("error", Usage(), blocked))
                queue.put_nowait(None)
                return
            unsaved = self._begin(text)
            if unsaved is not None:  # said once, in one line; the conversation goes on
                queue.put_nowait(Notice(unsaved, "warning"))
            self.checkpoints.begin(
                self.turns, len(self._loop.messages), text, len(self._transcript) - 1
            )
            self._loop.model_usage = {}
            content: list[dict[str, Any]] = []
            extra = context_text(context) if context is not None else None
            if extra:
                content.append({"type": "text", "text": extra})
            content += hooked
            content.append({"type": "text", "text": text})
            try:
                self._loop.context_window = self._window or context_window(
                    self._ensure_model().model
                )
            except ModelError as exc:
                self._loop.add({"role": "user", "content": content})
                finished = TurnFinished("error", Usage(), exc.message)
            else:
                try:
                    result = await self._stop_hooks(await self._loop.run(content, emit), emit)
                    silent = result.stop_reason == "end_turn" and not result.final_text.strip()
                    finished = TurnFinished(
                        result.stop_reason,  # type: ignore[arg-type]
                        result.usage,
                        note=NO_ANSWER if silent else None,
                    )
                except ModelError as exc:  # said once, by TurnFinished's error
                    finished = TurnFinished("error", self._loop.turn_usage, exc.message)
        except asyncio.CancelledError:
            finished = TurnFinished("cancelled", self._loop.turn_usage)
        except Exception as exc:  # a bug must end the turn visibly, never hang the face
            log.exception("turn failed")
            finished = TurnFinished(
                "error", self._loop.turn_usage, f"internal error: {type(exc).__name__}: {exc}"
            )
        self.usage = self.usage + finished.usage
        self._add_spend(self._loop.model_usage)
        # A cancel that comes as the turn ends (`/exit` typed ahead, Ctrl-C): the turn is
        # over either way; its end snapshot goes on in the background, and the face must
        # still get TurnFinished (else it waits forever).
        with contextlib.suppress(asyncio.CancelledError):
            await self.checkpoints.finish()
        recorder.flush()
        recorder.add(finished)
        queue.put_nowait(finished)
        queue.put_nowait(None)
        self._after_turn(finished)  # after the turn's last event: it never delays it

    def _claim(self) -> SessionLockedError | None:
        """Be the stored session's writer before the turn changes anything; the error when
        another process is. A read-only session that gets the lock reloads the session
        first (the other process may have added to it)."""
        if self.store is None or not self._persisted:
            return None  # nothing stored yet: `_begin` creates (and locks) it
        try:
            self.store.lock(self.id)
        except SessionLockedError as exc:
            self._locked = exc
            return exc
        if self._locked is not None:
            self._locked = None
            self._restore(self.store.load(self.id))
        return None

    def _begin(self, text: str) -> str | None:
        """Record the user's text (creating the stored session on the first turn); what
        to tell the user when the session cannot be saved (a full disk, a damaged
        store), else None."""
        unsaved: str | None = None
        if self.title == DEFAULT_TITLE:
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            if first:
                self.title = first if len(first) <= 60 else first[:59] + "\u2026"
                if self.store is not None and self._persisted:
                    try:
                        self.store.set_title(self.id, self.title)
                    except (OSError, SynapseError) as exc:
                        log.warning("cannot store the title: %s", exc)
        if self.store is not None and not self._persisted:
            workspace = str(self.workspace_root or self._cwd)
            try:
                self.store.create(self.id, self.title, workspace)
            except (OSError, SynapseError) as exc:
                unsaved = f"This session is not saved: {exc}"
                log.warning("%s", unsaved)
                self.store = None  # not retried each event: once said, it stays unsaved
            else:
                self._persisted = True
                self._prune_sessions()
        self._record(UserMessage(text))
        return unsaved

    def _prune_sessions(self) -> None:
        """With a cap on stored sessions (`maxSessions`), remove the oldest beyond it
        (never this one, one live in another process, or one with checkpoints)."""
        cap = self.settings.max_sessions
        if self.store is None or cap <= 0:
            return
        try:
            removed = self.store.prune(cap, keep={self.id})
        except (OSError, SynapseError) as exc:  # pruning is housekeeping: never fail a turn
            log.warning("cannot prune stored sessions: %s", exc)
            return
        if removed:
            log.info("pruned %d stored session(s) over maxSessions=%d", len(removed), cap)

    def _record(self, event: Event) -> None:
        self._transcript.append(event)
        if self.store is not None and self._persisted:
            try:
                self.store.append_event(self.id, event)
            except (OSError, SynapseError) as exc:  # a full disk must not end the conversation
                log.warning("cannot store event: %s", exc)

    def _store_message(self, message: Message) -> None:
        if self.store is not None and self._persisted:
            try:
                self.store.append_message(self.id, message)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store message: %s", exc)

    def _store_compaction(self, messages: list[Message]) -> None:
        if self.store is not None and self._persisted:
            try:
                self.store.append_compaction(self.id, messages)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store compaction: %s", exc)

    # ------------------------------------------------------- context and cost

    def _add_spend(self, spend: Spend, *, turn: bool = True) -> None:
        """Count a turn's (or a `/compact`'s) usage per model, and store it."""
        if turn:
            self.last_turn_spend = dict(spend)
        if not any(u != Usage() for u in spend.values()):
            return
        self.spend = merged(self.spend, spend)
        if self.store is not None and self._persisted:
            try:
                self.store.append_usage(self.id, spend)
            except (OSError, SynapseError) as exc:
                log.warning("cannot store usage: %s", exc)

    def turn_cost(self) -> Cost:
        """The last turn's tokens and cost (the `pricing` setting over the table)."""
        return spend_cost(self.last_turn_spend, self.settings.pricing)

    def session_cost(self) -> Cost:
        return spend_cost(self.spend, self.settings.pricing)

    def model_name(self) -> str:
        return self._model.model if self._model is not None else self.settings.model

    @property
    def context_window(self) -> int:
        return self._window or context_window(self.model_name())

    @property
    def context_tokens(self) -> int:
        """The context the last model call used (an estimate after a compaction)."""
        return self._loop.last_context_tokens

    async def context_report(self) -> ContextReport:
        """The next request's size by part (`/context`): counted by the API when it can,
        else estimated."""
        from synapse_lsp.agent.prompts import bash_tool

        counter = None
        why_not = None
        try:
            counter = self._ensure_model().count_tokens
        except ModelError as exc:
            why_not = exc.message
        found = self.instructions()
        return await measure(
            instructions=tuple((str(f.path), len(f.text) // 4, f.refused) for f in found.files),
            model=self.model_name(),
            window=self.context_window,
            system=self._system(),
            tools=[bash_tool()],
            messages=self._loop.messages,
            counter=counter,
            why_not=why_not,
        )

    async def compact(self, focus: str | None = None) -> str:
        """`/compact [focus]`: summarise all but the last turn now (large outputs go to
        files); what happened, for people. Not while a turn runs (SessionBusyError)."""
        if self._busy:
            raise SessionBusyError("A turn is running: compact after it ends.")
        locked = self._claim()
        if locked is not None:
            return locked.message
        if not self._loop.messages:
            return "Nothing to compact yet."
        self._busy = True
        try:
            try:
                model = self._ensure_model()
            except ModelError as exc:
                return exc.message
            done = await compact(
                self._loop.messages,
                model=self._ensure_model,
                settings=CompactionSettings(context_window=self.context_window, keep_turns=1),
                offload=self._offload,
                focus=focus or "",
            )
            if done is None:
                return "Nothing to compact: the conversation has no older turns or outputs."
            self._loop.messages = done.messages
            self._loop.last_context_tokens = done.context_tokens
            self._store_compaction(done.messages)
            self._add_spend({model.model: done.usage}, turn=False)
            self.usage = self.usage + done.usage
            self._record(done.notice)
            return done.notice.message
        finally:
            self._busy = False

    def _offload(self, tool_use_id: str, text: str) -> str | None:
        """Compaction's `Offload`: the output saved in the session folder; None without
        a stored session (or when the disk refuses)."""
        if self.store is None or not self._persisted:
            return None
        try:
            return str(self.store.write_offload(self.id, tool_use_id, text))
        except (OSError, SynapseError) as exc:
            log.warning("cannot offload a tool output: %s", exc)
            return None

    def _ensure_model(self) -> ModelClient:
        settings = self.settings
        if self._model is None:
            from synapse_lsp.agent.model import ModelClient

            self._model = ModelClient.from_settings(settings)
            self._owns_model = True
        elif self._owns_model:
            # Live settings: the next call uses the model, output limit and thinking
            # budget the user has just set (endpoint and key stay those of the client).
            self._model.model = settings.model
            self._model.max_tokens = settings.max_tokens
            self._model.thinking_budget = settings.thinking_budget or None
        return self._model

    def _system(self, task_type: str | None = None) -> list[dict[str, Any]]:
        if task_type is not None:
            return prompts.system_blocks(
                self.router.builtins.values(),
                cwd=self._cwd,
                workspace_root=self.workspace_root,
                task_type=task_type,
                instructions=self.instructions().prompt_text(self.workspace_root or self._cwd),
            )
        if self._system_cache is None:
            self._system_cache = prompts.system_blocks(
                self.router.builtins.values(),
                cwd=self._cwd,
                workspace_root=self.workspace_root,
                instructions=self.instructions().prompt_text(self.workspace_root or self._cwd),
            )
        return self._system_cache

    def instructions(self) -> instructions_.Found:
        """The AGENTS.md / CLAUDE.md files this session's prompt holds (read once)."""
        if self._instructions is None:
            root = self.workspace_root or self._cwd
            self._instructions = instructions_.load(root, self._cwd, self.settings.synapse_home)
        return self._instructions

    # ------------------------------------------------- hooks and background work

    def _hook_scope(self, notify: Callable[[Notice], None]) -> HookScope | None:
        """Who this session is to its hooks; None when it has none."""
        if self.hooks is None:
            return None
        transcript = str(self.store.path(self.id)) if self.store is not None else ""
        return HookScope(
            self.hooks,
            self.id,
            transcript,
            lambda: self.router.shell.cwd,
            notify,
            view=lambda: self.router.shell.view,
        )

    async def _prompt_hooks(self, text: str) -> tuple[str | None, list[dict[str, Any]]]:
        """SessionStart (before the session's first prompt here) and UserPromptSubmit:
        why the prompt is blocked (None: it is not), and the context blocks for the model."""
        scope = hook_scope()
        if scope is None:
            return None, []
        blocks: list[dict[str, Any]] = []
        if not self._hooks_started:
            self._hooks_started = True
            started = await scope.hooks.session_start(scope, self._hook_source)
            if started:
                blocks.append(context_block("SessionStart", started))
        verdict = await scope.hooks.user_prompt_submit(scope, text)
        if verdict.context:
            blocks.append(context_block("UserPromptSubmit", verdict.context))
        return verdict.blocked, blocks

    async def _stop_hooks(self, result: LoopResult, emit: Emit) -> LoopResult:
        """Stop hooks, when the turn ended normally: one may have the agent go on, once
        per turn (asked again with `stop_hook_active`, a second block is not followed)."""
        await stages.at("stop_hooks")  # a cancel from here on: no Stop hook runs
        scope = hook_scope()
        if scope is None or result.stop_reason != "end_turn" or scope.halt is not None:
            return result
        if scope.hooks._has("Stop"):  # the Stop hooks' changes are the agent's (hand_edits)
            await self.checkpoints.agent_acts()
        reason = await scope.hooks.stop(scope, False)
        if reason is None:
            return result
        emit(Notice(f"A Stop hook has the agent go on: {reason.splitlines()[0][:200]}"))
        feedback = [{"type": "text", "text": f"Stop hook feedback:\n{reason}"}]
        more = await self._loop.run(feedback, emit)
        result = LoopResult(
            more.stop_reason,
            result.usage + more.usage,
            more.final_text or result.final_text,
            model_calls=result.model_calls + more.model_calls,
        )
        again = more.stop_reason == "end_turn" and scope.halt is None
        if again:
            await self.checkpoints.agent_acts()
        if again and await scope.hooks.stop(scope, True) is not None:
            emit(Notice("A Stop hook asked again to go on: not followed (once a turn).", "warning"))
        return result

    @property
    def skill_enhance_on(self) -> bool:
        """Whether a finished turn may start a background skill enhancement."""
        return self.settings.skill_enhance if self.skill_enhance is None else self.skill_enhance

    @property
    def enhancing(self) -> bool:
        """A background skill enhancement is running."""
        return self._skills.running

    def _notify(self, notice: Notice) -> None:
        """A notice from background work: into the running turn, else before the next."""
        if self._busy and self._emit is not _drop:
            self._emit(notice)
        else:
            self._pending.append(notice)

    def _after_turn(self, finished: TurnFinished) -> None:
        """Start the background skill enhancement when this turn calls for it: it ended
        normally with enough tool calls, a model key is there, skills can be written."""
        settings = self.settings
        if finished.stop_reason != "end_turn" or not self.skill_enhance_on or self.read_only:
            return
        if settings.sandbox == "read-only":
            return
        turn = last_turn(self._transcript)
        if tool_calls(turn) < settings.skill_enhance_min_tools:
            return
        try:
            self._ensure_model()
        except ModelError:
            return
        job = Job(
            router=self.router,
            settings=self.settings_source,
            model=self._ensure_model,
            system=self._system("skill:enhance"),
            context_window=self._loop.context_window,
            scope=self._hook_scope(self._notify),
            notify=self._notify,
            account=self._account,
        )
        self._skills.start(job, turn)

    def _account(self, spend: Spend) -> None:
        """Usage of background work: the session's, not a turn's."""
        self._add_spend(spend, turn=False)
        for usage in spend.values():
            self.usage = self.usage + usage

    # ------------------------------------------------------------ sub-agents

    async def _run_subagent(
        self,
        task_type: str,
        prompt: str,
        description: str,
        *,
        model: str | None = None,
        max_turns: int | None = None,
    ) -> CommandOutput:
        try:
            client = self._ensure_model()
        except ModelError as exc:
            return CommandOutput(
                stderr=f"task:{task_type}: {exc.message}\n",
                exit_code=1,
                category=FailureCategory.DEPENDENCY_MISSING,
            )
        factory: Callable[[], ModelClient] = self._ensure_model
        if model is not None and model != client.model:
            variant = _with_model(client, model)
            factory = lambda: variant  # noqa: E731
        return await run_subagent(
            self._loop,
            self._emit,
            task_type=task_type,
            prompt=prompt,
            description=description,
            model=factory,
            system=self._system(task_type),
            max_turns=max_turns,
            model_name=model or client.model,
        )


def _with_model(client: ModelClient, model: str) -> ModelClient:
    """The session's client asking for another model (`task:* --model`): a shallow copy
    sharing its connection pool (built first, so the copy never builds one of its own
    that nobody closes)."""
    client.prepare()
    variant = copy.copy(client)
    variant.model = model
    return variant


def _drop(event: Event) -> None:
    return None
