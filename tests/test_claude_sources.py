"""Issue 32 item 2: Claude Code's locations, trust-gated exactly like Synapse's own.

- the folder's `.mcp.json` (Claude Code's shape, `${VAR}` / `${VAR:-default}` in
  command, args, env, url and headers under the credential rule of `mcp_servers.json`):
  started in a trusted folder, named but not started in an untrusted one, withheld
  when it changed since it was confirmed; Synapse's own file wins a name clash;
- skills in `~/.claude/skills/` (the user's) and the folder's `.claude/skills/`
  (trusted folders only); the first of `$SYNAPSE_HOME/skills`, `~/.claude/skills`,
  `.claude/skills` wins a name.

Real MCP servers (tests/mcp_servers/demo_server.py), real processes, the user's
defaults (sandbox on; the folder untrusted unless the test trusts it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.core import Workspace
from synapse_lsp.extensions.mcp_client import load_config
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.policy import trust

SERVER = Path(__file__).resolve().parent / "mcp_servers" / "demo_server.py"
SKILL_MD = "---\nname: {name}\ndescription: {description}\n---\n# {name}\n"


@pytest.fixture(autouse=True)
def _users_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust as a user has it: nothing in the environment decides it."""
    monkeypatch.delenv(trust.ENV, raising=False)


def marked_server(marker: Path, name: str = "demo") -> dict[str, object]:
    """A stdio entry that leaves `marker` (holding `$SYN_GREETING`) when it starts."""
    script = (
        f"echo \"$SYN_GREETING\" > '{marker}'; exec '{sys.executable}' '{SERVER}' --name {name}"
    )
    return {"command": "sh", "args": ["-c", script]}


def write_mcp_json(folder: Path, servers: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def write_skill(root: Path, name: str, says: str) -> None:
    folder = root / name
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name, description=f"{name} skill"))
    (folder / "scripts" / "hello.sh").write_text(f"#!/bin/bash\n# Say hello.\necho {says}\n")


