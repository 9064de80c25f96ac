"""The model's view of a conversation: API message dicts and the rules that keep them valid.

Roles alternate (a repeated role is merged), every `tool_use` has a `tool_result`
(a crash or a cancel may have left none), and the last block carries the
incremental prompt-caching breakpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from synapse_lsp.agent import prompts
from synapse_lsp.agent.model import KNOWN_BLOCK_TYPES

Message = dict[str, Any]

CANCELLED_RESULT = (
    "[Cancelled] The user cancelled this command while it ran; it was interrupted. "
    "Do not retry it unless the user asks."
)
NOT_RUN_RESULT = "[Cancelled] Not run: the user cancelled the turn before this command started."
INTERRUPTED_RESULT = (
    "[Interrupted] Synapse stopped before this command finished; no result was recorded."
)


def tool_result(
    tool_use_id: str, text: str, is_error: bool, attachments: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """A tool_result block: the text, and after it any `attachments` (image blocks)."""
    content: str | list[dict[str, Any]] = text
    if attachments:
        content = [{"type": "text", "text": text}, *attachments]
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": content,
        "is_error": is_error,
    }


def blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def add_message(messages: list[Message], message: Message) -> None:
    """Append, merging into the previous message when the roles repeat (a failed turn
    leaves the user's text last; the next prompt joins it instead of breaking alternation)."""
    if messages and messages[-1]["role"] == message["role"]:
        last = messages[-1]
        last["content"] = blocks(last["content"]) + blocks(message["content"])
    else:
        messages.append({"role": message["role"], "content": blocks(message["content"])})


LOST_START = "[The start of this conversation was not recorded.]"

# Blocks only the other side may send: a user never sends tool_use or thinking, the
# model never sends tool_result.
_NOT_FROM = {
    "user": frozenset({"tool_use", "thinking", "redacted_thinking", "server_tool_use"}),
    "assistant": frozenset({"tool_result"}),
}


def _usable(role: str, block: Any) -> bool:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    kind = block["type"]
    if kind in _NOT_FROM[role]:
        return False
    if role == "assistant" and kind not in KNOWN_BLOCK_TYPES:
        return False  # a block type this client does not know (stored before it was dropped)
    if kind == "text":  # the API refuses empty and whitespace-only text blocks
        return isinstance(block.get("text"), str) and bool(block["text"].strip())
    if kind == "tool_use":
        return isinstance(block.get("id"), str) and bool(block["id"])
    if kind == "tool_result":
        return isinstance(block.get("tool_use_id"), str)
    return True


def _tool_use_ids(message: Message) -> list[str]:
    return [b["id"] for b in message["content"] if b.get("type") == "tool_use"]


def repair_history(messages: Iterable[Message]) -> list[Message]:
    """A copy of `messages` that the Messages API accepts, whatever a crash, a cancel or
    a damaged session file left:

    - roles alternate (a repeated role is merged) and the first message is the user's;
    - every `tool_use` is answered by a `tool_result` at the start of the next (user)
      message, in order; a missing one becomes an "[Interrupted]" error result;
    - a `tool_result` that answers no `tool_use` of the message right before it (an
      orphan), or answers one twice, is dropped; a message left empty is dropped;
    - blocks on the wrong side (a tool_result from the model, a tool_use from the user),
      model blocks of a type this client does not know, and empty text blocks are dropped.

    Repairing a repaired history changes nothing."""
    merged: list[Message] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in _NOT_FROM:
            continue
        role = message["role"]
        copied = json.loads(json.dumps(blocks(message.get("content"))))
        content = [b for b in copied if _usable(role, b)]
        if content:
            add_message(merged, {"role": role, "content": content})
    out: list[Message] = []
    for message in merged:
        previous = out[-1] if out else None
        if message["role"] == "assistant":
            if previous is not None and previous["role"] == "assistant" and _tool_use_ids(previous):
                # the user message that answered it was lost: answer it here
                out.append({"role": "user", "content": _answers(_tool_use_ids(previous), {})})
            add_message(out, message)
            continue
        pending = _tool_use_ids(previous) if previous and previous["role"] == "assistant" else []
        answers: dict[str, dict[str, Any]] = {}
        others: list[dict[str, Any]] = []
        for block in message["content"]:
            if block.get("type") != "tool_result":
                others.append(block)
            elif block["tool_use_id"] in pending and block["tool_use_id"] not in answers:
                answers[block["tool_use_id"]] = block
            # else: an orphan or a second answer; the API would refuse the request
        content = _answers(pending, answers) + others
        if content:
            add_message(out, {"role": "user", "content": content})
    if out and out[-1]["role"] == "assistant" and _tool_use_ids(out[-1]):
        out.append({"role": "user", "content": _answers(_tool_use_ids(out[-1]), {})})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": LOST_START}]})
    return out


def _answers(ids: list[str], given: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [given.get(i) or tool_result(i, INTERRUPTED_RESULT, True) for i in ids]


def with_cache_breakpoint(messages: list[Message]) -> list[Message]:
    """A shallow copy whose last block carries cache_control (incremental prompt caching)."""
    if not messages:
        return messages
    last = messages[-1]
    content = blocks(last["content"])
    for i in range(len(content) - 1, -1, -1):
        if content[i].get("type") in ("text", "tool_result", "tool_use", "image"):
            content = [
                *content[:i],
                {**content[i], "cache_control": prompts.CACHE},
                *content[i + 1 :],
            ]
            return [*messages[:-1], {"role": last["role"], "content": content}]
    return messages


def estimate_tokens(messages: list[Message]) -> int:
    return len(json.dumps(messages)) // 4


def text_of(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")
