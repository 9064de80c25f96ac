"""Issue 27 item 9: MCP first contact.

- `synapse tools refresh|list` say what they wait for ("installing/starting github
  (npx), N s") and `refresh` exits 1 when a configured server is not ready at the end;
- an untrusted folder's own `mcp_servers.json` is named wherever its servers would be
  listed (`synapse tools`, `synapse exec`, the agent's not-found hint and
  `command:search`), with "this folder is not trusted: run `synapse trust`" (the
  model reads that trusting is the user's decision);
- `synapse tools search` with no match says how to add a server.

The slow server is the real demo server (tests/mcp_servers) started through a script
named `npx` that waits before it answers, as a first `npx -y …` does while it downloads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_lsp.cli import tools as tools_cli
from synapse_lsp.config import LiveSettings, Settings
from synapse_lsp.core import Workspace
from synapse_lsp.policy import trust

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"
NOT_TRUSTED = "this folder is not trusted: run `synapse trust`"
# What the model reads: trusting is the user's decision, not something for it to run.
FOR_MODEL = "this folder is not trusted (the user's decision: they can run `synapse trust`)"
WITHHELD = f"this folder's mcp_servers.json (github) is not loaded: {FOR_MODEL}"


@pytest.fixture(autouse=True)
def _untrusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust as a user has it: nothing in the environment decides it."""
    monkeypatch.delenv(trust.ENV, raising=False)


def slow_npx(folder: Path, delay: float) -> Path:
    """A stdio server launched as `npx` that sleeps `delay` s before it answers."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "npx"
    script.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{SERVER}" --startup-delay {delay} "$@"\n'
    )
    script.chmod(0o755)
    return script


def write_config(folder: Path, servers: dict[str, dict[str, object]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mcp_servers.json").write_text(json.dumps({"mcpServers": servers}))


async def run_tools(argv: list[str], home: Path, cwd: Path) -> int:
    args = tools_cli.build_parser().parse_args(argv)
    return await tools_cli.run(args, Settings(synapse_home=home), cwd)


# ------------------------------------------------------------ waiting, exit status


async def test_refresh_says_what_it_waits_for_and_exits_1_when_nothing_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tools_cli, "PROGRESS_AFTER", 0.5)
    monkeypatch.setattr(tools_cli, "PROGRESS_EVERY", 1.0)
    home, work = tmp_path / "home", tmp_path / "work"
    npx = slow_npx(tmp_path / "bin", 120)
    write_config(work, {"github": {"command": str(npx)}})
    code = await run_tools(["refresh", "mcp", "--trust", "--connect-timeout", "2"], home, work)
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    # not a terminal: a plain line per PROGRESS_EVERY, the first after PROGRESS_AFTER
    assert re.search(r"^installing/starting github \(npx\), \d+ s$", err, re.M), err
    assert "\r" not in err
    assert (
        "  github: not ready: still installing/starting github (npx) after 2 s; run "
        "`synapse tools refresh mcp` again, or with a longer --connect-timeout\n"
    ) in out
    assert "not available: connecting" not in out


async def test_refresh_exits_1_when_a_server_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_config(home / "mcp", {"gone": {"command": "no-such-mcp-server-27"}})
    work.mkdir()
    assert await run_tools(["refresh", "mcp"], home, work) == 1
    out = capsys.readouterr().out
    assert "gone: failed" in out and "command not found: no-such-mcp-server-27" in out


async def test_on_a_terminal_the_progress_line_is_rewritten_then_erased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pty

    monkeypatch.setattr(tools_cli, "PROGRESS_AFTER", 0.3)
    home, work = tmp_path / "home", tmp_path / "work"
    npx = slow_npx(tmp_path / "bin", 120)
    write_config(work, {"github": {"command": str(npx)}})
    main, child = pty.openpty()
    os.set_blocking(main, False)
    shown = b""
    with os.fdopen(child, "w", encoding="utf-8") as terminal:  # a real terminal's stderr
        monkeypatch.setattr(sys, "stderr", terminal)
        await run_tools(["list", "--trust", "--connect-timeout", "1.5"], home, work)
        monkeypatch.undo()
        while True:  # read while the terminal is open (after, a read fails with EIO)
            try:
                chunk = os.read(main, 65536)
            except BlockingIOError:
                break
            shown += chunk
    os.close(main)
    text = shown.decode()
    lines = [part for part in text.split("\r") if part.startswith("installing/starting")]
    assert len(lines) >= 2, text  # one line, rewritten each second
    assert all(line.startswith("installing/starting github (npx), ") for line in lines)
    first = text.index("installing/starting")
    assert "\n" not in text[first : text.index("\r\x1b[K", first)], text  # erased, not left


# ------------------------------------------------------------ an untrusted folder


async def test_tools_does_not_start_an_untrusted_folders_servers_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`synapse tools` starts what every other face starts: an untrusted folder's own
    servers are programs the folder names, so they are listed as not loaded, not run."""
    home, work = tmp_path / "home", tmp_path / "work"
    ran = tmp_path / "server-ran"
    write_config(work, {"github": {"command": "sh", "args": ["-c", f"touch '{ran}'"]}})
    for argv in (["list"], ["refresh", "mcp"], ["search", "github"]):
        await run_tools(argv, home, work)
        out, err = capsys.readouterr()
        assert (
            f"Note: this folder's mcp_servers.json (github) is not loaded: {NOT_TRUSTED} "
            "(or pass --trust for this run)\n"
        ) in err, err
        assert "github:" not in out
    assert not ran.exists()  # the folder's command never ran
    await run_tools(["refresh", "mcp", "--trust", "--connect-timeout", "5"], home, work)
    assert ran.exists() and "not trusted" not in capsys.readouterr().err
    ran.unlink()
    trust.remember(home, work, True)
    await run_tools(["list", "--connect-timeout", "5"], home, work)
    assert ran.exists() and "not trusted" not in capsys.readouterr().err


