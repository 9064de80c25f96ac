"""What a turn stores for replay: its events, with streamed text and output coalesced.

A face replaying a session (`ChatSession.transcript()`) needs the text of a
message, not its thousand deltas; live output is capped per tool call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from synapse_lsp.events import Event, TextDelta, ThinkingDelta, ToolOutput


class Recorder:
    """Stores a turn's events for replay, coalescing text and output chunks."""

    MAX_OUTPUT = 64 * 1024

    def __init__(self, sink: Callable[[Event], None]) -> None:
        self._sink = sink
        self._pending: Event | None = None

    def add(self, event: Event) -> None:
        pending = self._pending
        if pending is not None:
            if (
                type(event) is type(pending)
                and isinstance(event, TextDelta | ThinkingDelta)
                and isinstance(pending, TextDelta | ThinkingDelta)
                and event.parent_tool_call_id == pending.parent_tool_call_id
            ):
                self._pending = dataclasses.replace(pending, text=pending.text + event.text)
                return
            if (
                isinstance(event, ToolOutput)
                and isinstance(pending, ToolOutput)
                and (event.tool_call_id, event.stream) == (pending.tool_call_id, pending.stream)
            ):
                if len(pending.chunk) < self.MAX_OUTPUT:
                    self._pending = dataclasses.replace(pending, chunk=pending.chunk + event.chunk)
                return
            self.flush()
        if isinstance(event, TextDelta | ThinkingDelta | ToolOutput):
            self._pending = event
        else:
            self._sink(event)

    def flush(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._sink(pending)
