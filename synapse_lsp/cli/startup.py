"""What a terminal face says once as it starts: warnings on stderr, each fact one line.

Without a handler, Python prints every warning record on stderr (`logging.lastResort`),
so one fact reached the terminal from every layer that met it: a missing bubblewrap
from the sandbox probe, the face's note and the REPL's banner; an unwritable
$SYNAPSE_HOME from the wrappers, skills, MCP, the session store and the checkpoints.
`stderr_warnings` installs the one handler instead: a record is printed once, and
not at all when it repeats what the face says itself (`quiet`).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path

# Said by the face itself (the REPL's banner, `-p`'s note), not again by the probe.
SANDBOX_LOG = "the shell runs without a sandbox"


def home_problem(home: Path) -> str | None:
    """Why $SYNAPSE_HOME cannot hold this session's files, or None when it can."""
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not home.is_dir():
        return os.strerror(errno.ENOTDIR)
    if not os.access(home, os.W_OK | os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def home_line(face: str, home: Path, reason: str) -> str:
    return (
        f"synapse {face}: $SYNAPSE_HOME ({home}) is not writable ({reason}): sessions are "
        "not saved, and checkpoints, remembered permission answers, skill and MCP "
        "commands are off. Set SYNAPSE_HOME to a folder you can write."
    )


class _OnceFilter(logging.Filter):
    def __init__(self, quiet: Iterable[str]) -> None:
        super().__init__()
        self.quiet = tuple(quiet)
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in self.seen or any(q in text for q in self.quiet):
            return False
        self.seen.add(text)
        return True


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed stderr: nowhere left to say it
            pass


def stderr_warnings(quiet: Iterable[str] = ()) -> None:
    """Warnings and errors on stderr, each text once, none containing a `quiet` part."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    handler = _StderrHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_OnceFilter(quiet))
    root.addHandler(handler)


def quiet_notes(notes: Iterable[str], quiet: Iterable[str]) -> list[str]:
    """`notes` without those that repeat a fact already said (a `quiet` part)."""
    parts = tuple(quiet)
    return [n for n in notes if not any(p in n for p in parts)]
