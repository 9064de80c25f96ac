"""What fills the context window, and the `/context`, `/compact`, `/cost` commands.

`measure` sizes the next request by part — the system prompt, the tool definition,
the history and, within it, the tool outputs of the last turn — against the model's
window (pricing.py). With the API's token counting (`messages/count_tokens`) the
parts are **counted**: four counts (all; without the system prompt; without the tool;
without the last outputs), the differences are the parts, so they add up to the
total exactly. When counting fails (no key, an endpoint without it, a timeout) they
are **estimated**, a quarter of the characters of their JSON, and the report says
why.

The slash handlers here reach their session through `ChatHost` (a face that has a
current chat session); slash.py lists them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from synapse_lsp.agent.compaction import turn_boundary
from synapse_lsp.agent.history import Message, blocks
from synapse_lsp.errors import ModelError, SynapseError

if TYPE_CHECKING:
    from synapse_lsp.agent.pricing import Cost

Source = Literal["counted", "estimated"]
Counter = Callable[..., Awaitable[int]]


@dataclass(frozen=True)
class ContextReport:
    model: str
    window: int  # the model's context window, tokens
    system: int
    tools: int
    history: int  # the messages, without the last turn's tool outputs
    tool_outputs: int  # the tool outputs of the last turn
    source: Source
    note: str | None = None  # why the parts are estimated
    # The instruction files in the system prompt (AGENTS.md, CLAUDE.md): path, about
    # how many tokens, the imports not read and why.
    instructions: tuple[tuple[str, int, tuple[str, ...]], ...] = ()

    @property
    def total(self) -> int:
        return self.system + self.tools + self.history + self.tool_outputs

    def text(self) -> str:
        """The REPL's `/context`."""
        rows = [
            ("System prompt", self.system),
            ("Tool definition", self.tools),
            ("History", self.history),
            ("Last tool outputs", self.tool_outputs),
        ]
        how = (
            "counted by the API"
            if self.source == "counted"
            else f"estimated (~4 characters a token{': ' + self.note if self.note else ''})"
        )
        lines = [
            f"Context: {self.total:,} of {self.window:,} tokens "
            f"({_percent(self.total, self.window)}) for {self.model}, {how}"
        ]
        lines += [
            f"  {name:<18} {count:>9,}  {_percent(count, self.window):>6}" for name, count in rows
        ]
        if self.instructions:
            lines.append("  Instructions in the system prompt (about, ~4 characters a token):")
        for path, tokens, refused in self.instructions:
            lines.append(f"    {path}  ~{tokens:,} tokens")
            lines += [f"      not imported: {why}" for why in refused]
        return "\n".join(lines)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def without_last_outputs(messages: list[Message]) -> list[Message]:
    """A copy of `messages` whose last turn's tool results carry no content."""
    start = max(turn_boundary(messages, 1), 0)
    out: list[Message] = list(messages[:start])
    for message in messages[start:]:
        content = blocks(message["content"])
        if message["role"] == "user" and any(b.get("type") == "tool_result" for b in content):
            content = [
                {k: v for k, v in b.items() if k != "content"}
                if b.get("type") == "tool_result"
                else b
                for b in content
            ]
            out.append({**message, "content": content})
        else:
            out.append(message)
    return out


def _estimate(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)) // 4


def estimate(
    system: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[Message]
) -> tuple[int, int, int, int]:
    """(system, tools, history, last outputs), estimated."""
    whole = _estimate(messages) if messages else 0
    rest = _estimate(without_last_outputs(messages)) if messages else 0
    return _estimate(system), _estimate(tools), rest, max(whole - rest, 0)


async def count(
    counter: Counter,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[Message],
) -> tuple[int, int, int, int]:
    """(system, tools, history, last outputs) from the API's counts; ModelError if one
    count failed. The four calls run concurrently."""
    request = messages or [{"role": "user", "content": [{"type": "text", "text": "."}]}]
    everything, no_system, bare, no_outputs = await asyncio.gather(
        counter(system=system, tools=tools, messages=request),
        counter(tools=tools, messages=request),
        counter(messages=request),
        counter(messages=without_last_outputs(request)),
    )
    history = no_outputs if messages else 0
    outputs = max(bare - no_outputs, 0) if messages else 0
    return (
        max(everything - no_system, 0),
        max(no_system - bare, 0),
        history,
        outputs,
    )


async def measure(
    *,
    model: str,
    window: int,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[Message],
    counter: Counter | None,
    why_not: str | None = None,
    instructions: tuple[tuple[str, int, tuple[str, ...]], ...] = (),
) -> ContextReport:
    """The report: counted with `counter` (the model client's `count_tokens`), else
    estimated (`why_not` says why there is no counter)."""
    if counter is not None:
        try:
            parts = await count(counter, system, tools, messages)
        except ModelError as exc:
            why_not = exc.message
        else:
            return ContextReport(model, window, *parts, "counted", instructions=instructions)
    return ContextReport(
        model,
        window,
        *estimate(system, tools, messages),
        "estimated",
        why_not,
        instructions=instructions,
    )


# --------------------------------------------------------------- slash commands


class ContextSource(Protocol):
    """What the commands need of a chat session (agent.session.ChatSession)."""

    @property
    def busy(self) -> bool: ...

    async def context_report(self) -> ContextReport: ...

    async def compact(self, focus: str | None = None) -> str: ...

    def turn_cost(self) -> Cost: ...

    def session_cost(self) -> Cost: ...


@runtime_checkable
class ChatHost(Protocol):
    """A face with a current chat session (the REPL's Runtime)."""

    def chat_session(self) -> ContextSource | None: ...


def _session(host: object, name: str) -> ContextSource:
    session = host.chat_session() if isinstance(host, ChatHost) else None
    if session is None:
        raise SynapseError(f"/{name} is not available here (no chat session).")
    return session


async def context_command(host: object, arg: str) -> str:
    try:
        return (await _session(host, "context").context_report()).text()
    except SynapseError as exc:
        return exc.message


async def compact_command(host: object, arg: str) -> str:
    try:
        session = _session(host, "compact")
        if session.busy:
            return "A turn is running: /compact after it ends."
        return await session.compact(arg.strip() or None)
    except SynapseError as exc:
        return exc.message


async def cost_command(host: object, arg: str) -> str:
    from synapse_lsp.agent.pricing import cost_line

    try:
        session = _session(host, "cost")
    except SynapseError as exc:
        return exc.message
    return "\n".join(
        [cost_line("Last turn", session.turn_cost()), cost_line("Session", session.session_cost())]
    )
