"""Agent events -> `synapse/sessionUpdate` payloads (ACP `session/update` shapes), paced.

`event_to_update` is the pure mapping (docs/protocol.md lists every shape).
`UpdateStream` sends one session's updates in order: text chunks are coalesced
(the first goes out at once, then at most one text notification per 16 ms),
tool output is merged into chunks of at most 16 KiB, and the queue is bounded:
when the editor stops reading, `put` waits (back-pressure on the agent loop)
instead of letting memory grow.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import attrs

from synapse_lsp.events import (
    Event,
    Notice,
    PlanUpdated,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
    UsageUpdated,
    UserMessage,
)
from synapse_lsp.lsp import protocol as wire
from synapse_lsp.lsp.protocol import SessionUpdate, SessionUpdateNotification
from synapse_lsp.summaries.tool_calls import located
from synapse_lsp.summaries.tool_calls import tool_call_summary as default_summarizer

COALESCE_INTERVAL = 0.016
MAX_OUTPUT_CHUNK = 16 * 1024
MAX_PENDING = 256

# (command) -> (title, kind, paths mentioned)
Summarizer = Callable[[str], tuple[str, str, list[str]]]
_TEXT = (wire.AgentMessageChunk, wire.AgentThoughtChunk)


def token_usage(usage: Usage) -> wire.TokenUsage:
    return wire.TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
    )


def user_message(text: str, parent: str | None = None) -> wire.UserMessageChunk:
    return wire.UserMessageChunk(content=_text(text), parent_tool_call_id=parent)


def event_to_update(
    event: Event,
    *,
    summarize: Summarizer = default_summarizer,
    cwd: Path | None = None,
) -> SessionUpdate | None:
    """The ACP-shaped update for one event (None for events editors need not see)."""
    match event:
        case TextDelta(text=text, parent_tool_call_id=parent):
            return wire.AgentMessageChunk(content=_text(text), parent_tool_call_id=parent)
        case ThinkingDelta(text=text, parent_tool_call_id=parent):
            return wire.AgentThoughtChunk(content=_text(text), parent_tool_call_id=parent)
        case UserMessage(text=text, parent_tool_call_id=parent):
            return user_message(text, parent)  # stored prompts, on replay
        case ToolCallStarted():
            title, kind, paths = summarize(event.command)
            return wire.ToolCall(
                tool_call_id=event.tool_call_id,
                title=title,
                kind=kind,
                raw_input=wire.RawInput(command=event.command, restart=event.restart),
                locations=[wire.Location(path=str(located(p, cwd))) for p in paths],
                parent_tool_call_id=event.parent_tool_call_id,
            )
        case ToolOutput():
            return wire.ToolCallUpdate(
                tool_call_id=event.tool_call_id,
                output=wire.OutputChunk(stream=event.stream, text=event.chunk),
                parent_tool_call_id=event.parent_tool_call_id,
            )
        case ToolCallFinished():
            return wire.ToolCallUpdate(
                tool_call_id=event.tool_call_id,
                status=event.status,
                content=[
                    *(
                        wire.DiffContent(path=d.path, old_text=d.old_text, new_text=d.new_text)
                        for d in event.diffs
                    ),
                    wire.ToolContent(content=_text(event.text)),
                ],
                raw_output=wire.RawOutput(
                    exit_code=event.exit_code,
                    is_error=event.is_error,
                    layer=event.layer,
                    category=event.category,
                    edit=_edit_outcome(event),
                ),
                parent_tool_call_id=event.parent_tool_call_id,
            )
        case PlanUpdated():
            return wire.Plan(
                explanation=event.explanation,
                entries=[wire.PlanEntry(content=e.step, status=e.status) for e in event.entries],
                parent_tool_call_id=event.parent_tool_call_id,
            )
        case UsageUpdated(usage=usage, parent_tool_call_id=parent):
            return wire.UsageUpdate(usage=token_usage(usage), parent_tool_call_id=parent)
        case Notice(level=level, message=message, parent_tool_call_id=parent):
            return wire.Notice(level=level, message=message, parent_tool_call_id=parent)
        case TurnFinished(stop_reason=reason, usage=usage, error=error):
            return wire.TurnFinished(stop_reason=reason, usage=token_usage(usage), error=error)
    return None


def _text(text: str) -> wire.TextContent:
    return wire.TextContent(text=text)


def _edit_outcome(event: ToolCallFinished) -> wire.EditOutcome | None:
    edit = event.data.get("edit") if isinstance(event.data, dict) else None
    if isinstance(edit, dict) and "path" in edit:
        return wire.EditOutcome(path=str(edit["path"]), applied=not event.is_error)
    return None


def split_output(text: str, limit: int = MAX_OUTPUT_CHUNK) -> list[str]:
    """Cut `text` into pieces of at most `limit` UTF-8 bytes (never inside a character)."""
    if len(text) <= limit // 4 or len(text.encode("utf-8")) <= limit:
        return [text]
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + limit)
        while len(text[start:end].encode("utf-8")) > limit:
            end = start + max(1, (end - start) * 3 // 4)
        pieces.append(text[start:end])
        start = end
    return pieces


@dataclass
class _Pending:
    update: SessionUpdate  # our own copy: merging mutates it
    # "text:<kind>:<parent>" or "out:<id>:<stream>:<parent>" when mergeable, else None
    merge_key: str | None
    size: int = 0
    replay: bool = False


def _merge_key(update: SessionUpdate) -> str | None:
    if isinstance(update, _TEXT):
        return f"text:{update.session_update}:{update.parent_tool_call_id}"
    if isinstance(update, wire.ToolCallUpdate) and update.output is not None:
        output = update.output
        return f"out:{update.tool_call_id}:{output.stream}:{update.parent_tool_call_id}"
    return None


def _own_copy(update: SessionUpdate) -> SessionUpdate:
    """A copy whose text may be appended to without touching the caller's object."""
    if isinstance(update, _TEXT):
        return attrs.evolve(update, content=attrs.evolve(update.content))
    if isinstance(update, wire.ToolCallUpdate) and update.output is not None:
        return attrs.evolve(update, output=attrs.evolve(update.output))
    return update


