"""The queue between a running turn and its consumer, bounded in memory.

Producers are synchronous (model stream callbacks, a shell's output sink), so
they cannot wait for a slow consumer. Instead, while events pile up, text and
tool-output chunks merge into the pending event of the same kind, and once the
pending tool output passes `max_output_bytes` further chunks of that call are
dropped and counted: the consumer gets one notice saying how much it missed
(the model's result and the spilled full-output file are unaffected). Model text
is bounded by the model's own output limit, so it is merged, never dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from synapse_lsp.events import (
    Event,
    Notice,
    TextDelta,
    ThinkingDelta,
    ToolOutput,
    TurnFinished,
    Usage,
)

MAX_PENDING_OUTPUT_BYTES = 8 * 1024 * 1024


class EventQueue:
    def __init__(self, max_output_bytes: int = MAX_PENDING_OUTPUT_BYTES) -> None:
        self._items: deque[Event | None] = deque()
        self._ready = asyncio.Event()
        self._max_output = max_output_bytes
        self._output_bytes = 0  # ToolOutput text pending in the queue
        self._dropped: dict[str, int] = {}  # tool_call_id -> bytes not delivered

    def __len__(self) -> int:
        return len(self._items)

    @property
    def pending_output_bytes(self) -> int:
        return self._output_bytes

    def feed_from(self, worker: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `worker`, the task that fills this queue and ends it (TurnFinished, then
        None). A task cancelled before its first step never runs its body: then the
        stream ends here with TurnFinished("cancelled"), or its consumer would wait
        forever (nothing of the turn was recorded: the history stays as it was)."""
        task = asyncio.get_running_loop().create_task(worker)
        task.add_done_callback(self._end_unstarted)
        return task

    def _end_unstarted(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            self.put_nowait(TurnFinished("cancelled", Usage()))
            self.put_nowait(None)

    def put_nowait(self, event: Event | None) -> None:
        if isinstance(event, ToolOutput):
            size = len(event.chunk)
            if self._output_bytes + size > self._max_output:
                self._dropped[event.tool_call_id] = self._dropped.get(event.tool_call_id, 0) + size
                return
            self._output_bytes += size
        elif self._dropped:  # before the next event (or the end), say what was missed
            self._flush_dropped()
        if self._items and self._merge(self._items[-1], event):
            return
        self._items.append(event)
        self._ready.set()

    async def get(self) -> Event | None:
        while not self._items:
            if self._dropped:
                self._flush_dropped()
                continue
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        if isinstance(item, ToolOutput):
            self._output_bytes -= len(item.chunk)
        return item

    def _merge(self, last: Event | None, event: Event | None) -> bool:
        """Fold `event` into the pending `last` when they are the same stream."""
        if len(self._items) < 2:  # the consumer is keeping up: keep events as they came
            return False
        if (
            isinstance(last, TextDelta | ThinkingDelta)
            and type(event) is type(last)
            and event.parent_tool_call_id == last.parent_tool_call_id  # type: ignore[union-attr]
        ):
            self._items[-1] = replace(last, text=last.text + event.text)  # type: ignore[union-attr]
            return True
        if (
            isinstance(last, ToolOutput)
            and isinstance(event, ToolOutput)
            and (event.tool_call_id, event.stream) == (last.tool_call_id, last.stream)
        ):
            self._items[-1] = replace(last, chunk=last.chunk + event.chunk)
            return True
        return False

    def _flush_dropped(self) -> None:
        dropped, self._dropped = self._dropped, {}
        for tool_call_id, size in dropped.items():
            self._items.append(
                Notice(
                    f"{size} bytes of live output of {tool_call_id} were not streamed because "
                    "the client fell behind; the command's result is complete.",
                    "warning",
                )
            )
        self._ready.set()
