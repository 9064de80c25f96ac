"""Reading Claude Code's command and agent files: their size bound, the comma lists of
their YAML front matter (read by synapse_lsp/frontmatter.py, the one reader skills
share) and who wins a name. Used by claude_commands.py and claude_agents.py; which
folders are read, and when, is claude_code.py's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

MAX_BYTES = 256 * 1024  # one command or agent file; a larger one is skipped
USER, PROJECT = "user", "project"  # where a file came from


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


class Defined(Protocol):
    """A command or sub-agent definition: where it was read, and whose it is."""

    @property
    def path(self) -> Path: ...

    @property
    def scope(self) -> str: ...


def replaced(earlier: Defined | None, later: Path) -> list[str]:
    """The one line saying the folder's definition `earlier` is not used because the
    user's `later` has its name (the user's own wins; Synapse's own yields silently)."""
    if earlier is None or earlier.scope != PROJECT:
        return []
    return [f"{earlier.path}: skipped: {later} has the same name (the user's own wins)"]
