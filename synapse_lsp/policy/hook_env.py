"""`$CLAUDE_ENV_FILE` (policy/hooks.py): the file SessionStart hooks may write
`export NAME=value` lines to, for the session shell.

Each SessionStart run gets a fresh empty file in a private folder; once the hooks are
done, its lines are read and the ones that pass become `export` commands the session
shell runs (agent/session_hooks.py), like an export the model ran: they last until a
fresh shell. A line is taken when it is `export NAME=VALUE` or `NAME=VALUE`, the
value one shell word without command substitution (`$VAR` is expanded by the shell);
blank lines and `#` comments are skipped. Refused, with a warning each: a secret
name (policy/secrets.py: a model credential, a `secretEnv` name — children never get
those), a value holding a model credential's value, a name the shell's protocol owns
(`PROMPT_COMMAND`, `BASH_ENV`, …), anything else.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.policy.secrets import credential_values, is_secret

ENV_FILE_BYTES = 64 * 1024  # read of the file; the rest is ignored
# What the session shell's protocol sets or must never run (shell/spawn.py).
RESERVED = frozenset(
    {"BASH_ENV", "ENV", "PROMPT_COMMAND", "MAILCHECK", "HISTFILE", "CDPATH", "PS1", "PS2"}
    | {"SYNAPSE_HOME", "TERM", "SYNAPSE_EXT_SOCKET"}  # shell/spawn.py's SOCKET_ENV
)
_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")


@contextmanager
def env_file() -> Iterator[Path]:
    """A fresh empty file in a folder of its own (0700), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="synapse-env-"))
    try:
        path = folder / "env"
        path.touch(mode=0o600)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def exports(path: Path, settings: Settings) -> tuple[list[str], list[str]]:
    """The `export` commands for the shell, and why each refused line was refused."""
    try:
        with path.open("rb") as f:
            text = f.read(ENV_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        return [], [f"$CLAUDE_ENV_FILE could not be read: {exc}"]
    commands: list[str] = []
    problems: list[str] = []
    credentials = credential_values(settings)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        why = _refusal(line, settings, credentials)
        if why is not None:
            problems.append(f"$CLAUDE_ENV_FILE line {number}: {why}; not applied")
            continue
        found = _LINE.fullmatch(line.rstrip())
        assert found is not None
        commands.append(f"export {found.group(1)}={found.group(2).strip()}")
    return commands, problems


def _refusal(line: str, settings: Settings, credentials: set[str]) -> str | None:
    found = _LINE.fullmatch(line.rstrip())
    if found is None:
        return "not `export NAME=value`"
    name, value = found.group(1), found.group(2).strip()
    if is_secret(name, settings):
        return f"{name} is a secret (a model credential or a `secretEnv` name)"
    if name in RESERVED:
        return f"{name} belongs to the session shell"
    if any(c in value for c in credentials):
        return f"the value of {name} holds a model credential"
    if "`" in value or "$(" in value or "<(" in value or ">(" in value:
        return "command substitution is not applied"
    lexer = shlex.shlex(value, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError as exc:
        return f"the value is not one shell word ({exc})"
    if len(words) > 1 or any(w and set(w) <= set("();<>|&") for w in words):
        return "the value is not one shell word (quote it)"
    return None
