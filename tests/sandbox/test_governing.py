"""Issue 28 item 2: the agent cannot rewrite the rules that govern it. A built-in
`write`/`edit` of what decides what the agent may do or what runs outside the sandbox
(settings and hooks, permission rules, trusted folders, MCP configs, `.git`) asks a
question of its own in every mode and policy, and is refused on `--yes`; the sandbox
keeps the folder's such files read-only for native commands too."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from synapse_lsp.cli.asking import yes_asker
from synapse_lsp.config import Settings
from synapse_lsp.policy import run_rules
from synapse_lsp.policy.gate import ALLOW_ONCE, DENY, Asker, AskingGate
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession
from tests.sandbox.test_escalation import Recorder

OUTSIDE_RULE = json.dumps({"folders": {"/": {"outside": ["python3"]}}})


def _router(
    shell: ShellSession, settings: Settings, root: Path, ask: Asker | None, **changes: str
) -> BashRouter:
    live = replace(settings, **changes)  # type: ignore[arg-type]
    gate = AskingGate(
        live,
        root,
        ask,
        sandboxed=lambda: shell.sandbox.sandboxed,
        view=lambda: shell.view,
        rules=run_rules.RuleFile(settings.synapse_home),
    )
    return BashRouter(shell, live, permission=gate)


@pytest.fixture
def home_in_workspace(tmp_path: Path) -> Settings:
    """The default layout when the workspace is $HOME: $SYNAPSE_HOME is `.synapse` in it."""
    return Settings(
        synapse_home=tmp_path / "work" / ".synapse",
        command_timeout=30.0,
        sandbox="workspace-write",
        network="off",
    )


@pytest.mark.parametrize("policy", ["auto", "ask-writes-outside-workspace", "ask-all-native"])
@pytest.mark.parametrize("mode", ["workspace-write", "full-access"])
async def test_a_builtin_write_of_the_agents_own_rules_asks_its_own_question(
    workdir: Path, home_in_workspace: Settings, mode: str, policy: str
) -> None:
    settings = replace(home_in_workspace, sandbox=mode)
    shell = ShellSession(workdir, settings)
    await shell.start()
    try:
        asker = Recorder(DENY)
        router = _router(shell, settings, workdir, asker, permission=policy)
        for line in (
            f"write .synapse/permissions.json '{OUTSIDE_RULE}'",
            "write .synapse/settings.json '{\"hooks\": {}}'",
            "write .claude/settings.local.json '{}'",
            "write mcp_servers.json '{}'",
            "edit .git/config 'a' 'b'",
        ):
            result = await router.route(line)
            assert result.exit_code == 126, (line, result.text)
            message, actions = asker.questions[-1]
            assert "which governs" in message and "Allow this one change?" in message
            assert actions == (ALLOW_ONCE, DENY)  # never remembered
        assert not (workdir / ".synapse" / "permissions.json").exists()
        assert not (workdir / "mcp_servers.json").exists()
        # allowed once: written; the next change asks again
        asker.answers = [ALLOW_ONCE]
        assert (await router.route("write .synapse/settings.json '{}'")).exit_code == 0
        assert (await router.route("write .synapse/settings.json '{}'")).exit_code == 126
        # an ordinary file asks nothing
        before = len(asker.questions)
        assert (await router.route("write notes.txt hi")).exit_code == 0
        assert len(asker.questions) == before
    finally:
        await shell.close()


async def test_yes_answers_for_nobody_here(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    router = _router(shell, settings, workdir, yes_asker)
    result = await router.route("write .claude/settings.json '{\"hooks\": {}}'")
    assert result.exit_code == 126 and "--yes does not cover it" in result.stderr
    assert not (workdir / ".claude" / "settings.json").exists()


async def test_the_sandbox_keeps_the_folders_rules_read_only(
    settings: Settings, workdir: Path
) -> None:
    for name in (".synapse", ".claude"):
        (workdir / name).mkdir()
        (workdir / name / "settings.json").write_text("{}")
    (workdir / "mcp_servers.json").write_text("{}")
    shell = ShellSession(workdir, settings)
    await shell.start()
    try:
        for line in (
            "echo '{\"hooks\": 1}' > .synapse/settings.json",
            "echo x > .claude/settings.local.json",
            "echo x > mcp_servers.json",
        ):
            result = await shell.run(line)
            assert result.exit_code != 0 and "Read-only file system" in result.stderr, line
        assert (workdir / ".synapse" / "settings.json").read_text() == "{}"
        assert (await shell.run("echo fine > other.txt")).exit_code == 0
    finally:
        await shell.close()


async def test_claude_codes_own_settings_are_guarded_like_ours(
    shell: ShellSession, settings: Settings, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`~/.claude/settings*.json` holds hooks Synapse runs unsandboxed (the user's own):
    a built-in write of it asks its own question, even where writing is otherwise free."""
    claude = workdir / "claude-home"  # inside the workspace: no other question applies
    claude.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    asker = Recorder(DENY)
    router = _router(shell, settings, workdir, asker)
    hook = json.dumps({"hooks": {"Stop": [{"hooks": [{"command": "touch /tmp/x"}]}]}})
    for name in ("settings.json", "settings.local.json"):
        result = await router.route(f"write claude-home/{name} '{hook}'")
        assert result.exit_code == 126, result.text
        assert "Claude Code settings" in asker.questions[-1][0]
        assert not (claude / name).exists()
    before = len(asker.questions)
    assert (await router.route("write claude-home/CLAUDE.md 'notes'")).exit_code == 0
    assert len(asker.questions) == before
