"""Reading Claude Code's files: where the user's live (`~/.claude`, or
`$CLAUDE_CONFIG_DIR`), their YAML front matter (the flat subset Claude Code's command
and agent files use) and its comma lists. Used by claude_commands.py and
claude_agents.py; which folders are read, and when, is claude_code.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_BYTES = 256 * 1024  # one command or agent file; a larger one is skipped
USER, PROJECT = "user", "project"  # where a file came from


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """`---\\nkey: value\\n---\\nbody` -> ({key: value}, body). Flat keys; a YAML block
    list (`  - item` lines) is joined with ", "; no front matter: ({}, text)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    last: str | None = None
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "\n".join(lines[index + 1 :]).strip("\n")
        item = line.strip()
        if line.startswith((" ", "\t")) and item.startswith("- ") and last is not None:
            value = item[2:].strip().strip("'\"")
            meta[last] = f"{meta[last]}, {value}" if meta[last] else value
            continue
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t", "#")):
            last = key.strip().lower()
            meta[last] = value.strip().strip("'\"")
    return {}, text


def split_list(value: str) -> tuple[str, ...]:
    """`Read, Grep` / `[Read, Grep]` / `Bash(git add:*), Bash(git commit:*)` -> items
    (commas inside parentheses stay)."""
    inner = value.strip().removeprefix("[").removesuffix("]")
    items = re.split(r",(?![^()]*\))", inner)
    return tuple(i.strip().strip("'\"") for i in items if i.strip().strip("'\""))


def read_text(path: Path) -> str | None:
    """A small regular file's text (None: not one, unreadable or too large)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
