"""Reading another agent's tool input (`file_path`, `offset`…) for a built-in's
`from_tool_input`: what the hint for a tool Synapse does not have is built from."""

from __future__ import annotations

from typing import Any


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def heredoc(head: str, body: str) -> str:
    """`head <<'EOF'` with `body` (a delimiter the body does not contain)."""
    mark = "EOF"
    while mark in body.split("\n"):
        mark += "_"
    return f"{head} <<'{mark}'\n{body.rstrip(chr(10))}\n{mark}"
