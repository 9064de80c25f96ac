"""A request's body, encoded as the SDK would (UTF-8, compact JSON, no NaN), with the
parts that repeat call after call encoded once (`agent/model.py`)."""

from __future__ import annotations

import copy
import json
from typing import Any

# Conversations whose messages' JSON is kept: a turn and the subagents (`task:*`) or
# sessions beside it, each found by its first message.
KEPT_CONVERSATIONS = 4


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
# Per conversation, its messages as last encoded: (a copy, its JSON text); most recent last.
_CONVERSATIONS: list[list[tuple[Any, str]]] = []


def _messages(messages: list[Any]) -> list[str]:
    """Each message's JSON; those equal to the kept one at their place are not encoded
    again."""
    if not messages:
        return []
    found = (j for j, c in enumerate(_CONVERSATIONS) if c and c[0][0] == messages[0])
    index = next(found, None)
    if index is not None:
        kept = _CONVERSATIONS.pop(index)
    else:
        kept = []
        if len(_CONVERSATIONS) >= KEPT_CONVERSATIONS:
            _CONVERSATIONS.pop(0)
    _CONVERSATIONS.append(kept)
    texts = []
    for i, message in enumerate(messages):
        if i < len(kept) and kept[i][0] == message:
            texts.append(kept[i][1])
            continue
        entry = (copy.deepcopy(message), _json(message))
        if i < len(kept):
            kept[i] = entry
        else:
            kept.append(entry)
        texts.append(entry[1])
    del kept[len(messages) :]
    return texts


# One encoder: `json.dumps` with options builds a new one per call (~2 µs).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_json = _ENCODER.encode
