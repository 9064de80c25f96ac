"""Secrets in the environment: which variables children never inherit, and `$VAR`
expansion that refuses them.

The Synapse process keeps the model credentials (it calls the model); every program
it starts for the model - the session shell, skill scripts, MCP servers - gets an
environment without them. A secret is:

- a **model credential**: the variable `settings.api_key_env` names (default
  `ANTHROPIC_API_KEY`) and every `ANTHROPIC_*` variable, the non-secret-looking ones
  (`ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`) included: a base URL can carry a token
  and custom-header variables carry auth, and no child needs them;
- a name matching one of `settings.secret_env` (names or fnmatch globs, case-sensitive).

Floor module: imports only the standard library and `synapse_lsp.config`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from synapse_lsp.config import Settings

CREDENTIAL_PREFIX = "ANTHROPIC_"
# What `os.path.expandvars` (posixpath) recognises: `$NAME` and `${NAME}`; and the
# shell's `${NAME:-default}` (Claude Code's `.mcp.json` uses it).
_VAR = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)


def is_model_credential(name: str, settings: Settings) -> bool:
    """The configured key variable or any `ANTHROPIC_*` variable (any case)."""
    return name == settings.api_key_env or name.upper().startswith(CREDENTIAL_PREFIX)


def is_declared_secret(name: str, settings: Settings) -> bool:
    """A name `settings.secret_env` lists (exactly or by glob)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in settings.secret_env)


def is_secret(name: str, settings: Settings) -> bool:
    return is_model_credential(name, settings) or is_declared_secret(name, settings)


def child_env(env: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """`env` without any secret: what a child process started for the model gets."""
    return {k: v for k, v in env.items() if not is_secret(k, settings)}


def credential_values(settings: Settings, env: Mapping[str, str] | None = None) -> set[str]:
    """The values of the model credentials set in `env` (non-empty ones)."""
    source = os.environ if env is None else env
    return {v for k, v in source.items() if v and is_model_credential(k, settings)}


@dataclass(frozen=True)
class Refused:
    """A `$VAR` reference left unexpanded, and why (`credential` or `secret`)."""

    name: str
    why: str


def expand(
    value: str,
    refuse: Callable[[str, str], str | None],
    env: Mapping[str, str] | None = None,
) -> tuple[str, list[Refused]]:
    """`os.path.expandvars(value)`, except that a reference `refuse(name, its value)`
    answers with a reason for is left as written. Returns the text and the refusals.
    Unknown variables are left as written, as `expandvars` does; `${NAME:-default}` is
    `default` when NAME is unset or empty (a refused NAME stays as written, default
    and all)."""
    source = os.environ if env is None else env
    refused: list[Refused] = []

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), None
        if name.startswith("{") and name.endswith("}"):
            name, sep, fallback = name[1:-1].partition(":-")
            default = fallback if sep else None
        if not source.get(name) and default is not None:
            return default
        if name not in source:
            return match.group(0)
        why = refuse(name, source[name])
        if why is not None:
            refused.append(Refused(name, why))
            return match.group(0)
        return source[name]

    if "$" not in value:
        return value, refused
    return _VAR.sub(one, value), refused


def credential_refuser(
    settings: Settings,
    *,
    allow_credentials: bool,
    allow_secrets: bool,
    env: Mapping[str, str] | None = None,
) -> Callable[[str, str], str | None]:
    """The `refuse` of `expand` for config files: a model credential (by name, or a
    variable whose value holds a credential's value) unless `allow_credentials`; a
    `secret_env` name unless `allow_secrets`."""
    values = credential_values(settings, env)

    def refuse(name: str, value: str) -> str | None:
        if not allow_credentials and (
            is_model_credential(name, settings) or any(v in value for v in values)
        ):
            return "credential"
        if not allow_secrets and is_declared_secret(name, settings):
            return "secret"
        return None

    return refuse


def protect_process() -> None:
    """Make this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): its
    `/proc/PID/environ` (the model's key, as the environment started it), memory and
    file descriptors are then root's, so a command of the same user — full-access, or
    the no-bwrap fallback — cannot read them. Programs it starts are dumpable again
    (exec resets it). Root still reads everything (docs/threat-model.md). A no-op where
    prctl is not there. libc is the process's own (`CDLL(None)`): looking it up by name
    (`ctypes.util.find_library`) runs `ldconfig -p`, a process, on the way to the first
    request."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass
