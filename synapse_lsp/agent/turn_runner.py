"""A chat session's turns, one at a time, each as a stream of events.

`ChatSession` owns one `TurnRunner`: `ChatSession.run_turn` is its `start`, and
`turns.py` (the one driver every face uses) iterates the stream it returns. A turn runs
in a worker task that feeds a bounded queue (event_queue.py), so events from inside a
tool call (live output, plan updates, a sub-agent's whole stream) reach the consumer
while the call is still running, and `cancel()` can interrupt any await. The runner
owns the turn's order: the lock claimed (a read-only session's turn ends at once), the
prompt hooks, the user's text recorded, the checkpoint before, the loop, the Stop
hooks, usage counted, the checkpoint after, then `TurnFinished` — always the last
event, however the turn ends. Notices from background work between turns wait here
for the next turn (`notify`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from synapse_lsp.agent import stages
from synapse_lsp.agent.editor_notes import EditorFeedback
from synapse_lsp.agent.event_queue import EventQueue
from synapse_lsp.agent.loop import Emit, Loop
from synapse_lsp.agent.pricing import Spend
from synapse_lsp.agent.session_hooks import SessionHooks
from synapse_lsp.agent.session_model import SessionModel
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.store import SessionLockedError
from synapse_lsp.agent.transcript import Recorder
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.agent.turn_context import TurnContext, context_text
from synapse_lsp.errors import ModelError, SessionBusyError
from synapse_lsp.events import NO_ANSWER, Event, Notice, TurnFinished, Usage
from synapse_lsp.policy.hooks import enter as enter_hook_scope

log = logging.getLogger(__name__)


class TurnHost(Protocol):
    """What a turn uses of `session.ChatSession` (which owns the runner)."""

    usage: Usage
    checkpoints: TurnCheckpoints
    feedback: EditorFeedback
    records: SessionRecords
    _loop: Loop
    _model: SessionModel
    _session_hooks: SessionHooks

    @property
    def turns(self) -> int: ...

    def _claim(self) -> SessionLockedError | None: ...

    def _add_spend(self, spend: Spend, *, turn: bool = True) -> None: ...

    def _after_turn(self, finished: TurnFinished) -> None: ...


def drop(event: Event) -> None:
    """Where events go while no turn runs."""
    return None


class TurnStream:
    """The stream of one turn. Closing it (or leaving the `async for`) cancels the turn."""

    def __init__(self, gen: AsyncIterator[Event], release: Callable[[], None]) -> None:
        self._gen = gen
        self._release = release
        self._started = False

    def __aiter__(self) -> TurnStream:
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


class TurnRunner:
    """One turn at a time; `start` while busy raises SessionBusyError."""

    def __init__(self, host: TurnHost) -> None:
        self._host = host
        self.busy = False  # a turn (or a `/compact`, a rewind) is running
        self.worker: asyncio.Task[None] | None = None
        self.emit: Emit = drop  # the running turn's, else `drop`
        self._pending: list[Event] = []  # notices from background work, for the next turn

    def start(self, text: str, context: TurnContext | None) -> AsyncIterator[Event]:
        """Stream the turn's events; the last one is always a TurnFinished."""
        if self.busy:
            raise SessionBusyError(
                "This chat session is already running a turn: wait for it to finish or cancel it."
            )
        self.busy = True
        return TurnStream(self._turn(text, context), self._release)

    def cancel(self) -> None:
        """Stop the running turn: interrupt the command, close the stream; the
        iterator ends with TurnFinished(stop_reason="cancelled")."""
        if self.worker is not None and not self.worker.done():
            self.worker.cancel()

    async def join(self) -> None:
        """Wait for the running turn's worker to end, however it ends."""
        if self.worker is not None:
            with contextlib.suppress(BaseException):
                await self.worker

    def notify(self, notice: Notice) -> None:
        """A notice from background work: into the running turn, else before the next."""
        if self.busy and self.emit is not drop:
            self.emit(notice)
        else:
            self._pending.append(notice)

    def _release(self) -> None:
        self.busy = False

    async def _turn(self, text: str, context: TurnContext | None) -> AsyncIterator[Event]:
        queue = EventQueue()  # bounded: merges and, past a cap, drops live output
        recorder = Recorder(self._host.records.record)

        def emit(event: Event) -> None:
            self._host.feedback.observe(event)
            recorder.add(event)
            queue.put_nowait(event)

        worker = queue.feed_from(self._work(text, context, emit, recorder, queue))
        self.worker = worker
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
            self.worker = None
            self.emit = drop
            self.busy = False

    async def _work(
        self,
        text: str,
        context: TurnContext | None,
        emit: Emit,
        recorder: Recorder,
        queue: EventQueue,
    ) -> None:
        host = self._host
        loop = host._loop
        hooks = host._session_hooks
        self.emit = emit
        enter_hook_scope(hooks.scope(emit))
        for pending in self._pending:  # what background work said meanwhile
            emit(pending)
        self._pending.clear()
        finished: TurnFinished
        try:
            locked = host._claim()
            if locked is not None:  # read-only: nothing of this turn is kept or stored
                queue.put_nowait(TurnFinished("error", Usage(), locked.message))
                queue.put_nowait(None)
                return
            await stages.at("prompt_hooks")
            blocked, hooked = await hooks.prompt(text)
            if blocked is not None:  # a hook blocked the prompt: nothing of it is kept
                queue.put_nowait(TurnFinished("error", Usage(), blocked))
                queue.put_nowait(None)
                return
            unsaved = host.records.begin(text)
            if unsaved is not None:  # said once, in one line; the conversation goes on
                queue.put_nowait(Notice(unsaved, "warning"))
            host.checkpoints.begin(
                host.turns, len(loop.messages), text, len(host.records.transcript) - 1
            )
            loop.model_usage = {}
            content: list[dict[str, Any]] = []
            extra = context_text(context) if context is not None else None
            if extra:
                content.append({"type": "text", "text": extra})
            content += hooked
            content.append({"type": "text", "text": text})
            try:
                loop.context_window = host._model.turn_window()
            except ModelError as exc:
                loop.add({"role": "user", "content": content})
                finished = TurnFinished("error", Usage(), exc.message)
            else:
                try:
                    result = await hooks.stop(await loop.run(content, emit), emit)
                    silent = result.stop_reason == "end_turn" and not result.final_text.strip()
                    finished = TurnFinished(
                        result.stop_reason,  # type: ignore[arg-type]
                        result.usage,
                        note=NO_ANSWER if silent else None,
                    )
                except ModelError as exc:  # said once, by TurnFinished's error
                    finished = TurnFinished("error", loop.turn_usage, exc.message)
        except asyncio.CancelledError:
            finished = TurnFinished("cancelled", loop.turn_usage)
        except Exception as exc:  # a bug must end the turn visibly, never hang the face
            log.exception("turn failed")
            finished = TurnFinished(
                "error", loop.turn_usage, f"internal error: {type(exc).__name__}: {exc}"
            )
        host.usage = host.usage + finished.usage
        host._add_spend(loop.model_usage)
        # A cancel that comes as the turn ends (`/exit` typed ahead, Ctrl-C): the turn is
        # over either way; its end snapshot goes on in the background, and the face must
        # still get TurnFinished (else it waits forever).
        with contextlib.suppress(asyncio.CancelledError):
            await host.checkpoints.finish()
        recorder.flush()
        recorder.add(finished)
        queue.put_nowait(finished)
        queue.put_nowait(None)
        host._after_turn(finished)  # after the turn's last event: it never delays it
