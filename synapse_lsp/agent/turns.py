"""One turn driver for every face: the live chat a face keeps, its busy check, cancel,
close sequence and the one output throttle.

A face (LSP, ACP, the REPL, `chat -p`, a test's toy face) keeps one `LiveChat` per
chat session it serves, with its own data attached (`face`: the LSP update stream and
shell, ACP's open tool calls...), and runs a turn with `await live.run(text, context,
render)`. The driver

- refuses a second turn (`SessionBusyError`, the one error each face maps to its own:
  LSP `RequestFailed` "session_busy", ACP invalid request),
- marks the turn as running before its first await, so `cancel()` during the face's
  own preparation (`prepare`: LSP and the REPL wait for the model SDK) wins at once:
  the preparation is stopped and the turn ends `cancelled` without starting,
- iterates `ChatSession.run_turn`, awaiting `render(event)` for each event, with the
  running command's live output coalesced by `OutputThrottle`,
- cancels the chat's turn when the face's task is cancelled (shutdown, LSP
  `$/cancelRequest`) and always closes the event stream,
- returns the turn's `TurnFinished` (one is rendered and returned in every ending).

Faces keep only what is theirs: mapping events to their wire or terminal, their own
error mapping, how a cancel reaches them (a command, `$/cancelRequest`, SIGINT).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from synapse_lsp.agent import session_mcp, stages
from synapse_lsp.commands import PromptError
from synapse_lsp.errors import SessionBusyError
from synapse_lsp.events import Event, ToolCallFinished, ToolOutput, TurnFinished, Usage

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.turn_context import TurnContext

log = logging.getLogger(__name__)

Render = Callable[[Event], Awaitable[None]]
Stream = Literal["stdout", "stderr"]

BUSY = "This chat session is already running a turn: wait for it to finish or cancel it."
NO_FINISH = "the turn ended without finishing"
CLOSE_WAIT = 5.0  # seconds `close()` gives a running turn, then the chat, to end


@dataclass(frozen=True)
class ThrottlePolicy:
    """How often a running command's live output reaches a face.

    A call's output goes out at most every `interval` seconds, or as soon as
    `max_bytes` characters of it are waiting; its first chunk goes out at once, and
    what is held goes out when the interval ends, before the call's
    `ToolCallFinished` and before `TurnFinished`. 100 ms is ten updates a second,
    as fast as anyone reads a scrolling log, and bounds what ACP costs (it re-sends
    a call's shown tail, up to 16 KiB, with each update); 64 KiB bounds what is
    held and keeps a fast command's increments flowing to LSP clients (which the
    update stream cuts into 16 KiB notifications)."""

    interval: float = 0.1
    max_bytes: int = 64 * 1024


OUTPUT_THROTTLE = ThrottlePolicy()


@dataclass
class _Held:
    """One call's output waiting to go out: runs of one stream, in arrival order."""

    runs: list[tuple[Stream, str | None, list[str]]] = field(default_factory=list)
    size: int = 0