class UpdateStream:
    """Sends one session's updates in order with coalescing and a bounded queue.

    `send` writes one `synapse/sessionUpdate` params object; `drained` (optional)
    waits until the transport has room, so a client that stops reading stalls
    this stream — and through `put` the agent loop — rather than growing memory.
    """

    def __init__(
        self,
        session_id: str,
        send: Callable[[SessionUpdateNotification], None],
        *,
        drained: Callable[[], Awaitable[None]] | None = None,
        interval: float = COALESCE_INTERVAL,
        max_pending: int = MAX_PENDING,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self._send = send
        self._drained = drained
        self._interval = interval
        self._max_pending = max_pending
        self._on_error = on_error
        self._queue: deque[_Pending] = deque()
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_text = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def put(self, update: SessionUpdate, *, replay: bool = False) -> None:
        """Queue one update (merging text/output where allowed); waits while the queue is full."""
        if self._closed:
            return
        merge_key = None if replay else _merge_key(update)
        if merge_key is not None and self._queue and self._queue[-1].merge_key == merge_key:
            last = self._queue[-1]
            if isinstance(last.update, _TEXT) and isinstance(update, _TEXT):
                last.update.content.text += update.content.text
                return
            if (
                isinstance(last.update, wire.ToolCallUpdate)
                and isinstance(update, wire.ToolCallUpdate)
                and last.update.output is not None
                and update.output is not None
                and last.size + len(update.output.text) <= MAX_OUTPUT_CHUNK
            ):
                last.update.output.text += update.output.text
                last.size += len(update.output.text)
                return
        pieces: list[SessionUpdate] = [update]
        if isinstance(update, wire.ToolCallUpdate) and update.output is not None:
            output = update.output
            pieces = [
                attrs.evolve(update, output=attrs.evolve(output, text=piece))
                for piece in split_output(output.text)
            ]
        for piece in pieces:
            while len(self._queue) >= self._max_pending and not self._closed:
                self._space.clear()
                await self._space.wait()
            chunk = piece.output if isinstance(piece, wire.ToolCallUpdate) else None
            size = len(chunk.text) if chunk is not None else 0
            self._queue.append(_Pending(_own_copy(piece), merge_key, size, replay))
            self._idle.clear()
            self._wake.set()
            self._ensure_pump()

    def _ensure_pump(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._pump(), name=f"updates-{self.session_id}"
            )

    async def _pump(self) -> None:
        try:
            while not self._closed:
                if not self._queue:
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                head = self._queue[0]
                is_text = head.merge_key is not None and head.merge_key.startswith("text:")
                if is_text:
                    delay = self._last_text + self._interval - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                if self._drained is not None:
                    await self._drained()
                self._queue.popleft()
                head.merge_key = None  # no more merging into what is sent
                if is_text:
                    self._last_text = time.monotonic()
                payload = SessionUpdateNotification(
                    session_id=self.session_id, update=head.update, replay=head.replay
                )
                try:
                    self._send(payload)
                except Exception as exc:  # a broken transport must not kill the turn
                    if self._on_error is not None:
                        self._on_error(exc)
                self._space.set()
        finally:
            self._idle.set()
            self._space.set()

    async def flush(self) -> None:
        """Wait until everything queued so far has been handed to the transport."""
        while self._queue and not self._closed:
            self._ensure_pump()
            self._idle.clear()
            await self._idle.wait()

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._space.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._queue.clear()

    @property
    def pending(self) -> int:
        return len(self._queue)