async def eventually(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


@asynccontextmanager
async def workspace(
    folder: Path, home: Path, trusted: bool | None = None
) -> AsyncIterator[tuple[Workspace, ExtensionRegistry]]:
    ws = Workspace(folder, Settings(synapse_home=home, command_timeout=30.0), watch=False,
                   trusted=trusted)  # fmt: skip
    try:
        registry = await ws.registry_ready()
        assert registry is not None, ws.registry_error
        await registry.wait_for_mcp(30.0)
        yield ws, registry
    finally:
        await ws.close()


# ------------------------------------------------------------------ .mcp.json


async def test_a_trusted_folders_mcp_json_servers_start_and_their_tools_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYN_TEST_PYTHON", sys.executable)
    monkeypatch.delenv("SYN_TEST_UNSET", raising=False)
    home, folder = tmp_path / "home", tmp_path / "proj"
    write_mcp_json(folder, {
        "claude": {  # Claude Code's shape: type stdio, ${VAR} and ${VAR:-default}
            "type": "stdio",
            "command": "${SYN_TEST_PYTHON}",
            "args": [str(SERVER), "--name", "${SYN_TEST_UNSET:-from-default}"],
            "env": {"SYN_GREETING": "${SYN_TEST_UNSET:-hi}"},
        },
        "marked": marked_server(tmp_path / "marker"),
    })  # fmt: skip
    async with workspace(folder, home, trusted=True) as (ws, registry):
        assert ws.trust_notice is None
        claude = registry.mcp.servers["claude"]
        assert claude.state == "ready", claude.describe_failure()
        assert claude.config.command == sys.executable
        assert claude.config.args == (str(SERVER), "--name", "from-default")
        assert claude.config.source == folder / ".mcp.json"
        echoed = await ws.run("mcp:claude:echo --text hello-from-mcp-json")
        assert echoed.stdout.strip() == "hello-from-mcp-json", echoed.text
        added = await ws.run("mcp:marked:add 2 3")
        assert added.stdout.strip() == "5", added.text
    assert (tmp_path / "marker").read_text() == "\n"  # $SYN_GREETING unset: left to sh


async def test_an_untrusted_folders_mcp_json_is_named_not_started(tmp_path: Path) -> None:
    home, folder, marker = tmp_path / "home", tmp_path / "proj", tmp_path / "marker"
    write_mcp_json(folder, {"marked": marked_server(marker)})
    async with workspace(folder, home) as (ws, registry):
        assert not ws.trusted
        assert ws.trust_notice is not None
        assert "folder not trusted: its .mcp.json was not loaded" in ws.trust_notice
        assert "marked" not in registry.mcp.servers
        assert registry.withheld_servers() == (
            f"this folder's .mcp.json (marked) is not loaded: {trust.NOT_TRUSTED_FOR_MODEL}"
        )
        missing = await ws.run("mcp:marked:echo --text hi")
        assert missing.exit_code != 0 and "hi" not in missing.stdout
        await asyncio.sleep(0.3)
    assert not marker.exists()


async def test_a_changed_mcp_json_is_withheld_until_confirmed(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "proj"
    first_marker, later_marker = tmp_path / "first", tmp_path / "later"
    write_mcp_json(folder, {"first": marked_server(first_marker)})
    trust.remember(home, folder, True)  # the user trusted the folder as it was
    async with workspace(folder, home) as (ws, registry):
        assert ws.trusted and ws.unconfirmed == []
        assert registry.mcp.servers["first"].state == "ready"
    # an agent rewrites it (full-access: nothing stops the write)
    mcp_json = write_mcp_json(folder, {"later": marked_server(later_marker)})
    async with workspace(folder, home) as (ws, registry):
        assert ws.trusted and ws.unconfirmed == [mcp_json]
        assert mcp_json not in ws.mcp_config_files() and not registry.mcp.servers
        assert "changed since Synapse last loaded it" in (ws.trust_notice or "")
        assert registry.withheld_servers() == (
            f"this folder's .mcp.json (later) is not loaded: {trust.CHANGED_FOR_MODEL}"
        )
        await asyncio.sleep(0.3)
    assert not later_marker.exists()
    trust.remember(home, folder, True)  # what `synapse trust` does: confirmed as it is
    async with workspace(folder, home) as (ws, registry):
        assert registry.mcp.servers["later"].state == "ready"
    assert later_marker.exists()


async def test_synapses_own_file_wins_a_name_clash_with_one_notice(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "proj"
    mcp_json = write_mcp_json(folder, {
        "dup": marked_server(tmp_path / "theirs", "theirs"),
        "only-claude": marked_server(tmp_path / "only", "only"),
    })  # fmt: skip
    own = folder / "mcp_servers.json"
    own.write_text(json.dumps({"mcpServers": {"dup": marked_server(tmp_path / "ours", "ours")}}))
    async with workspace(folder, home, trusted=True) as (ws, registry):
        assert registry.mcp.servers["dup"].config.source == own
        assert registry.mcp.servers["only-claude"].config.source == mcp_json
        notices = [p for p in registry.problems if "'dup'" in p]
        assert notices == [
            f"{mcp_json}: server 'dup' skipped: {own} defines it too (Synapse's own file wins)"
        ]
        echoed = await ws.run("mcp:dup:echo --text clash")
        assert echoed.stdout.strip() == "clash", echoed.text
    assert (tmp_path / "ours").exists() and not (tmp_path / "theirs").exists()


def test_mcp_json_expansion_follows_the_credential_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${VAR}` and `${VAR:-default}` in command, args, env, url and headers; a model
    credential or a secretEnv variable never expands from a folder's file (a default
    does not stand in for it either: the reference stays as written, and is named)."""
    key = "sk-ant-test-claude-sources"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("SYN_TEST_TOKEN", "tok")
    monkeypatch.setenv("SYN_TEST_DEPLOY_SECRET", "hidden")
    monkeypatch.setenv("SYN_TEST_HOST", "example.test")
    monkeypatch.delenv("SYN_TEST_UNSET", raising=False)
    folder = tmp_path / "proj"
    path = write_mcp_json(folder, {
        "local": {
            "command": "${SYN_TEST_UNSET:-python3}",
            "args": ["--key", "${ANTHROPIC_API_KEY:-none}", "$SYN_TEST_TOKEN"],
            "env": {"KEY": "$ANTHROPIC_API_KEY", "OK": "${SYN_TEST_UNSET:-dflt}",
                    "S": "${SYN_TEST_DEPLOY_SECRET}"},
        },
        "remote": {
            "type": "http",
            "url": "https://${SYN_TEST_HOST}/${SYN_TEST_UNSET:-mcp}",
            "headers": {"Authorization": "Bearer ${SYN_TEST_TOKEN}"},
        },
    })  # fmt: skip
    settings = Settings(synapse_home=tmp_path / "home", secret_env=("SYN_TEST_DEPLOY_*",))
    servers, problems = load_config([path], settings)
    local, remote = servers["local"], servers["remote"]
    assert local.command == "python3"
    assert local.args == ("--key", "${ANTHROPIC_API_KEY:-none}", "tok")
    assert dict(local.env) == {
        "KEY": "$ANTHROPIC_API_KEY", "OK": "dflt", "S": "${SYN_TEST_DEPLOY_SECRET}"
    }  # fmt: skip
    assert remote.url == "https://example.test/mcp"
    assert dict(remote.headers) == {"Authorization": "Bearer tok"}
    assert len(problems) == 3 and all(str(path) in p for p in problems), problems
    assert sum("$ANTHROPIC_API_KEY is a model credential" in p for p in problems) == 2
    assert sum("$SYN_TEST_DEPLOY_SECRET is a variable named secret" in p for p in problems) == 1
    assert not any(key in p for p in problems)
    # Synapse's own folder file: `${VAR:-default}` in env too, command and args as written
    own = folder / "mcp_servers.json"
    entry = {"command": "${SYN_TEST_UNSET:-x}", "env": {"OK": "${SYN_TEST_UNSET:-dflt}"}}
    own.write_text(json.dumps({"mcpServers": {"own": entry}}))
    servers, _ = load_config([own], settings)
    assert servers["own"].command == "${SYN_TEST_UNSET:-x}"
    assert dict(servers["own"].env) == {"OK": "dflt"}


# ------------------------------------------------------------------ skills


async def test_claude_skills_of_the_user_and_a_trusted_folder_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_home, home, folder = tmp_path / "user", tmp_path / "home", tmp_path / "proj"
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)  # ~/.claude itself
    monkeypatch.setenv("HOME", str(user_home))
    write_skill(user_home / ".claude" / "skills", "mine", "from-user-claude-skills")
    write_skill(folder / ".claude" / "skills", "theirs", "from-folder-claude-skills")
    async with workspace(folder, home, trusted=True) as (ws, registry):
        assert {"mine", "theirs"} <= set(registry.skills)
        assert registry.skills["theirs"].description == "theirs skill"
        mine = await ws.run("skill:mine:hello")
        assert mine.stdout.strip() == "from-user-claude-skills", mine.text
        theirs = await ws.run("skill:theirs:hello")
        assert theirs.stdout.strip() == "from-folder-claude-skills", theirs.text


async def test_an_untrusted_folders_claude_skills_are_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude, home, folder = tmp_path / "claude", tmp_path / "home", tmp_path / "proj"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    write_skill(claude / "skills", "mine", "from-user-claude-skills")
    write_skill(folder / ".claude" / "skills", "theirs", "from-folder-claude-skills")
    async with workspace(folder, home) as (ws, registry):
        assert not ws.trusted and set(registry.skills) == {"mine"}
        notice = ws.trust_notice or ""
        assert "folder not trusted: its .claude/skills was not loaded" in notice, notice
        theirs = await ws.run("skill:theirs:hello")
        assert theirs.exit_code != 0 and "from-folder" not in theirs.stdout
        mine = await ws.run("skill:mine:hello")  # the user's own: no trust needed
        assert mine.stdout.strip() == "from-user-claude-skills", mine.text
        # the user trusts the folder: its skills come
        await ws.set_trusted(True)
        assert await eventually(lambda: "theirs" in registry.skills)
        theirs = await ws.run("skill:theirs:hello")
        assert theirs.stdout.strip() == "from-folder-claude-skills", theirs.text


async def test_skill_names_synapse_then_the_users_then_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude, home, folder = tmp_path / "claude", tmp_path / "home", tmp_path / "proj"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    write_skill(home / "skills", "same", "synapse")
    write_skill(claude / "skills", "same", "user-claude")
    write_skill(claude / "skills", "both", "user-claude")
    write_skill(folder / ".claude" / "skills", "both", "folder")
    async with workspace(folder, home, trusted=True) as (ws, registry):
        assert registry.skills["same"].path == home / "skills" / "same"
        assert registry.skills["both"].path == claude / "skills" / "both"
        assert (await ws.run("skill:same:hello")).stdout.strip() == "synapse"
        assert (await ws.run("skill:both:hello")).stdout.strip() == "user-claude"
        skipped = [w for w in registry.skill_warnings if "the first found wins" in w]
        assert skipped == [
            f"skill 'same' in {claude / 'skills'} skipped: {home / 'skills' / 'same'} has "
            "one of that name (the first found wins)",
            f"skill 'both' in {folder / '.claude' / 'skills'} skipped: "
            f"{claude / 'skills' / 'both'} has one of that name (the first found wins)",
        ]
