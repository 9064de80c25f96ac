"""The system prompt's list of installed skills: names and one line each.

Progressive disclosure, as Claude Code does it: the prompt names every skill (up to a
bound) with a one-line description, `skill:load <name>` reads its SKILL.md, and
`skill:search` finds the rest. `skill:search` (a built-in the registry gives every
face) offers the list as its `prompt_section()`; `agent/prompts.py` puts it after the
cached stable block, and a session builds its prompt once, so the list is the one of
the session's start (a skill added later is found by `skill:search`); a session that
started before the registry indexed the skills builds it once more when it has
(`SkillSearchCommand.section_pending`).
"""

from __future__ import annotations

from collections.abc import Iterable

from synapse_lsp.extensions.skills import SkillInfo

MAX_SKILLS = 50
MAX_CHARS = 2000  # the whole list, title and tail included
LINE_CHARS = 120  # one skill's description

_TITLE = (
    "# Installed skills\n\n"
    "Read a skill with `skill:load <name>` before you do a task it covers, then follow "
    "its SKILL.md.\n"
)


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line (whitespace collapsed), cut to `limit` characters with '…'."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def prompt_listing(
    skills: Iterable[SkillInfo], max_skills: int = MAX_SKILLS, max_chars: int = MAX_CHARS
) -> str:
    """`- name: description` per skill, by name, within the bounds; the rest are counted
    in a `+N more` line naming `skill:search`. Empty when there is no skill."""
    ordered = sorted(skills, key=lambda s: s.name)
    if not ordered:
        return ""
    lines: list[str] = []
    size = len(_TITLE)
    for skill in ordered:
        line = f"- {skill.name}: {one_line(skill.description) or '(no description)'}"
        tail = len(f'+{len(ordered)} more: skill:search "<what you need>"') + 2
        if len(lines) >= max_skills or size + len(line) + 1 + tail > max_chars:
            break
        lines.append(line)
        size += len(line) + 1
    rest = len(ordered) - len(lines)
    if rest:
        lines.append(f'+{rest} more: skill:search "<what you need>" finds them')
    return _TITLE + "\n".join(lines) + "\n"
