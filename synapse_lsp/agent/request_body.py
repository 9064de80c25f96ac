"""A request's body, encoded as the SDK would (UTF-8, compact JSON, no NaN), with the
parts that repeat call after call encoded once (`agent/model.py`)."""

from __future__ import annotations

import copy
import json
from typing import Any


def encode_body(params: dict[str, Any]) -> bytes:
    """The request body as the SDK would encode it (UTF-8, compact, no NaN). The system
    prompt and the tools, the same call after call (≈ 18 KB), are encoded again only
    when they differ from the last ones encoded (kept as a copy: an edit in place shows)."""
    parts = []
    for key, value in params.items():
        kept = _KEPT.get(key) if key in ("system", "tools") else None
        if key in ("system", "tools") and (kept is None or kept[0] != value):
            kept = _KEPT[key] = (copy.deepcopy(value), _json(value))
        parts.append(f"{_json(key)}:{kept[1] if kept is not None else _json(value)}")
    return ("{" + ",".join(parts) + "}").encode()


_KEPT: dict[str, tuple[Any, str]] = {}  # "system"/"tools" -> (a copy, its JSON text)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
