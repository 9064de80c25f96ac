"""Claude Code's extension locations, read as Synapse's own are: the folder's
`.mcp.json` (its project MCP servers, beside Synapse's `mcp_servers.json`), and skills
in `~/.claude/skills/` (the user's, like `$SYNAPSE_HOME/skills`) and the folder's
`.claude/skills/` (trusted folders only: `policy.trust` decides, `core.Workspace`
passes the folder).

Precedence (docs/extensions.md, "Claude Code's locations: precedence"): a server that
both the folder's `mcp_servers.json` and its `.mcp.json` define is Synapse's file's,
the other skipped with one notice naming both files; a skill name is the first found
of `$SYNAPSE_HOME/skills`, `~/.claude/skills`, the folder's `.claude/skills` (the
user's own before the folder's), each later one skipped with one warning.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

from synapse_lsp.extensions.skills import SkillInfo, scan_skills, skills_dir
from synapse_lsp.policy.claude_home import user_dir
from synapse_lsp.policy.folder_files import FOLDER_CONFIGS, FOLDER_SKILLS

OWN_MCP, MCP_JSON = FOLDER_CONFIGS  # "mcp_servers.json", ".mcp.json"


def expands_all(path: Path) -> bool:
    """Whether the MCP config `path` is Claude Code's: `${VAR}` expands in `command`,
    `args` and `url` too (Synapse's own files: `env` and `headers`)."""
    return path.name == MCP_JSON


def shadowed(name: str, path: Path, earlier: Path | None) -> list[str]:
    """The one notice when Synapse's own `path` replaces server `name` of the same
    folder's `.mcp.json` (`earlier`: the file that defined it before; [] otherwise)."""
    if earlier is None or path.name != OWN_MCP or earlier != path.parent / MCP_JSON:
        return []
    return [f"{earlier}: server {name!r} skipped: {path} defines it too (Synapse's own file wins)"]


def skill_roots(
    synapse_home: Path,
    folder: Path | None = None,
    trusted: bool = False,
    unconfirmed: Collection[Path] = (),
) -> list[Path]:
    """Where skills are read, first wins: Synapse's, the user's Claude Code skills, and
    the folder's `.claude/skills` only when the folder is `trusted` (`policy.trust`) and
    it is not among the files changed since the user confirmed them (`unconfirmed`)."""
    roots = [skills_dir(synapse_home), user_dir() / "skills"]
    own = folder / FOLDER_SKILLS if folder is not None and trusted else None
    return roots + ([own] if own is not None and own not in unconfirmed else [])


def scan_roots(roots: Sequence[Path]) -> tuple[list[SkillInfo], list[str]]:
    """Every skill of `roots` (`scan_skills`), a name kept from the first root that has
    it; one warning per skill skipped for that, and the scans' own warnings."""
    found: dict[str, SkillInfo] = {}
    warnings: list[str] = []
    seen: set[str] = set()
    for root in roots:
        real = os.path.realpath(root)
        if real in seen:  # the folder is the home folder: one root, read once
            continue
        seen.add(real)
        skills, more = scan_skills(root)
        warnings += more
        for skill in skills:
            first = found.setdefault(skill.name, skill)
            if first is not skill:
                warnings.append(
                    f"skill {skill.name!r} in {root} skipped: {first.path} has one of that "
                    "name (the first found wins)"
                )
    return list(found.values()), warnings
