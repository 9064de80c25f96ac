"""Fault drill, the persistent shell: hostile or unusual commands must not cost the
machine (no busy loop) and must leave a working session behind."""

from __future__ import annotations

import resource
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def test_exec_of_a_program_waits_idle_and_a_fresh_shell_follows(tmp_path: Path) -> None:
    """`exec sleep 2` replaces bash by a process with no terminal fd: the PTY reports
    end of file while it lives. That must not be read in a loop (it spun a core)."""
    shell = ShellSession(tmp_path, Settings(synapse_home=tmp_path / "home"))
    await shell.start()
    try:
        assert (await shell.run("cd /tmp && export KEEP=1")).exit_code == 0
        before = _cpu_seconds()
        result = await shell.run("exec sleep 2")
        spent = _cpu_seconds() - before
        assert result.exit_code == 0
        assert spent < 0.5, f"{spent:.2f} s of CPU while a program slept 2 s"
        after = await shell.run("echo alive; pwd")
        assert after.exit_code == 0 and after.stdout == "alive\n/tmp\n"
        timed_out = await shell.run("exec sleep 100", timeout=1)
        assert timed_out.timed_out and timed_out.exit_code == 124
        assert (await shell.run("echo again")).stdout == "again\n"
    finally:
        await shell.close()
