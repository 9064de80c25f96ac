"""Compaction: when the history nears the context window, older turns are summarised.

Before each model call the loop asks `maybe_compact`. Past COMPACT_RATIO of the
window (token counts from the last response's usage), everything before the last
KEEP_RECENT_TURNS turns is summarised by the model and replaced; if that fails,
or there is too little to summarise, older tool outputs are dropped instead. A
turn starts at a user message with text, so a `tool_use` is never separated
from its `tool_result`. The session file keeps the full record.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from synapse_lsp.agent import prompts
from synapse_lsp.agent.history import Message, add_message, blocks, estimate_tokens, text_of
from synapse_lsp.agent.model import StreamDone
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Notice

if TYPE_CHECKING:
    from synapse_lsp.agent.loop import Emit, Loop

DEFAULT_CONTEXT_WINDOW = 200_000
COMPACT_RATIO = 0.8
KEEP_RECENT_TURNS = 2
DROPPED_OUTPUT = "[output dropped to save context]"


async def maybe_compact(loop: Loop, emit: Emit) -> None:
    """Compact `loop.messages` in place of the old list if the last call came close to the
    context window; says so with a Notice."""
    threshold = int(loop.context_window * COMPACT_RATIO)
    if max(loop.last_context_tokens, 0) < threshold:
        return
    boundary = turn_boundary(loop.messages)
    if boundary <= 0:
        if _drop_tool_outputs(loop, len(loop.messages) - 2):
            emit(loop.tag(Notice("Context nearly full: dropped the output of older commands.")))
        return
    older, kept = loop.messages[:boundary], loop.messages[boundary:]
    try:
        summary = await _summarise(loop, older)
    except ModelError as exc:
        if _drop_tool_outputs(loop, boundary):
            emit(
                loop.tag(
                    Notice(
                        f"Could not summarise older turns ({exc.message}); dropped their "
                        "command output instead.",
                        "warning",
                    )
                )
            )
        return
    new = summarised_history(summary, kept)
    loop.messages = new
    loop.last_context_tokens = estimate_tokens(new)
    if loop.on_compaction is not None:
        loop.on_compaction(new)
    emit(
        loop.tag(
            Notice(
                f"Compacted the conversation: {len(older)} earlier messages were summarised "
                "(the session file keeps the full record)."
            )
        )
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


def drop_tool_outputs(messages: list[Message], upto: int) -> bool:
    """Replace the output of every tool_result before `upto`, in place; True if any changed."""
    changed = False
    for message in messages[: max(upto, 0)]:
        for block in blocks(message["content"]):
            if block.get("type") == "tool_result" and block.get("content") != DROPPED_OUTPUT:
                block["content"] = DROPPED_OUTPUT
                changed = True
    return changed


def _drop_tool_outputs(loop: Loop, upto: int) -> bool:
    changed = drop_tool_outputs(loop.messages, upto)
    if changed:
        loop.last_context_tokens = estimate_tokens(loop.messages)
        if loop.on_compaction is not None:
            loop.on_compaction(loop.messages)
    return changed


async def _summarise(loop: Loop, older: list[Message]) -> str:
    model = loop.model()
    text = ""
    request = [{"role": "user", "content": transcript_for_summary(older)}]
    stream = model.stream(system=prompts.compaction_instructions(), messages=request)
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, StreamDone):
                text = text_of(item.content)
                loop.turn_usage = loop.turn_usage + item.usage
    if not text.strip():
        raise ModelError("the summary came back empty")
    return text


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
