"""MCP wrappers from inside the sandbox (real bwrap, network off): a sandboxed shell
reaches its own registry's socket, in `$SYNAPSE_HOME/run/<…>/` or, for a long home,
in its own folder under the temp folder (the sandbox's /tmp is private, so it is
bound in); it sees no other registry's folder or socket; and the socket applies the
settings of the registry it belongs to (read-only refuses, as a direct call would be
asked about)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.core import Workspace
from synapse_lsp.policy.gate import ALLOW_ONCE
from synapse_lsp.question import Question
from tests.test_wrapper_sockets import pids, project, started

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed on this machine"
)

CONNECT = 'python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])" {}'


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A home short enough for `run/<name>/ext.sock` (tmp_path may not be)."""
    path = Path(tempfile.mkdtemp(prefix="syn-", dir="/tmp"))  # noqa: S108
    try:
        yield path / "home"
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sandboxed(home: Path, mode: str = "workspace-write") -> Settings:
    return Settings(synapse_home=home, sandbox=mode, network="off", command_timeout=60.0)


@pytest.mark.parametrize("long_home", [False, True], ids=["socket-in-home", "socket-in-tmp"])
async def test_a_sandboxed_shell_reaches_its_own_registry_and_no_other(
    tmp_path: Path, short_home: Path, long_home: bool
) -> None:
    home = tmp_path / ("h" * 80) if long_home else short_home
    first = await started(project(tmp_path, "a"), sandboxed(home))
    second = await started(project(tmp_path, "b"), sandboxed(home))
    try:
        seen = []
        for workspace in (first, second):
            assert workspace.shell is not None and workspace.shell.sandbox.sandboxed
            run = workspace.run_dir
            assert run is not None
            assert (run.socket.parent == run.path) is not long_home
            direct, via_bash = await pids(workspace)
            assert via_bash == direct
            seen.append(direct)
        assert seen[0] != seen[1]
        assert first.run_dir is not None and second.run_dir is not None
        listed = await first.run('ls -A "$SYNAPSE_HOME/run"')
        assert listed.stdout.split() == [first.run_dir.path.name]
        mine = await first.run(CONNECT.format(first.run_dir.socket))
        assert mine.exit_code == 0, mine.text
        other = await first.run(CONNECT.format(second.run_dir.socket))
        assert other.exit_code != 0
        assert "No such file or directory" in other.stderr
    finally:
        await first.close()
        await second.close()


async def test_read_only_refuses_through_the_sessions_own_socket(tmp_path: Path) -> None:
    """Two folders with a server `db`, one read-only: its `$(mcp:db:pid)` is refused
    (nobody can be asked from inside a command), the other's runs."""

    async def allow(question: Question) -> str | None:
        return ALLOW_ONCE

    home = tmp_path / "home"
    read_only = Workspace(
        project(tmp_path, "ro"), sandboxed(home, "read-only"), trusted=True, watch=False, ask=allow
    )
    await read_only.start()
    registry = await read_only.registry_ready()
    assert registry is not None
    await registry.wait_for_mcp(60)
    writer = await started(project(tmp_path, "rw"), sandboxed(home))
    try:
        refused = await read_only.run("echo $(mcp:db:pid)")
        assert refused.stdout.strip() == ""
        assert "refused in read-only mode" in refused.stderr
        helped = await read_only.run("echo $(mcp:db:pid -h)")
        assert helped.stdout.startswith("Usage: mcp:db:pid")
        direct, via_bash = await pids(writer)
        assert via_bash == direct
    finally:
        await read_only.close()
        await writer.close()


async def test_a_sandboxed_skill_script_sees_only_its_own_registry(
    tmp_path: Path, short_home: Path
) -> None:
    """A skill script runs in a one-off sandbox like the shell's: of `$SYNAPSE_HOME/run/`
    it sees its own registry's folder (its `$(mcp:…)` calls work), no other one."""
    skill = short_home / "skills" / "probe"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: probe\ndescription: Probe run/\n---\n# probe\n")
    script = skill / "scripts" / "look.sh"
    script.write_text(
        "# List run/ and connect to a socket.\n"
        'ls -A "$SYNAPSE_HOME/run"\n'
        + CONNECT.format('"$1"')
        + ' && echo "reached $1" || echo "not reached $1"\n'
    )
    first = await started(project(tmp_path, "a"), sandboxed(short_home))
    second = await started(project(tmp_path, "b"), sandboxed(short_home))
    try:
        assert first.run_dir is not None and second.run_dir is not None
        mine = await first.run(f"skill:probe:look {first.run_dir.socket}")
        assert mine.exit_code == 0, mine.text
        assert mine.stdout.split("\n")[0] == first.run_dir.path.name
        assert f"reached {first.run_dir.socket}" in mine.stdout
        other = await first.run(f"skill:probe:look {second.run_dir.socket}")
        assert second.run_dir.path.name not in other.stdout.split("\n")[0]
        assert f"not reached {second.run_dir.socket}" in other.stdout
    finally:
        await first.close()
        await second.close()
