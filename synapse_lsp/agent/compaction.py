"""Compaction: when the history nears the context window, older turns are summarised.

Compaction works on a history, not on the loop that owns it: `maybe_compact`
takes the messages, the context size the last model call reported, a model
client factory and `CompactionSettings`, and returns a `Compaction` (the new
history, the summary call's usage and a Notice to show) or None. The loop
(`loop.py`) imports this module; this module imports nothing from the loop.

Past `ratio` of the window, everything before the last `keep_turns` turns is
summarised by the model and replaced; if that fails, or there is too little to
summarise, older tool outputs are dropped instead. A turn starts at a user
message with text, so a `tool_use` is never separated from its `tool_result`.
The given list is never changed: the new history is a new list (blocks that
change are copies). The session file keeps the full record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from synapse_lsp.agent import prompts
from synapse_lsp.agent.history import Message, add_message, blocks, estimate_tokens, text_of
from synapse_lsp.agent.model import StreamDone
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Notice, Usage

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient

DEFAULT_CONTEXT_WINDOW = 200_000
COMPACT_RATIO = 0.8
KEEP_RECENT_TURNS = 2
DROPPED_OUTPUT = "[output dropped to save context]"


@dataclass(frozen=True)
class CompactionSettings:
    context_window: int = DEFAULT_CONTEXT_WINDOW
    ratio: float = COMPACT_RATIO
    keep_turns: int = KEEP_RECENT_TURNS
    output_limit: int = 4000  # characters of each tool output shown to the summariser

    @property
    def threshold(self) -> int:
        return int(self.context_window * self.ratio)


@dataclass(frozen=True)
class Compaction:
    """A compacted history and what it cost."""

    messages: list[Message]
    notice: Notice
    usage: Usage  # of the summary call (zero when outputs were only dropped)
    context_tokens: int  # estimated size of the new history


async def maybe_compact(
    messages: list[Message],
    *,
    context_tokens: int,
    model: Callable[[], ModelClient],
    settings: CompactionSettings | None = None,
) -> Compaction | None:
    """The compacted history if the last call (`context_tokens`) came close to the context
    window, else None (also when nothing could be made smaller)."""
    cfg = settings or CompactionSettings()
    if max(context_tokens, 0) < cfg.threshold:
        return None
    boundary = turn_boundary(messages, cfg.keep_turns)
    if boundary <= 0:
        dropped = _without_tool_outputs(messages, len(messages) - 2)
        if dropped is None:
            return None
        return Compaction(
            dropped,
            Notice("Context nearly full: dropped the output of older commands."),
            Usage(),
            estimate_tokens(dropped),
        )
    older, kept = messages[:boundary], messages[boundary:]
    try:
        summary, usage = await summarise(older, model, cfg.output_limit)
    except ModelError as exc:
        dropped = _without_tool_outputs(messages, boundary)
        if dropped is None:
            return None
        return Compaction(
            dropped,
            Notice(
                f"Could not summarise older turns ({exc.message}); dropped their "
                "command output instead.",
                "warning",
            ),
            Usage(),
            estimate_tokens(dropped),
        )
    new = summarised_history(summary, kept)
    return Compaction(
        new,
        Notice(
            f"Compacted the conversation: {len(older)} earlier messages were summarised "
            "(the session file keeps the full record)."
        ),
        usage,
        estimate_tokens(new),
    )


def summarised_history(summary: str, kept: list[Message]) -> list[Message]:
    """The new history: the summary as a user message, an acknowledgement, the kept turns."""
    new: list[Message] = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<conversation_summary>\nThe earlier part of this "
                    f"conversation, summarised:\n\n{summary.strip()}\n</conversation_summary>",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Understood. I'll continue from there."}],
        },
    ]
    for message in kept:
        add_message(new, message)
    return new


def turn_boundary(messages: list[Message], keep_turns: int = KEEP_RECENT_TURNS) -> int:
    """Index of the first message to keep: the start of the `keep_turns`-th last turn
    (a user message with text, so no tool_use is ever separated from its result)."""
    starts = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user"
        and any(b.get("type") == "text" for b in blocks(m["content"]))
        and not any(b.get("type") == "tool_result" for b in blocks(m["content"]))
    ]
    if len(starts) <= keep_turns:
        return 0
    return starts[-keep_turns]


def _without_tool_outputs(messages: list[Message], upto: int) -> list[Message] | None:
    """A copy of `messages` whose tool outputs before `upto` are dropped; None if none was."""
    out: list[Message] = []
    changed = False
    for index, message in enumerate(messages):
        content = blocks(message["content"])
        if index < upto and any(
            b.get("type") == "tool_result" and b.get("content") != DROPPED_OUTPUT for b in content
        ):
            content = [
                {**b, "content": DROPPED_OUTPUT} if b.get("type") == "tool_result" else b
                for b in content
            ]
            changed = True
            out.append({**message, "content": content})
        else:
            out.append(message)
    return out if changed else None


async def summarise(
    older: list[Message], model: Callable[[], ModelClient], output_limit: int = 4000
) -> tuple[str, Usage]:
    """The model's summary of `older` (no tools) and the call's usage; ModelError if it
    failed or came back empty."""
    client = model()
    text = ""
    usage = Usage()
    request = [{"role": "user", "content": transcript_for_summary(older, output_limit)}]
    stream = client.stream(system=prompts.compaction_instructions(), messages=request)
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, StreamDone):
                text = text_of(item.content)
                usage = usage + item.usage
    if not text.strip():
        raise ModelError("the summary came back empty")
    return text, usage


def transcript_for_summary(messages: list[Message], limit: int = 4000) -> str:
    parts: list[str] = []
    for message in messages:
        who = "User" if message["role"] == "user" else "Assistant"
        for block in blocks(message["content"]):
            kind = block.get("type")
            if kind == "text":
                parts.append(f"{who}: {block.get('text', '')}")
            elif kind == "tool_use":
                parts.append(f"Assistant ran: {block.get('input', {}).get('command', '')}")
            elif kind == "tool_result":
                body = block.get("content", "")
                if isinstance(body, list):
                    body = text_of(body)
                body = str(body)
                if len(body) > limit:
                    body = body[: limit // 2] + "\n[...]\n" + body[-limit // 2 :]
                error = " (error)" if block.get("is_error") else ""
                parts.append(f"Result{error}:\n{body}")
    return "\n\n".join(parts)
