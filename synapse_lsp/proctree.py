"""Moved to `synapse_lsp.shell.procs` (the shell's package); this name stays
importable for code and installed scripts that use it."""

from synapse_lsp.shell.procs import (
    CLK_TCK,
    KILL_ROUNDS,
    PR_SET_CHILD_SUBREAPER,
    ProcInfo,
    boot_ticks,
    command_processes,
    descendants,
    kill_all,
    last_pid,
    scan,
    set_subreaper,
    start_ticks,
    supervised_preexec,
)

__all__ = [
    "CLK_TCK",
    "KILL_ROUNDS",
    "PR_SET_CHILD_SUBREAPER",
    "ProcInfo",
    "boot_ticks",
    "command_processes",
    "descendants",
    "kill_all",
    "last_pid",
    "scan",
    "set_subreaper",
    "start_ticks",
    "supervised_preexec",
]
