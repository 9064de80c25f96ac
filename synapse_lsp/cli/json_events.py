"""`chat -p --output-format stream-json`: one turn's events as JSON objects (the shapes
are documented in docs/user-guide.md "Headless runs: JSON in and out").

The agent's stream (events.py) is folded into what a script wants: `assistant` is the
complete text of one model response (not each delta), `tool_call` a command as it
starts, `tool_result` as it ends — with the keys of a `synapse exec --json` record
(`exec.command_record`), its live output collected into `stdout`/`stderr` (bounded) —,
`permission_denial` a command the gate refused, `notice`, `plan`, and `usage` after
each model response. Thinking is not shown (as `-p`'s text never prints it), nor live
output as it comes. Events of a sub-agent carry its `task:*` call's id in
`parent_tool_call_id`. The face keeps what the turn's `result` needs: the answer
(the main agent's text after its last command, as text mode prints it), the model
calls, the denials.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from synapse_lsp.cli.exec import command_record
from synapse_lsp.events import (
    Event,
    Notice,
    PlanUpdated,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
    UsageUpdated,
)

Emit = Callable[[dict[str, Any]], None]
KEPT_OUTPUT = 32 * 1024  # characters of a stream kept at each end (64 KiB in all)
NOT_RUN = "Not run: "


def usage_dict(usage: Usage) -> dict[str, int]:
    return dataclasses.asdict(usage)


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(
        max(0, a.input_tokens - b.input_tokens),
        max(0, a.output_tokens - b.output_tokens),
        max(0, a.cache_creation_input_tokens - b.cache_creation_input_tokens),
        max(0, a.cache_read_input_tokens - b.cache_read_input_tokens),
    )


class Kept:
    """One stream's output, bounded: its first and last `KEPT_OUTPUT` characters."""

    def __init__(self) -> None:
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, chunk: str) -> None:
        self.total += len(chunk)
        room = KEPT_OUTPUT - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail = (self.tail + chunk)[-KEPT_OUTPUT:]

    def text(self) -> str:
        hidden = self.total - len(self.head) - len(self.tail)
        if hidden <= 0:
            return self.head + self.tail
        return f"{self.head}\n[\u2026 {hidden:,} characters not shown \u2026]\n{self.tail}"


@dataclass
class _Call:
    command: str
    title: str
    kind: str
    started: float
    stdout: Kept = field(default_factory=Kept)
    stderr: Kept = field(default_factory=Kept)


def summary(command: str) -> tuple[str, str]:
    """(title, kind) of a command line, as every face shows it (summaries/titles.py)."""
    from synapse_lsp.summaries.titles import summarize

    try:
        found = summarize(command)
    except Exception:  # a summary is cosmetic: never fail a turn over it
        return command, "execute"
    return found.title, found.kind


def denial_reason(text: str) -> str:
    """Why the gate refused a command, from the result the model was given."""
    for line in text.splitlines():
        if line.startswith(NOT_RUN):
            return line[len(NOT_RUN) :]
    return text.strip()


class TurnFace:
    """Shows one turn's events as JSON objects (`emit`), keeping what its result needs."""

    def __init__(self, emit: Emit, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.finished: TurnFinished | None = None
        self.model_calls = 0  # the main agent's model responses
        self.denials: list[dict[str, Any]] = []
        self._answer: list[str] = []  # the main agent's text since its last command
        self._text: dict[str | None, list[str]] = {}  # the response streaming, per agent
        self._calls: dict[str, _Call] = {}
        self._totals: dict[str | None, Usage] = {}  # usage so far, per agent
        self._nested = Usage()  # sub-agents' usage since the main agent's last response

    @property
    def answer(self) -> str:
        return "".join(self._answer).strip()

    def show(self, event: Event) -> None:
        parent = getattr(event, "parent_tool_call_id", None)
        if isinstance(event, TextDelta):
            self._text.setdefault(parent, []).append(event.text)
            if parent is None:
                self._answer.append(event.text)
        elif isinstance(event, UsageUpdated):
            self._flush_text(parent)
            self._usage(event)
        elif isinstance(event, ToolCallStarted):
            self._flush_text(parent)
            self._started(event)
        elif isinstance(event, ToolOutput):
            call = self._calls.get(event.tool_call_id)
            if call is not None:
                (call.stderr if event.stream == "stderr" else call.stdout).add(event.chunk)
        elif isinstance(event, ToolCallFinished):
            self._finished(event)
        elif isinstance(event, Notice):
            if event.discards_text:  # a retried stream: what it said is void
                self._text.pop(parent, None)
                if parent is None:
                    self._answer.clear()
            self.emit(
                {"type": "notice", "level": event.level, "message": event.message,
                 "code": event.code, "parent_tool_call_id": parent}
            )  # fmt: skip
        elif isinstance(event, PlanUpdated):
            entries = [dataclasses.asdict(e) for e in event.entries]
            self.emit(
                {"type": "plan", "entries": entries, "explanation": event.explanation,
                 "parent_tool_call_id": parent}
            )  # fmt: skip
        elif isinstance(event, TurnFinished):
            for agent in list(self._text):
                self._flush_text(agent)
            self.finished = event

    def _flush_text(self, parent: str | None) -> None:
        text = "".join(self._text.pop(parent, ()))
        if text.strip():
            self.emit({"type": "assistant", "text": text, "parent_tool_call_id": parent})

    def _usage(self, event: UsageUpdated) -> None:
        parent = event.parent_tool_call_id
        step = _minus(event.usage, self._totals.get(parent, Usage()))
        self._totals[parent] = event.usage
        if parent is None:  # its totals took in the sub-agents' usage meanwhile
            step, self._nested = _minus(step, self._nested), Usage()
            self.model_calls += 1
        else:
            self._nested = self._nested + step
        self.emit(
            {"type": "usage", "usage": usage_dict(step), "total": usage_dict(event.usage),
             "parent_tool_call_id": parent}
        )  # fmt: skip

    def _started(self, event: ToolCallStarted) -> None:
        if event.parent_tool_call_id is None:
            self._answer.clear()  # text before a command is not the answer
        title, kind = summary(event.command)
        self._calls[event.tool_call_id] = _Call(event.command, title, kind, self.clock())
        self.emit(
            {"type": "tool_call", "id": event.tool_call_id, "command": event.command,
             "restart": event.restart, "title": title, "kind": kind,
             "parent_tool_call_id": event.parent_tool_call_id}
        )  # fmt: skip

    def _finished(self, event: ToolCallFinished) -> None:
        call = self._calls.pop(event.tool_call_id, None)
        if call is None:
            call = _Call("", "", "execute", self.clock())
        parent = event.parent_tool_call_id
        if event.status == "denied":
            denial = {
                "id": event.tool_call_id,
                "command": call.command,
                "reason": denial_reason(event.text),
            }
            self.denials.append(denial)
            self.emit({"type": "permission_denial", **denial, "parent_tool_call_id": parent})
        record = command_record(
            call.command, event.layer, event.exit_code, event.is_error, event.category,
            call.stdout.text(), call.stderr.text(), event.text, self.clock() - call.started,
        )  # fmt: skip
        self.emit(
            {"type": "tool_result", "id": event.tool_call_id, **record, "status": event.status,
             "title": call.title, "kind": call.kind, "parent_tool_call_id": parent}
        )  # fmt: skip
