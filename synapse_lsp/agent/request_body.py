"""A request's body, encoded as the SDK would (UTF-8, compact JSON, no NaN), with the
parts that repeat call after call encoded once (`agent/model.py`)."""

from __future__ import annotations

import copy
import json
from typing import Any

# Conversations whose messages' JSON is kept: a turn and the subagents (`task:*`) or
# sessions beside it, each found by its first message.
KEPT_CONVERSATIONS = 4
# Messages at the end of a conversation looked at one by one for what changed since the
# last request; before them, one comparison in C (a Python loop over a 1,000-call
# turn's history made 12% of its CPU).
TAIL = 4


def encode_body(params: dict[str, Any]) -> bytes:
    """The request body as the SDK would encode it (UTF-8, compact, no NaN). What is
    the same call after call is encoded again only when it differs from what was last
    encoded (kept as a copy: an edit in place shows): the system prompt and the tools
    (≈ 18 KB), and each message of the conversation (a turn's requests repeat all the
    earlier ones: encoding them again grows with the square of its length)."""
    parts = []
    for key, value in params.items():
        if key in ("system", "tools"):
            kept = _KEPT.get(key)
            if kept is None or kept[0] != value:
                kept = _KEPT[key] = (copy.deepcopy(value), _json(value))
            text = kept[1]
        elif key == "messages" and isinstance(value, list):
            text = "[" + ",".join(_messages(value)) + "]"
        else:
            text = _json(value)
        parts.append(f"{_json(key)}:{text}")
    return ("{" + ",".join(parts) + "}").encode()


_KEPT: dict[str, tuple[Any, str]] = {}  # "system"/"tools" -> (a copy, its JSON text)


class _Kept:
    """One conversation's messages as last encoded: a copy of each, and its JSON text."""

    def __init__(self) -> None:
        self.copies: list[Any] = []
        self.texts: list[str] = []


# Per conversation, most recent last.
_CONVERSATIONS: list[_Kept] = []


def _messages(messages: list[Any]) -> list[str]:
    """Each message's JSON; those equal to the kept one at their place are not encoded
    again. The kept ones are compared in one list comparison (each message's own
    comparison runs in C), not one by one in Python. The list returned is the kept
    one: join it before the next call."""
    if not messages:
        return []
    found = (j for j, c in enumerate(_CONVERSATIONS) if c.copies and c.copies[0] == messages[0])
    index = next(found, None)
    if index is not None:
        kept = _CONVERSATIONS.pop(index)
    else:
        kept = _Kept()
        if len(_CONVERSATIONS) >= KEPT_CONVERSATIONS:
            _CONVERSATIONS.pop(0)
    _CONVERSATIONS.append(kept)
    copies, texts = kept.copies, kept.texts
    same = min(len(copies), len(messages))
    if copies[:same] != messages[:same]:  # edited in place, or cut and grown again
        # Mostly at the end: the last request's cache breakpoint (history.py) is gone
        # from its message. The rest is compared in C, then the tail one by one.
        tail = max(0, same - TAIL)
        start = tail if copies[:tail] == messages[:tail] else 0
        same = next(i for i in range(start, same) if copies[i] != messages[i])
    del copies[same:], texts[same:]
    for message in messages[same:]:
        text = _json(message)  # first: a message that cannot be encoded keeps nothing
        copies.append(copy.deepcopy(message))
        texts.append(text)
    return texts


# One encoder: `json.dumps` with options builds a new one per call (~2 µs).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_json = _ENCODER.encode
