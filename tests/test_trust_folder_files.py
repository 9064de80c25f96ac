"""Issue 32, the rest: a trusted folder's Claude Code folders (`.claude/skills`,
`.claude/commands`, `.claude/agents`) are fingerprinted like its MCP configs and hook
files: one changed or added since the user confirmed the folder is not loaded until
they confirm it again (`synapse trust`, a real CLI run here); `needs_trust` names them;
on a name the user's and the folder's both define, the user's own wins for all three;
`synapse tools` names every withheld MCP config (`.mcp.json` too).

Real workspaces (core.Workspace: registry, gate, hooks), real chat sessions over their
routers, the real `synapse` CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.agent.session import ChatSession
from synapse_lsp.core import Workspace
from synapse_lsp.policy import trust
from synapse_lsp.policy.folder_files import FOLDER_DIRS, fingerprints
from tests.test_claude_code_files import put, slash
from tests.test_claude_sources import workspace, write_skill

KINDS = ("skills", "commands", "agents")


@pytest.fixture(autouse=True)
def _users_trust(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Trust as a user has it (nothing in the environment decides it); the user's own
    Claude Code folder is a temporary one."""
    monkeypatch.delenv(trust.ENV, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "user-claude"))


def add(folder: Path, kind: str, name: str, says: str) -> None:
    """One definition named `name` of `kind` in `folder` (a `.claude` or `~/.claude`)."""
    if kind == "skills":
        write_skill(folder / "skills", name, says)
    elif kind == "commands":
        put(folder, f"commands/{name}.md", f"---\ndescription: {says}\n---\n{says}\n")
    else:
        put(folder, f"agents/{name}.md", f"---\nname: {name}\ndescription: {says}\n---\n{says}\n")


def synapse(home: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real `synapse` CLI, as the user runs it (in `cwd`)."""
    env = {k: v for k, v in os.environ.items() if k != trust.ENV}
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", *argv],
        capture_output=True,
        text=True,
        env={**env, "SYNAPSE_HOME": str(home)},
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
async def sessions() -> AsyncIterator[list[ChatSession]]:
    made: list[ChatSession] = []
    yield made
    for session in made:
        await session.close()


async def loaded(ws: Workspace, kind: str, made: list[ChatSession]) -> dict[str, str]:
    """The definitions of `kind` a chat of `ws` gets, by name: where each was read."""
    if kind == "skills":
        assert ws.registry is not None
        return {n: str(s.path) for n, s in ws.registry.skills.items()}
    tools = await ws.session_tools()
    session = ChatSession(tools.router, ws.settings_source, workspace_root=ws.root)
    made.append(session)
    if kind == "commands":  # Synapse's own (/init) aside
        found = session.claude.commands().commands.values()
        return {c.name: str(c.path) for c in found if c.scope != "synapse"}
    return {n: str(a.path) for n, a in session.claude.agents().agents.items()}


# ------------------------------------------------------------ changed since confirmed


def test_needs_trust_names_the_folders_commands_and_agents(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    add(folder / ".claude", "commands", "review", "REVIEW")
    add(folder / ".claude", "agents", "helper", "HELP")
    claude = folder / ".claude"
    assert trust.needs_trust(folder) == [claude / "commands", claude / "agents"]
    notice = trust.untrusted_notice(folder) or ""
    assert "its .claude/commands, .claude/agents were not loaded" in notice, notice


@pytest.mark.parametrize("kind", KINDS)
async def test_a_changed_claude_folder_is_withheld_until_the_user_confirms_it(
    kind: str, tmp_path: Path, sessions: list[ChatSession]
) -> None:
    home, folder = tmp_path / "home", tmp_path / "proj"
    own = folder / ".claude" / kind
    add(folder / ".claude", kind, "first", "FIRST")
    trust.remember(home, folder, True)  # the user trusted the folder as it was
    async with workspace(folder, home) as (ws, _):
        assert ws.trusted and ws.unconfirmed == []
        assert set(await loaded(ws, kind, sessions)) == {"first"}
    add(folder / ".claude", kind, "later", "LATER")  # an agent adds one (full-access)
    async with workspace(folder, home) as (ws, _):
        assert ws.trusted and ws.unconfirmed == [own]
        assert (
            f".claude/{kind} changed since Synapse last loaded it and was not loaded (an "
            "agent may have written it)"
        ) in (ws.trust_notice or "")
        assert await loaded(ws, kind, sessions) == {}  # the whole source, as for a file
        if kind == "commands":
            listing = await slash(sessions[-1], "/help")
            assert f"not loaded ({trust.CHANGED_HINT}): {own}" in listing, listing
    confirmed = synapse(home, "trust", str(folder))  # the user looks, then confirms
    assert confirmed.returncode == 0, confirmed
    async with workspace(folder, home) as (ws, _):
        assert ws.unconfirmed == [] and ws.trust_notice is None
        assert set(await loaded(ws, kind, sessions)) == {"first", "later"}
    (own / ("later" if kind == "skills" else "later.md")).rename(own / "moved")
    async with workspace(folder, home) as (ws, _):  # a rename is a change too
        assert ws.unconfirmed == [own]


def test_a_record_from_before_folders_were_fingerprinted_is_their_first_load(
    tmp_path: Path,
) -> None:
    home, folder = tmp_path / "home", tmp_path / "proj"
    add(folder / ".claude", "commands", "review", "REVIEW")
    trust.remember(home, folder, True)
    store = trust.store_path(home)
    data = json.loads(store.read_text())
    files = data["folders"][trust.folder_key(folder)]["files"]
    for name in FOLDER_DIRS:
        del files[name]  # as an older Synapse wrote it
    store.write_text(json.dumps(data))
    assert trust.unconfirmed(home, folder) == []
    trust.record_loaded(home, folder)
    add(folder / ".claude", "agents", "helper", "HELP")  # appears after: a change
    assert trust.unconfirmed(home, folder) == [folder / ".claude" / "agents"]
    assert fingerprints(folder)[".claude/skills"] == "absent"


# ------------------------------------------------------------ one precedence rule


@pytest.mark.parametrize("kind", KINDS)
async def test_the_users_own_definition_wins_a_name_over_the_folders(
    kind: str, tmp_path: Path, sessions: list[ChatSession]
) -> None:
    home, folder, user = tmp_path / "home", tmp_path / "proj", tmp_path / "user-claude"
    add(user, kind, "both", "USER")
    add(folder / ".claude", kind, "both", "FOLDER")
    add(folder / ".claude", kind, "theirs", "THEIRS")
    async with workspace(folder, home, trusted=True) as (ws, _):
        found = await loaded(ws, kind, sessions)
        assert set(found) == {"both", "theirs"}
        assert found["both"].startswith(str(user)), found
        assert found["theirs"].startswith(str(folder)), found


# ------------------------------------------------------------ synapse tools


def test_synapse_tools_names_every_withheld_mcp_config(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "proj"
    folder.mkdir()

    def config(name: str, server: str) -> None:
        text = json.dumps({"mcpServers": {server: {"command": "no-such-server-32"}}})
        (folder / name).write_text(text)

    config("mcp_servers.json", "own")
    config(".mcp.json", "claude")
    untrusted = synapse(home, "tools", "list", cwd=folder)
    assert (
        "Note: this folder's mcp_servers.json and .mcp.json (claude, own) are not loaded: "
        "this folder is not trusted: run `synapse trust` (or pass --trust for this run)\n"
    ) in untrusted.stderr, untrusted
    trust.remember(home, folder, True)
    config(".mcp.json", "later")  # changed since the user confirmed it; the other not
    changed = synapse(home, "tools", "list", "--connect-timeout", "5", cwd=folder)
    assert (
        "Note: this folder's .mcp.json (later) is not loaded: it changed since Synapse last "
        "loaded it: run `synapse trust` to confirm it\n"
    ) in changed.stderr, changed
    assert "mcp_servers.json" not in changed.stderr.split("Note:")[-1]