def test_synapse_exec_names_the_folders_servers_it_did_not_load(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_config(work, {"github": {"command": sys.executable, "args": [str(SERVER)]}})
    env = {k: v for k, v in os.environ.items() if k != trust.ENV}
    run = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "mcp:github:add 2 3"],
        capture_output=True,
        text=True,
        env={**env, "SYNAPSE_HOME": str(home)},
        cwd=work,
        timeout=120,
    )
    assert run.returncode == 127, run
    assert f"configured MCP servers: none; {WITHHELD}; skills: none" in run.stdout


async def test_the_agent_is_told_why_the_folders_servers_are_missing(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_config(work, {"github": {"command": "no-such-mcp-server-27"}})
    workspace = Workspace(work, LiveSettings({"SYNAPSE_HOME": str(home)}), watch=False)
    try:
        tools = await workspace.session_tools()  # what a chat session's agent calls
        await workspace.registry_ready()
        missing = await tools.router.route("mcp:github:list_issues")
        assert f"configured MCP servers: none; {WITHHELD}; skills: none" in missing.text
        found = await tools.router.route("command:search github")
        assert f"Note: {WITHHELD}." in found.text
    finally:
        await workspace.close()
    # Trusted: its servers are loaded, nothing is said about trust.
    trusted = Workspace(work, Settings(synapse_home=home), watch=False, trusted=True)
    try:
        router = await trusted.start()
        await trusted.registry_ready()
        result = await router.route("mcp:github:list_issues")
        assert "not trusted" not in result.text and "no-such-mcp-server-27" in result.text
    finally:
        await trusted.close()


async def test_a_changed_config_of_a_trusted_folder_says_to_confirm_it(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_config(work, {"github": {"command": "no-such-mcp-server-27"}})
    trust.remember(home, work, True)
    write_config(work, {"github": {"command": "something-else"}})
    workspace = Workspace(work, Settings(synapse_home=home), watch=False)
    try:
        router = await workspace.start()
        await workspace.registry_ready()
        result = await router.route("mcp:github:list_issues")
        assert (
            "this folder's mcp_servers.json (github) is not loaded: it changed since Synapse "
            "last loaded it (the user confirms it with `synapse trust`)"
        ) in result.text
    finally:
        await workspace.close()


# ------------------------------------------------------------ search, no match


async def test_a_search_with_no_match_says_how_to_add_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    assert await run_tools(["search", "github"], home, work) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[:2] == [
        "No extension commands match 'github'.",
        f"To add an MCP server: describe it in {home}/mcp/mcp_servers.json (every folder) or "
        f"{work}/mcp_servers.json (this folder), then run `synapse tools refresh mcp`; see "
        'docs/extensions.md, "Adding an MCP server".',
    ], err
    assert await run_tools(["search", "github", "--type", "skill"], home, work) == 0
    err = capsys.readouterr().err
    assert "To add an MCP server" not in err
    assert f"To add a skill: write {home}/skills/<name>/SKILL.md" in err
