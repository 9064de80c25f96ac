"""The one reader of YAML front matter, the flat subset skill (`SKILL.md`), custom
command and sub-agent (`.claude/commands`, `.claude/agents`) files use. Its callers:
extensions/skills.py and agent/claude_commands.py, agent/claude_agents.py (each splits
its own lists: the item separators differ)."""

from __future__ import annotations


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """`---\\nkey: value\\n---\\nbody` -> ({key: value}, body).

    Flat `key: value` lines, keys lower-cased, quotes around a value dropped, `#` lines
    skipped; a key with no value followed by `  - item` lines (a YAML block list) gets
    its items joined with ", ". The body loses its leading and trailing blank lines. No
    front matter (the first line is not `---`, or it never ends): ({}, text)."""
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
