"""Where Claude Code keeps the user's own files: `$CLAUDE_CONFIG_DIR`, else `~/.claude`
(Claude Code's rule). One owner for the rule: hooks read its `settings.json`, the
extensions its `skills/`, the agent its `commands/` and `agents/`, and the permission
gate guards its settings files (they hold hooks that run unsandboxed)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

USER_DIR_ENV = "CLAUDE_CONFIG_DIR"


def user_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    configured = (os.environ if env is None else env).get(USER_DIR_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".claude"