class OutputThrottle:
    """Coalesces `ToolOutput` per tool call in front of a face's `render` (order kept
    per call; every other event passes straight through)."""

    def __init__(
        self,
        render: Render,
        policy: ThrottlePolicy = OUTPUT_THROTTLE,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._render = render
        self._interval = policy.interval
        self._max = policy.max_bytes
        self._clock = clock
        self._held: dict[str, _Held] = {}
        self._sent_at: dict[str, float] = {}  # when a call's output last went out
        self._lock = asyncio.Lock()  # one render at a time: the timer's or the turn's
        self._timer: asyncio.Task[None] | None = None
        self._error: BaseException | None = None  # the timer's render failed

    @property
    def held(self) -> int:
        """Characters of output waiting (all calls)."""
        return sum(h.size for h in self._held.values())

    async def render(self, event: Event) -> None:
        """Pass `event` on (now, or for live output when its call is due)."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if isinstance(event, ToolOutput):
            await self._output(event)
            return
        async with self._lock:
            if isinstance(event, ToolCallFinished):
                await self._flush(event.tool_call_id)
                self._sent_at.pop(event.tool_call_id, None)
            elif isinstance(event, TurnFinished):
                for call in list(self._held):
                    await self._flush(call)
            await self._render(event)

    async def _output(self, event: ToolOutput) -> None:
        call = event.tool_call_id
        held = self._held.get(call)
        if held is None:
            held = self._held[call] = _Held()
        runs = held.runs
        if runs and runs[-1][0] == event.stream and runs[-1][1] == event.parent_tool_call_id:
            runs[-1][2].append(event.chunk)
        else:
            runs.append((event.stream, event.parent_tool_call_id, [event.chunk]))
        held.size += len(event.chunk)
        due = self._sent_at.get(call, float("-inf")) + self._interval
        if held.size >= self._max or self._clock() >= due:
            async with self._lock:
                await self._flush(call)
        elif self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(
                self._tick(), name=f"output-throttle-{call}"
            )

    async def _flush(self, call: str) -> None:
        """Send what `call` holds (the lock is held)."""
        held = self._held.pop(call, None)
        if held is None:
            return
        self._sent_at[call] = self._clock()
        for stream, parent, chunks in held.runs:
            await self._render(ToolOutput(call, stream, "".join(chunks), parent))

    async def _tick(self) -> None:
        """Send held output as each call's interval ends, until nothing is held."""
        try:
            while self._held:
                now = self._clock()
                first = min(
                    self._sent_at.get(call, float("-inf")) + self._interval for call in self._held
                )
                if first > now:
                    await asyncio.sleep(first - now)
                    continue
                async with self._lock:
                    now = self._clock()
                    for call in list(self._held):
                        if self._sent_at.get(call, float("-inf")) + self._interval <= now:
                            await self._flush(call)
        except Exception as exc:  # the face's render failed: the turn's next render says so
            self._error = exc

    async def close(self) -> None:
        """Stop the timer; output still held is dropped (the turn did not finish)."""
        timer, self._timer = self._timer, None
        if timer is not None and not timer.done():
            timer.cancel()
            with contextlib.suppress(BaseException):
                await timer
        self._held.clear()


class FaceData(Protocol):
    """What a face attaches to a live chat may hold resources of its own (a shell,
    an update stream, a workspace): `close()` releases them after the chat closed;
    `closing()`, as the chat's close begins (its turn cancelled), may begin releasing
    what that close does not need (an ACP session's MCP servers), beside it."""

    def closing(self) -> None: ...

    async def close(self) -> None: ...


F = TypeVar("F", bound="FaceData | None")


class LiveChat(Generic[F]):
    """A chat session live in a face, and the driver of its turns.

    `chat` is the conversation, `face` what the face keeps beside it. `turn` is the
    task running the current turn and `request_id` the face's id of the request that
    started it (LSP's `$/cancelRequest` names it), both None between turns."""

    def __init__(
        self,
        chat: ChatSession,
        face: F,
        *,
        throttle: ThrottlePolicy | None = OUTPUT_THROTTLE,
    ) -> None:
        self.chat = chat
        self.face = face
        self.throttle = throttle
        self.turn: asyncio.Task[Any] | None = None
        self.request_id: Any = None
        self._running = False  # from `run`'s first line to its end
        self._cancelled = False  # a cancel came for the running turn
        self._started = False  # the chat's own turn began (its events flow)
        self._preparing: asyncio.Future[str] | None = None  # the face's `prepare`, running
        self._closing = False

    @property
    def id(self) -> str:
        return self.chat.id

    @property
    def running(self) -> bool:
        """A turn of this driver runs (from `run`'s first line to its return)."""
        return self._running

    @property
    def busy(self) -> bool:
        """A turn runs, or the chat is busy otherwise (a rewind, a compaction)."""
        return self._running or bool(self.chat.busy)

    @property
    def cancelled(self) -> bool:
        """A cancel came for the running turn."""
        return self._cancelled

    def check_idle(self) -> None:
        """SessionBusyError while a turn runs (or the chat is busy otherwise)."""
        if self.busy:
            raise SessionBusyError(BUSY)

    async def run(
        self,
        text: str,
        context: TurnContext | None,
        render: Render,
        *,
        request_id: Any = None,
        prepare: Callable[[], Awaitable[None]] | None = None,
    ) -> TurnFinished:
        """Run one turn, awaiting `render(event)` for each of its events; its end.

        `prepare` is the face's own work before the turn (waiting for the model SDK,
        showing the prompt): it runs with the turn already marked running, so a
        cancel meanwhile ends the turn `cancelled` before it starts. SessionBusyError
        when a turn runs; the task's cancellation cancels the chat's turn."""
        self.check_idle()  # before any await: a second turn is refused, a cancel wins
        self._running = True
        self.turn = asyncio.current_task()
        self.request_id = request_id
        self._cancelled = False
        self._started = False
        throttle = OutputThrottle(render, self.throttle) if self.throttle is not None else None
        send = throttle.render if throttle is not None else render
        events: AsyncIterator[Event] | None = None
        finished: TurnFinished | None = None
        try:
            try:
                text = await self._prepare(prepare, text)
            except PromptError as exc:  # `/mcp:<server>:<prompt>` that cannot be: no turn
                finished = TurnFinished("error", Usage(), str(exc))
                await send(finished)
                return finished
            if self._cancelled:  # before the chat's turn began: it never starts
                finished = TurnFinished("cancelled", Usage())
                await send(finished)
                return finished
            events = self.chat.run_turn(text, context)
            self._started = True  # no await since: a cancel from here reaches the chat
            async for event in events:
                if isinstance(event, TurnFinished):
                    finished = event
                await send(event)
            if finished is None:
                finished = TurnFinished("error", Usage(), NO_FINISH)
                await send(finished)
            return finished
        except asyncio.CancelledError:
            # The face's task was cancelled (shutdown, `$/cancelRequest`): stop the
            # chat's turn too; its history stays consistent.
            with contextlib.suppress(Exception):
                self.chat.cancel()
            raise
        finally:
            if events is not None:
                close = getattr(events, "aclose", None)
                if close is not None:
                    with contextlib.suppress(BaseException):
                        await close()
            if throttle is not None:
                await throttle.close()
            self.turn = None
            self.request_id = None
            self._started = False
            self._running = False

    async def _prepare(self, prepare: Callable[[], Awaitable[None]] | None, text: str) -> str:
        """The `prepare` stage, the face's preparation and an MCP prompt line's expansion
        (session_mcp.py), in a task of their own that a `cancel()` stops at once (the
        turn then ends `cancelled` without starting); the text to send."""
        prompt_line = session_mcp.is_prompt_line(text)
        if prepare is None and not prompt_line and not stages.hooked():
            return text

        async def work() -> str:
            await stages.at("prepare")
            if prepare is not None:
                await prepare()
            if prompt_line:
                return await session_mcp.expand(getattr(self.chat, "router", None), text)
            return text

        task = asyncio.ensure_future(work())
        self._preparing = task
        try:
            # asyncio.wait, not wait_for: Python 3.11's wait_for drops a cancel of the
            # face's task that comes as the preparation ends.
            await asyncio.wait({task})
        finally:
            self._preparing = None
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if task.cancelled():
            if self._cancelled:
                return text
            raise asyncio.CancelledError
        return task.result()  # the face's error, if it failed

    def cancel(self) -> bool:
        """Cancel the running turn; False when none was running. A cancel before the
        chat's turn began is kept: the face's preparation stops, and the turn ends
        `cancelled` without starting."""
        if not self._running:
            if not self.chat.busy:
                return False
            self.chat.cancel()  # a turn driven elsewhere: the chat's own cancel
        else:
            self._cancelled = True
            if self._started:
                self.chat.cancel()
            elif self._preparing is not None and not self._preparing.done():
                self._preparing.cancel()
        stages.cancel_seen()
        return True

    def cancel_request(self, request_id: Any) -> bool:
        """Cancel the running turn if the request `request_id` started it."""
        if not self._running or self.request_id is None or self.request_id != request_id:
            return False
        return self.cancel()

    async def close(self) -> None:
        """End the live chat: cancel its turn and wait for it (bounded), close the
        conversation, then release what the face attached."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(Exception):
            self.cancel()
            if self.face is not None:
                self.face.closing()
        turn = self.turn
        if turn is not None and not turn.done() and turn is not asyncio.current_task():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(turn), CLOSE_WAIT)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.chat.close(), CLOSE_WAIT)
        if self.face is not None:
            await self.face.close()
