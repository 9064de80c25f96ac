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
from typing import Any

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
)

COALESCE_INTERVAL = 0.016
MAX_OUTPUT_CHUNK = 16 * 1024
MAX_PENDING = 256

Update = dict[str, Any]
# (command) -> (title, kind, paths mentioned)
Summarizer = Callable[[str], tuple[str, str, list[str]]]


def usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cacheCreationInputTokens": usage.cache_creation_input_tokens,
        "cacheReadInputTokens": usage.cache_read_input_tokens,
    }


def default_summarizer(command: str) -> tuple[str, str, list[str]]:
    """Title, ACP kind and paths from `summaries.titles`; the raw command until it exists."""
    try:
        from synapse_lsp.summaries.titles import summarize
    except ImportError:
        return command, "execute", []
    try:
        summary = summarize(command)
    except Exception:  # a summary is decoration: never let it break a turn
        return command, "execute", []
    paths = [str(p["path"]) for p in summary.parsed if isinstance(p.get("path"), str)]
    return summary.title, summary.kind, paths


def user_message(text: str) -> Update:
    return {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}


def event_to_update(
    event: Event | Any,
    *,
    summarize: Summarizer = default_summarizer,
    cwd: Path | None = None,
) -> Update | None:
    """The ACP-shaped update for one event (None for events editors need not see)."""
    update: Update
    if isinstance(event, TextDelta):
        update = {"sessionUpdate": "agent_message_chunk", "content": _text(event.text)}
    elif isinstance(event, ThinkingDelta):
        update = {"sessionUpdate": "agent_thought_chunk", "content": _text(event.text)}
    elif isinstance(event, ToolCallStarted):
        title, kind, paths = summarize(event.command)
        locations = []
        for p in paths:
            path = Path(p).expanduser()
            if not path.is_absolute() and cwd is not None:
                path = cwd / path
            locations.append({"path": str(path)})
        update = {
            "sessionUpdate": "tool_call",
            "toolCallId": event.tool_call_id,
            "title": title,
            "kind": kind,
            "status": "in_progress",
            "rawInput": {"command": event.command, "restart": event.restart},
            "locations": locations,
        }
    elif isinstance(event, ToolOutput):
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": event.tool_call_id,
            "output": {"stream": event.stream, "text": event.chunk},
        }
    elif isinstance(event, ToolCallFinished):
        raw: dict[str, Any] = {
            "exitCode": event.exit_code,
            "isError": event.is_error,
            "layer": event.layer,
            "category": event.category,
        }
        edit = event.data.get("edit") if isinstance(event.data, dict) else None
        if isinstance(edit, dict) and "path" in edit:
            raw["edit"] = {"path": edit["path"], "applied": not event.is_error}
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": event.tool_call_id,
            "status": event.status,
            "content": [{"type": "content", "content": _text(event.text)}],
            "rawOutput": raw,
        }
    elif isinstance(event, PlanUpdated):
        update = {
            "sessionUpdate": "plan",
            "explanation": event.explanation,
            "entries": [
                {"content": e.step, "priority": "medium", "status": e.status} for e in event.entries
            ],
        }
    elif isinstance(event, UsageUpdated):
        update = {"sessionUpdate": "usage_update", "usage": usage_dict(event.usage)}
    elif isinstance(event, Notice):
        update = {"sessionUpdate": "notice", "level": event.level, "message": event.message}
    elif isinstance(event, TurnFinished):
        update = {
            "sessionUpdate": "turn_finished",
            "stopReason": event.stop_reason,
            "usage": usage_dict(event.usage),
        }
        if event.error is not None:
            update["error"] = event.error
        return update
    elif type(event).__name__ == "UserMessage" and isinstance(getattr(event, "text", None), str):
        # Stored user prompts (replay); the agent's event type, if it has one.
        return user_message(event.text)
    else:
        return None
    parent = getattr(event, "parent_tool_call_id", None)
    if parent is not None:
        update["parentToolCallId"] = parent
    return update


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


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
    update: Update
    # "text:<kind>:<parent>" or "out:<id>:<stream>:<parent>" when mergeable, else None
    merge_key: str | None
    size: int = 0
    replay: bool = False


class UpdateStream:
    """Sends one session's updates in order with coalescing and a bounded queue.

    `send` writes one `synapse/sessionUpdate` params object; `drained` (optional)
    waits until the transport has room, so a client that stops reading stalls
    this stream — and through `put` the agent loop — rather than growing memory.
    """

    def __init__(
        self,
        session_id: str,
        send: Callable[[dict[str, Any]], None],
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

    async def put(self, update: Update, *, replay: bool = False) -> None:
        """Queue one update (merging text/output where allowed); waits while the queue is full."""
        if self._closed:
            return
        kind = update.get("sessionUpdate")
        parent = update.get("parentToolCallId")
        merge_key: str | None = None
        if kind in ("agent_message_chunk", "agent_thought_chunk") and not replay:
            merge_key = f"text:{kind}:{parent}"
        elif kind == "tool_call_update" and "output" in update and not replay:
            merge_key = f"out:{update['toolCallId']}:{update['output']['stream']}:{parent}"
        if merge_key is not None and self._queue and self._queue[-1].merge_key == merge_key:
            last = self._queue[-1]
            if merge_key.startswith("text:"):
                last.update["content"]["text"] += update["content"]["text"]
                return
            text = update["output"]["text"]
            if last.size + len(text) <= MAX_OUTPUT_CHUNK:
                last.update["output"]["text"] += text
                last.size += len(text)
                return
        pieces: list[Update]
        if kind == "tool_call_update" and "output" in update:
            pieces = [
                {**update, "output": {**update["output"], "text": piece}}
                for piece in split_output(update["output"]["text"])
            ]
        else:
            pieces = [update]
        for piece in pieces:
            while len(self._queue) >= self._max_pending and not self._closed:
                self._space.clear()
                await self._space.wait()
            size = len(piece["output"]["text"]) if "output" in piece else 0
            if kind in ("agent_message_chunk", "agent_thought_chunk"):
                piece = {**piece, "content": dict(piece["content"])}
            elif "output" in piece:
                piece = {**piece, "output": dict(piece["output"])}
            self._queue.append(_Pending(piece, merge_key, size, replay))
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
                payload: dict[str, Any] = {"sessionId": self.session_id, "update": head.update}
                if head.replay:
                    payload["replay"] = True
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
