"""Each extension registry's own wrappers and socket (`wrapper_files.RunDir`): two
registries with a server of the same name, in one process or in two, each reach
their own from inside a bash expansion; run folders go when their registry closes,
and those of processes that are gone go at the next start, never a live one's.

Real MCP servers (tests/mcp_servers/demo_server.py, whose `pid` tool says which
server answered), real bash, the real `synapse exec` for the two processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_lsp import proctree
from synapse_lsp import shell as shell_module
from synapse_lsp.config import Settings
from synapse_lsp.core import Workspace
from synapse_lsp.extensions import wrapper_files
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.extensions.wrapper_files import RunDir
from synapse_lsp.shell import ShellSession

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"
ROOT = Path(__file__).resolve().parents[1]


def project(parent: Path, name: str) -> Path:
    """A folder whose own mcp_servers.json has a server `db`."""
    folder = parent / name
    folder.mkdir()
    config = {"mcpServers": {"db": {"command": sys.executable, "args": [str(SERVER)]}}}
    (folder / "mcp_servers.json").write_text(json.dumps(config))
    return folder


async def started(root: Path, settings: Settings) -> Workspace:
    workspace = Workspace(root, settings, trusted=True, watch=False)
    await workspace.start()
    registry = await workspace.registry_ready()
    assert registry is not None
    await registry.wait_for_mcp(60)
    return workspace


async def pids(workspace: Workspace) -> tuple[str, str]:
    """(the pid `mcp:db:pid` gives in-process, the one it gives inside `$(…)`)."""
    direct = await workspace.run("mcp:db:pid")
    via_bash = await workspace.run("echo $(mcp:db:pid) | cat")
    assert direct.exit_code == 0 and via_bash.exit_code == 0, (direct.text, via_bash.text)
    return direct.stdout.strip(), via_bash.stdout.strip()


async def test_two_registries_in_one_process_each_reach_their_own_db(tmp_path: Path) -> None:
    settings = Settings(synapse_home=tmp_path / "home", command_timeout=60.0)
    first = await started(project(tmp_path, "a"), settings)
    second = await started(project(tmp_path, "b"), settings)
    runs: list[RunDir] = []
    try:
        seen = []
        for workspace in (first, second):
            assert workspace.run_dir is not None and workspace.registry is not None
            runs.append(workspace.run_dir)
            assert workspace.registry.run_dir is workspace.run_dir
            assert (workspace.run_dir.bin_dir / "mcp:db:pid").is_file()
            direct, via_bash = await pids(workspace)
            assert via_bash == direct
            # `$SYNAPSE_HOME/bin`'s wrapper (it names no socket) asks the shell's own
            # registry through $SYNAPSE_EXT_SOCKET.
            shared = await workspace.run('"$SYNAPSE_HOME/bin/mcp:db:pid"')
            assert shared.stdout.strip() == direct
            seen.append(direct)
        assert seen[0] != seen[1]
        assert runs[0].socket != runs[1].socket
        assert runs[0].socket.is_socket() and runs[1].socket.is_socket()
    finally:
        await first.close()
        await second.close()
    assert not [run.path for run in runs if run.path.exists()]
    assert not list((tmp_path / "home" / "run").iterdir())


async def test_two_synapse_processes_no_longer_share_one_socket(tmp_path: Path) -> None:
    """Two `synapse exec` at once (as VS Code and a terminal would be), each in a folder
    with its own `db`: each process's wrappers reach its own server while the other
    process runs."""
    home = tmp_path / "home"
    env = {
        **os.environ,
        "SYNAPSE_HOME": str(home),
        "PYTHONPATH": str(ROOT),
    }
    env.pop(wrapper_files.SOCKET_ENV, None)
    lines = ["mcp:db:pid", "echo $(mcp:db:pid)", "sleep 4", "echo $(mcp:db:pid)"]

    async def run_in(folder: Path) -> list[str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "--json", "--trust",
            "--cwd", str(folder), *lines,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()
        return [json.loads(line)["stdout"].strip() for line in out.decode().splitlines()]

    first, second = await asyncio.gather(
        run_in(project(tmp_path, "a")), run_in(project(tmp_path, "b"))
    )
    for shown in (first, second):
        direct = shown[0]
        assert direct.isdigit() and shown[1] == direct and shown[3] == direct, shown
    assert first[0] != second[0]
    assert not list((home / "run").iterdir())  # each process removed its own folder


async def test_a_registry_without_a_workspace_serves_its_own_socket(tmp_path: Path) -> None:
    """The API's default (`serve_socket=True`, no run folder given): the registry makes
    its folder at start and removes it at close."""
    registry = ExtensionRegistry(Settings(synapse_home=tmp_path / "home"), None, watch=False)
    await registry.start()
    run = registry.run_dir
    try:
        assert run is not None and run.socket.is_socket()
    finally:
        await registry.close()
    assert registry.run_dir is None and not run.path.exists()


def test_stale_run_folders_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    mine = RunDir.create(home)
    runs = home / "run"
    ended = subprocess.Popen(["true"])
    ended.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ticks = proctree.start_ticks(sleeper.pid)
        assert ticks is not None
        other_live = runs / f"{sleeper.pid}-{wrapper_files._base36(ticks)}-0000aaaa"
        gone = runs / f"{ended.pid}-1-0000bbbb"  # its process exited
        reused = runs / f"{os.getpid()}-1-0000cccc"  # our pid, but another start time
        for path in (other_live, gone, reused):
            (path / "bin").mkdir(parents=True)
        # Short socket folders (a long home's, under the temp folder): one of a gone
        # run folder, one of a home that no longer exists, one of a live process.
        short = wrapper_files._short_socket_dir(gone.name)
        orphan = wrapper_files._short_socket_dir(f"{ended.pid}-1-0000dddd")
        short_live = wrapper_files._short_socket_dir(other_live.name)
        for path in (short, orphan, short_live):
            path.mkdir()
        (runs / "notes").mkdir()  # not a run folder: never touched
        again = RunDir.create(home)
        assert mine.path.is_dir() and again.path.is_dir() and other_live.is_dir()
        assert not gone.exists() and not reused.exists()
        assert not short.exists() and not orphan.exists() and short_live.is_dir()
        assert (runs / "notes").is_dir()
        sleeper.kill()
        sleeper.wait()
        assert wrapper_files.sweep(home) == 1
        assert not other_live.exists() and not short_live.exists() and mine.path.is_dir()
        again.remove()
    finally:
        sleeper.kill()
        sleeper.wait()
        mine.remove()
    assert sorted(p.name for p in runs.iterdir()) == ["notes"]


async def test_a_shell_without_a_registry_does_not_inherit_an_outer_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Synapse run from inside a Synapse shell: the outer registry's socket is not the
    inner shell's."""
    assert shell_module.SOCKET_ENV == wrapper_files.SOCKET_ENV
    monkeypatch.setenv(wrapper_files.SOCKET_ENV, "/outer/ext.sock")
    home = tmp_path / "home"
    bare = ShellSession(tmp_path, Settings(synapse_home=home))
    run = RunDir.create(home)
    wrappers = shell_module.WrapperDir(run.bin_dir, run.socket, run.visible)
    own = ShellSession(tmp_path, Settings(synapse_home=home), wrappers=wrappers)
    try:
        await bare.start()
        await own.start()
        line = 'echo "${SYNAPSE_EXT_SOCKET-unset}"; echo "${PATH%%:*}"'
        assert (await bare.run(line)).stdout.split() == ["unset", str(home / "bin")]
        assert (await own.run(line)).stdout.split() == [str(run.socket), str(run.bin_dir)]
    finally:
        await bare.close()
        await own.close()
        run.remove()
