"""The persistent shell, a package of small parts (docs/shell.md):

- `session`: `ShellSession`, the public API;
- `bash`: one bash, from its start to its end, and the command running in it;
- `spawn`: starting bash, its environment and private files; `sandbox`: bubblewrap;
- `framing`: the marker protocol, a state machine fed bytes (no bash, no asyncio);
- `streams`: the commands' FIFOs and background jobs' output;
- `terminal`: the PTY; `groups`: a command's process groups; `procs`: the session's
  process tree and its supervisor;
- `command`: one command's state (`Run`) and outcome (`ShellResult`).

`from synapse_lsp.shell import ShellSession` works as it did when this was one module;
the names load on first use, so importing `synapse_lsp.shell.sandbox` (the editor's
cold start does) does not load bash's machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from synapse_lsp.shell.bash import MARKER_GRACE_S, SETTLE_SPIN_S, SILENT_CHECK_S
    from synapse_lsp.shell.command import (
        INTERRUPT_EXIT_CODE,
        TIMEOUT_EXIT_CODE,
        VIOLATION_EXIT_CODE,
        ShellResult,
    )
    from synapse_lsp.shell.groups import INTERRUPT_GRACE_S, KILL_GRACE_S, STOP_POLL_S
    from synapse_lsp.shell.session import ShellSession
    from synapse_lsp.shell.spawn import SOCKET_ENV, START_TIMEOUT_S, WrapperDir
    from synapse_lsp.shell.streams import DRAIN_LIMIT, F_SETPIPE_SZ, FIFO_READ_SIZE, IDLE_BUFFER
    from synapse_lsp.shell.terminal import READ_SIZE

# name -> the module of this package that defines it
_HOMES = {
    "ShellSession": "session",
    "ShellResult": "command",
    "TIMEOUT_EXIT_CODE": "command",
    "INTERRUPT_EXIT_CODE": "command",
    "VIOLATION_EXIT_CODE": "command",
    "WrapperDir": "spawn",
    "SOCKET_ENV": "spawn",
    "START_TIMEOUT_S": "spawn",
    "INTERRUPT_GRACE_S": "groups",
    "KILL_GRACE_S": "groups",
    "STOP_POLL_S": "groups",
    "MARKER_GRACE_S": "bash",
    "SETTLE_SPIN_S": "bash",
    "SILENT_CHECK_S": "bash",
    "READ_SIZE": "terminal",
    "FIFO_READ_SIZE": "streams",
    "DRAIN_LIMIT": "streams",
    "F_SETPIPE_SZ": "streams",
    "IDLE_BUFFER": "streams",
}

__all__ = [
    "DRAIN_LIMIT",
    "FIFO_READ_SIZE",
    "F_SETPIPE_SZ",
    "IDLE_BUFFER",
    "INTERRUPT_EXIT_CODE",
    "INTERRUPT_GRACE_S",
    "KILL_GRACE_S",
    "MARKER_GRACE_S",
    "READ_SIZE",
    "SETTLE_SPIN_S",
    "SILENT_CHECK_S",
    "SOCKET_ENV",
    "START_TIMEOUT_S",
    "STOP_POLL_S",
    "TIMEOUT_EXIT_CODE",
    "VIOLATION_EXIT_CODE",
    "ShellResult",
    "ShellSession",
    "WrapperDir",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
