"""A chat session: one conversation, one turn at a time, as a stream of events.

Every face consumes `ChatSession.run_turn`'s event stream (events.py). A turn runs in a
worker task that feeds a queue, so events from inside a tool call (live output, plan
updates, a sub-agent's whole stream) reach the consumer while the call is still running,
and `cancel()` can interrupt any await: the model stream is closed, the running command
is interrupted (cancelling the task awaiting `router.route` interrupts it), and the
history is repaired so every `tool_use` has a `tool_result`.

With a store, a session is its stored conversation's one writer (store.py): it takes the
store's lock when it is created or resumed and releases it on `close()`. A session resumed
while another process writes it is **read-only** (`read_only`): its messages and transcript
can be read and replayed, and each turn first tries the lock again — while another process
holds it the turn ends at once with TurnFinished("error", …) saying so; once the lock is
free the session reloads what the other process wrote and goes on. `ChatSession.fork`
continues a copy under a new id instead.

`ChatSession` is the session's lifecycle (new, `resume`, `fork`, `close`), its usage and cost,
`/compact`, `/context` and `rewind`. It owns the parts that do the rest: `turn_runner.py` (running a
turn: its worker, its order, cancel), `session_records.py` (the stored conversation: title, replay,
records, the lock), `session_model.py` (the model client, the system prompt), `session_hooks.py`
(SessionStart, UserPromptSubmit, Stop), `session_skills.py` (background skill enhancement),
`session_mcp.py` (MCP servers' requests), `turn_checkpoints.py`, `editor_notes.py`, `claude_code.py`
(Claude Code's commands and sub-agents). It uses `loop.py` (the per-turn model <-> router loop),
`history.py` (message rules), `compaction.py`, `subagents.py` (`task:<type>`), `rewinds.py`,
`transcript.py` (what is stored for replay) and `turn_context.py` (what the editor knows of a turn);
their public names are re-exported here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import instructions as instructions_
from synapse_lsp.agent import rewinds, subagents
from synapse_lsp.agent.claude_code import ClaudeCode
from synapse_lsp.agent.compaction import (
    COMPACT_RATIO,
    DEFAULT_CONTEXT_WINDOW,
    KEEP_RECENT_TURNS,
    CompactionSettings,
    compact,
)
from synapse_lsp.agent.context import ContextReport, measure
from synapse_lsp.agent.editor_notes import EditorFeedback
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
from synapse_lsp.agent.pricing import Cost, Spend, merged, spend_cost
from synapse_lsp.agent.session_hooks import SessionHooks
from synapse_lsp.agent.session_mcp import SessionMcp
from synapse_lsp.agent.session_model import SessionModel
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.session_skills import SessionSkills
from synapse_lsp.agent.store import SessionLockedError, new_session_id
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.agent.turn_context import (
    MAX_SELECTION_CHARS,
    Attachment,
    Selection,
    TurnContext,
    context_text,
)
from synapse_lsp.agent.turn_numbers import count_turns
from synapse_lsp.agent.turn_runner import TurnRunner
from synapse_lsp.checkpoints import Decide, RewindReport
from synapse_lsp.commands import CommandOutput
from synapse_lsp.config import as_source
from synapse_lsp.errors import ModelError, SessionBusyError, SynapseError
from synapse_lsp.events import Event, TurnFinished, Usage
from synapse_lsp.policy.hooks import of_gate

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

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
        self.workspace_root = workspace_root
        self.usage = Usage()
        self.spend: Spend = {}  # the session's usage per model (stored as usage records)
        self.last_turn_spend: Spend = {}
        self._cwd = router.shell.cwd
        # The stored conversation (title, replay, records, the lock): session_records.py.
        self.records = SessionRecords(
            store, self.id, lambda: self.settings, lambda: str(self.workspace_root or self._cwd)
        )
        self.checkpoints = TurnCheckpoints(
            lambda: self.id,
            lambda: self.workspace_root or self._cwd,
            self.settings_source,
            self.records.checkpoint_records,
            router.files,
            lambda notice: self._runner.notify(notice),
        )
        self.claude = ClaudeCode(router.permission, lambda: self.workspace_root or self._cwd)
        self.mcp = SessionMcp.of(self, router.permission)  # what MCP servers ask of it
        self.router = router.derive(
            subagent=self.claude.tasks(self._run_subagent),
            in_subagent=False,
            before_command=self.checkpoints.ready,
            mcp_host=self.mcp,
        )
        # The model client and the system prompt: session_model.py.
        self._model = SessionModel(
            model,
            lambda: self.settings,
            context_window,
            lambda: self.router,
            self._cwd,
            lambda: self.workspace_root,
            self.claude,
        )
        self._loop = Loop(
            router=self.router,
            settings=self.settings_source,
            model=self._model.client,
            system=self._model.system,
            context_window=context_window or DEFAULT_CONTEXT_WINDOW,
            on_message=self.records.message,
            on_compaction=self.records.compaction,
            todo_reminder=True,
        )
        self._loop.offload = self.records.offload
        self._loop.before_request = self.checkpoints.agent_waits  # hand_edits.py
        # What the editor reports after the agent's edits (problems, the user's changes),
        # noted once to the model by the loop.
        self.feedback = EditorFeedback(
            enabled=lambda: self.settings.editor_feedback,
            root=workspace_root,
            tool_running=lambda: self._loop.current_tool_call_id is not None,
        )
        self._loop.notes = self.feedback.take
        # Hooks (hooks.py): the folder's, as its gate carries them (session_hooks.py).
        self.hooks = of_gate(router.permission)
        self._session_hooks = SessionHooks(
            lambda: self.hooks, self.records, lambda: self.router, self._loop, self.checkpoints
        )
        self._runner = TurnRunner(self)  # the turns: turn_runner.py
        # `/skill enhance on|off` for this session (None: the `skillEnhance` setting), and its
        # background run (session_skills.py); its notices go through the runner.
        self.skill_enhance: bool | None = None
        self._skills = SessionSkills(self)

    @property
    def settings(self) -> Settings:
        return self.settings_source()

    @property
    def store(self) -> ChatStore | None:
        """Where the conversation is stored (None: nowhere, or it could not be created)."""
        return self.records.store

    @property
    def title(self) -> str:
        return self.records.title

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
        session.records.locked = locked
        if locked is None:  # a rewind killed half-way is finished first (rewinds.py)
            stored = rewinds.recover(session, store) or stored
        session._restore(stored)
        session._session_hooks.source = "resume"
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
        self.records.title = stored.info.title
        self._loop.messages = repair_history(stored.messages)
        self._loop.last_context_tokens = estimate_tokens(self._loop.messages)
        self.records.transcript = list(stored.events)
        self.usage = Usage()
        for event in stored.events:
            if isinstance(event, TurnFinished):
                self.usage = self.usage + event.usage
        # Sessions stored before usage records: their tokens, under no model (no price).
        self.spend = dict(stored.usage) if stored.usage is not None else {"": self.usage}
        if stored.usage is not None:
            self.usage = spend_cost(self.spend).usage
        self.last_turn_spend = {}

    def _claim(self) -> SessionLockedError | None:
        """Be the stored session's writer before a turn (or a `/compact`) changes
        anything; the error when another process is (session_records.py)."""
        return self.records.claim(self._restore)

    @property
    def read_only(self) -> bool:
        """True while another process writes this stored session (as of the last try)."""
        return self.records.locked is not None

    @property
    def busy(self) -> bool:
        return self._runner.busy

    @property
    def turns(self) -> int:
        """The turns so far: the next prompt is turn `turns + 1` (turn_numbers.py)."""
        return count_turns(self.records.transcript)

    @property
    def messages(self) -> list[Message]:
        """The model's view of the history (API message dicts)."""
        return self._loop.messages

    def transcript(self) -> list[Event]:
        """Stored events for replay (text coalesced), user prompts as UserMessage."""
        return list(self.records.transcript)

    def run_turn(self, text: str, context: TurnContext | None = None) -> AsyncIterator[Event]:
        """Stream the turn's events; the last one is always a TurnFinished."""
        return self._runner.start(self.claude.expand(text), context)

    def cancel(self) -> None:
        """Stop the running turn: interrupt the command, close the stream; the
        iterator ends with TurnFinished(stop_reason="cancelled")."""
        self._runner.cancel()

    async def close(self) -> None:
        self.cancel()
        await self._skills.aclose()  # a background enhancement still running ends here
        await self._runner.join()
        await self.checkpoints.close()  # the last turn's "after" snapshot, if still taken
        await self._session_hooks.end()  # SessionEnd: what its hooks change is not the turn's
        if self.store is not None:
            self.store.close(self.id)
        await self._model.aclose()

    async def rewind(
        self, turn: int, *, truncate: bool = True, decide: Decide | None = None
    ) -> RewindReport:
        """Put the folder's files back as they were before `turn` (checkpoints/) and,
        with `truncate`, end the conversation before that turn (a `rewind` record in the
        store: the history and the replay both end before the turn)."""
        if self._runner.busy:
            raise SessionBusyError(rewinds.busy_message(self))
        if self.read_only:
            raise SynapseError("This session is read-only here (another process writes it).")
        self._runner.busy = True  # no turn starts while files and history are put back
        try:
            return await rewinds.rewind(self, turn, truncate, decide)
        finally:
            self._runner.busy = False

    # ------------------------------------------------------- context and cost

    def _add_spend(self, spend: Spend, *, turn: bool = True) -> None:
        """Count a turn's (or a `/compact`'s) usage per model, and store it."""
        if turn:
            self.last_turn_spend = dict(spend)
        if not any(u != Usage() for u in spend.values()):
            return
        self.spend = merged(self.spend, spend)
        self.records.usage(spend)

    def turn_cost(self) -> Cost:
        """The last turn's tokens and cost (the `pricing` setting over the table)."""
        return spend_cost(self.last_turn_spend, self.settings.pricing)

    def session_cost(self) -> Cost:
        return spend_cost(self.spend, self.settings.pricing)

    def model_name(self) -> str:
        return self._model.name()

    @property
    def context_window(self) -> int:
        return self._model.context_window()

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
        if self._runner.busy:
            raise SessionBusyError("A turn is running: compact after it ends.")
        locked = self._claim()
        if locked is not None:
            return locked.message
        if not self._loop.messages:
            return "Nothing to compact yet."
        self._runner.busy = True
        try:
            try:
                model = self._ensure_model()
            except ModelError as exc:
                return exc.message
            await self._session_hooks.pre_compact(focus or "", self._runner.notify)
            done = await compact(
                self._loop.messages,
                model=self._ensure_model,
                settings=CompactionSettings(context_window=self.context_window, keep_turns=1),
                offload=self.records.offload,
                focus=focus or "",
            )
            if done is None:
                return "Nothing to compact: the conversation has no older turns or outputs."
            self._loop.messages = done.messages
            self._loop.last_context_tokens = done.context_tokens
            self.records.compaction(done.messages)
            self._add_spend({model.model: done.usage}, turn=False)
            self.usage = self.usage + done.usage
            self.records.record(done.notice)
            return done.notice.message
        finally:
            self._runner.busy = False

    def _ensure_model(self) -> ModelClient:
        return self._model.client()

    def _system(self, task_type: str | None = None) -> list[dict[str, Any]]:
        return self._model.system(task_type)

    def instructions(self) -> instructions_.Found:
        """The AGENTS.md / CLAUDE.md files this session's prompt holds (read once)."""
        return self._model.instructions()

    def append_system_prompt(self, text: str) -> None:
        """`synapse chat --append-system-prompt`: for this session's agent, not sub-agents."""
        self._model.set_append(text)

    # -------------------------------------------------------- background work

    @property
    def skill_enhance_on(self) -> bool:
        """Whether a finished turn may start a background skill enhancement."""
        return self._skills.on

    @property
    def enhancing(self) -> bool:
        """A background skill enhancement is running."""
        return self._skills.running

    def _after_turn(self, finished: TurnFinished) -> None:
        """After a turn's last event: a background skill enhancement (session_skills.py)."""
        self._skills.after_turn(finished)

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
        """The router's `task:<type>` (subagents.py), in the running turn."""
        return await subagents.run_task(
            self._loop,
            self._runner.emit,
            self._ensure_model,
            self._system,
            task_type,
            prompt,
            description,
            model=model,
            max_turns=max_turns,
        )
