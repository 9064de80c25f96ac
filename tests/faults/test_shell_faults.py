"""Fault drill, the persistent shell: hostile or unusual commands must not cost the
machine (no busy loop) and must leave a working session behind."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

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


async def test_a_tiny_timeout_never_costs_the_session(tmp_path: Path) -> None:
    """A timeout of 1e-9 s once interrupted bash before it read the command, and the
    session was replaced (environment lost). Below 0.1 s the floor applies; every
    entry point refuses such a value with the reason."""
    import subprocess
    import sys

    from synapse_lsp.config import LiveSettings
    from synapse_lsp.lsp.protocol import ShellRunParams
    from synapse_lsp.lsp.wire import ArgumentError, from_wire

    shell = ShellSession(tmp_path, Settings(synapse_home=tmp_path / "home"))
    await shell.start()
    try:
        pid = shell.pid
        assert (await shell.run("export KEEP=1", timeout=1e-9)).exit_code == 0
        slow = await shell.run("sleep 5", timeout=1e-9)
        assert slow.timed_out and slow.exit_code == 124
        assert (await shell.run("echo $KEEP")).stdout == "1\n" and shell.pid == pid
    finally:
        await shell.close()
    live = LiveSettings({"SYNAPSE_HOME": str(tmp_path)})
    [problem] = live.set_face({"commandTimeout": 1e-9})
    assert "at least 0.1 s" in problem and live().command_timeout == 120.0
    with pytest.raises(ArgumentError, match="at least 0.1 s"):
        from_wire({"command": "true", "timeout": 1e-9}, ShellRunParams)
    cli = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "--timeout", "1e-9", "true"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert cli.returncode == 2 and "at least 0.1 seconds" in cli.stderr
