"""The model's view of a conversation: API message dicts and the rules that keep them valid.

Roles alternate (a repeated role is merged), every `tool_use` has a `tool_result`
(a crash or a cancel may have left none), and the last block carries the
incremental prompt-caching breakpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from synapse_lsp.agent import prompts

Message = dict[str, Any]

CANCELLED_RESULT = (
    "[Cancelled] The user cancelled this command while it ran; it was interrupted. "
    "Do not retry it unless the user asks."
)
NOT_RUN_RESULT = "[Cancelled] Not run: the user cancelled the turn before this command started."
INTERRUPTED_RESULT = (
    "[Interrupted] Synapse stopped before this command finished; no result was recorded."
)


def tool_result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": text,
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


def repair_history(messages: Iterable[Message]) -> list[Message]:
    """Merged roles, and a tool_result for every tool_use (a crash may have left none)."""
    out: list[Message] = []
    for message in messages:
        add_message(out, json.loads(json.dumps(message)))
    fixed: list[Message] = []
    for index, message in enumerate(out):
        fixed.append(message)
        if message["role"] != "assistant":
            continue
        ids = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        following = out[index + 1] if index + 1 < len(out) else None
        answered = set()
        if following is not None and following["role"] == "user":
            answered = {
                b.get("tool_use_id") for b in following["content"] if b.get("type") == "tool_result"
            }
        missing = [tool_result(i, INTERRUPTED_RESULT, True) for i in ids if i not in answered]
        if not missing:
            continue
        if following is not None and following["role"] == "user":
            following["content"] = missing + following["content"]
        else:
            fixed.append({"role": "user", "content": missing})
    return fixed


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
