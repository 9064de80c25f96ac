"""The files that govern the agent: what it may do, or what runs outside the sandbox.
A built-in `write`/`edit` of one asks its own question in every mode (the permission
gate, `gate.py`); the sandbox binds the folder's existing ones read-only."""

from __future__ import annotations

import os
from pathlib import Path

from synapse_lsp.policy import claude_home


def governing(path: Path, root: Path, home: Path) -> str | None:
    """What the host path `path` governs, when it is one of the files that decide what
    the agent may do or what runs outside the sandbox; else None. In `$SYNAPSE_HOME`:
    everything but `skills/` and `outputs/` (settings and hooks, permission rules,
    trusted folders, MCP configs, wrappers, sessions, checkpoints). In the folder:
    `.synapse/`, `.claude/settings*.json`, `mcp_servers.json`, `.mcp.json`, `.git/`. And
    Claude Code's own `settings*.json` (`~/.claude`): their hooks run as the user."""
    real = Path(os.path.realpath(path))
    user = Path(os.path.realpath(claude_home.user_dir()))
    if real.parent == user and real.name.startswith("settings"):
        return "your Claude Code settings (their hooks run unsandboxed)"
    home_real = Path(os.path.realpath(home))
    if real == home_real or real.is_relative_to(home_real):
        rest = real.relative_to(home_real).parts
        if rest and rest[0] in ("skills", "outputs"):
            return None
        return "Synapse's own settings, permissions and store ($SYNAPSE_HOME)"
    root_real = Path(os.path.realpath(root))
    if not real.is_relative_to(root_real):
        return None
    rest = real.relative_to(root_real).parts
    if not rest:
        return None
    if rest[0] == ".synapse":
        return "the folder's Synapse settings and permissions"
    if rest[0] == ".claude" and len(rest) == 2 and rest[1].startswith("settings"):
        return "the folder's hooks (Claude Code settings)"
    if rest in (("mcp_servers.json",), (".mcp.json",)):
        return "the folder's MCP servers (programs Synapse starts)"
    if rest[0] == ".git":
        return "the repository's git configuration and hooks"
    return None
