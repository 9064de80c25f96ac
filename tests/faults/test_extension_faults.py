"""Fault drill, extensions: a skill whose background child holds its output open, and
MCP tool results too big to hold (spilled to $SYNAPSE_HOME/outputs like shell output)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

ROOT = Path(__file__).resolve().parents[2]

BIG_SERVER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("big")


@app.tool()
def big(lines: int) -> str:
    \"\"\"`lines` numbered lines of 100 bytes.\"\"\"
    return "".join(f"{i:09d} " + "y" * 89 + "\\n" for i in range(lines))


app.run()
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and ") Z " in stat.read_text())


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[BashRouter, ExtensionRegistry, Path]]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    scripts = home / "skills" / "bg" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "holds.sh").write_text(
        "# Start a child that keeps our stdout open, then exit.\n"
        "echo start\n"
        'sleep 300 &\necho $! > "$PWD/held.pid"\n'
        "echo done\n"
    )
    (scripts / "detached.sh").write_text(
        "# Start a child whose output goes elsewhere, then exit.\n"
        'sleep 300 >/dev/null 2>&1 &\necho $! > "$PWD/free.pid"\n'
        "echo started\n"
    )
    server = tmp_path / "big_server.py"
    server.write_text(BIG_SERVER)
    (home / "mcp").mkdir()
    (home / "mcp" / "mcp_servers.json").write_text(
        json.dumps({"mcpServers": {"big": {"command": sys.executable, "args": [str(server)]}}})
    )
    settings = Settings(synapse_home=home, command_timeout=60.0)
    registry = ExtensionRegistry(
        settings, work, watch=False, install_wrappers=False, serve_socket=False
    )
    shell = ShellSession(work, settings)
    await shell.start()
    await registry.start()
    try:
        yield BashRouter(shell, settings, extensions=registry), registry, home
    finally:
        await shell.close()
        await registry.close()


async def test_a_skill_returns_when_it_exits_though_a_child_holds_its_output(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, _, home = world
    started = time.monotonic()
    result = await router.route("skill:bg:holds")
    spent = time.monotonic() - started
    assert spent < 20, f"the call waited {spent:.1f} s for a child sleeping 300 s"
    assert result.exit_code == 0, result.text
    assert result.stdout == "start\ndone\n"
    # The child that held the output is ended with its group (documented).
    pid = int((home.parent / "work" / "held.pid").read_text())
    end = time.monotonic() + 10
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(pid)


async def test_a_child_that_redirected_its_output_is_left_running(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, _, home = world
    started = time.monotonic()
    result = await router.route("skill:bg:detached")
    assert time.monotonic() - started < 20
    assert result.exit_code == 0 and result.stdout == "started\n"
    pid = int((home.parent / "work" / "free.pid").read_text())
    try:
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_a_big_mcp_result_is_spilled_whole_and_the_result_says_where(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, registry, home = world
    await registry.mcp.wait_all(30)
    lines = 50_000  # 5 MB: the SDK's stdio reader is quadratic in a message's length
    result = await router.route(f"mcp:big:big {lines}")
    assert result.exit_code == 0, result.text[:500]
    path = result.full_output_path
    assert path is not None and path.parent == home / "outputs"
    assert f"full output: {path}" in result.text
    assert len(result.text.encode()) < 12 * 1024
    assert result.text.startswith("000000000 ") and f"{lines - 1:09d} " in result.text
    data = path.read_bytes()
    assert len(data) == lines * 100
    assert data.splitlines()[12345].startswith(b"000012345 ")
    # A wrapper (a program in a pipeline) gets the whole text, not the model's window.
    reply = await registry.run_request(["mcp:big:big", "3000"], home)
    assert reply["exit_code"] == 0 and len(reply["stdout"]) == 3000 * 100
    # So does the rest of the line after a pipe, and `| write`.
    counted = await router.route(f"mcp:big:big {lines} | wc -l")
    assert counted.stdout.strip() == str(lines)
    written = await router.route("mcp:big:big 20000 | write whole.txt")
    assert written.exit_code == 0, written.text
    assert (router.shell.cwd / "whole.txt").stat().st_size == 20000 * 100


MEMORY_PROBE = """\
import resource, sys
from pathlib import Path
from mcp_types import CallToolResult, TextContent
from synapse_lsp.config import Settings
from synapse_lsp.extensions.mcp_results import format_result

text = "".join(f"{i:09d} " + "y" * 89 + "\\n" for i in range(500_000))  # 50 MB
result = CallToolResult(content=[TextContent(type="text", text=text)])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = format_result(result, Settings(synapse_home=Path(sys.argv[1])))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024, out.full_output_path, len(out.stdout))
"""


def test_a_50_mb_mcp_result_is_formatted_in_bounded_memory(tmp_path: Path) -> None:
    """The part Synapse owns: from the SDK's result to what the model sees. Joining,
    stripping and encoding the whole text cost copies of it (+64 MB measured)."""
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    grown, path, shown = proc.stdout.split()
    assert int(grown) < 30, f"peak RSS grew {grown} MB formatting a 50 MB result"
    assert int(shown) < 12 * 1024
    assert Path(path).stat().st_size == 50_000_000


END_TO_END_PROBE = """\
import asyncio, json, resource, sys, time
from pathlib import Path
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

async def main() -> None:
    tmp = Path(sys.argv[1])
    home, work = tmp / "home", tmp / "work"
    work.mkdir()
    (home / "mcp").mkdir(parents=True)
    server = {"command": sys.executable, "args": [str(tmp / "big_server.py")]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"big": server}}))
    settings = Settings(synapse_home=home, command_timeout=300)
    registry = ExtensionRegistry(
        settings, work, watch=False, install_wrappers=False, serve_socket=False
    )
    shell = ShellSession(work, settings)
    await shell.start()
    await registry.start()
    await registry.mcp.wait_all(60)
    router = BashRouter(shell, settings, extensions=registry)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = await router.route("mcp:big:big 500000")
    spent = time.perf_counter() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    print(result.exit_code, grown, round(spent, 1), result.full_output_path.stat().st_size)
    await shell.close()
    await registry.close()

asyncio.run(main())
"""


def test_a_50_mb_mcp_result_end_to_end_is_read_in_linear_time(tmp_path: Path) -> None:
    """Through the stdio transport too: the SDK's reader joined every 64 KiB chunk to
    the partial line (74 s and ~690 MB for this result); ours keeps one buffer and
    parses without copying the text again. The message is ~96 MB: the server sends
    the text twice (content and structuredContent)."""
    (tmp_path / "big_server.py").write_text(BIG_SERVER)
    proc = subprocess.run(
        [sys.executable, "-c", END_TO_END_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    code, grown, spent, spilled = proc.stdout.split()
    assert code == "0" and int(spilled) == 50_000_000
    assert int(grown) < 450, f"peak RSS grew {grown} MB for a 50 MB result ({spent} s)"
