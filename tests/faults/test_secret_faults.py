"""Fault drill, secrets: the model's credentials (and the variables `secretEnv` names)
stay in the Synapse process. The session shell, skill scripts and MCP servers never
inherit them, `$VAR` in an MCP config never expands to one without the home-only
opt-in, and a config file nested past the JSON reader's limit is a clear config error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.config import LiveSettings, Settings
from synapse_lsp.extensions.mcp_client import load_config
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.policy import trust
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-ant-test-0123456789abcdef"
SECRETS = {
    "ANTHROPIC_API_KEY": KEY,
    "ANTHROPIC_AUTH_TOKEN": "auth-token-secret",
    "ANTHROPIC_BASE_URL": "https://user:pw@proxy.example/",
    "MY_MODEL_KEY": "configured-key-secret",  # the settings' apiKeyEnv
    "DEPLOY_TOKEN": "declared-secret",  # matches secretEnv "*_TOKEN"
}
PLAIN = {"SYNAPSE_PLAIN_VAR": "visible"}

MCP_SERVER = """\
import os
from mcp.server.mcpserver import MCPServer

app = MCPServer("envy")


@app.tool()
def env_keys() -> str:
    \"\"\"The names of the server's environment variables.\"\"\"
    return "\\n".join(sorted(os.environ))


@app.tool()
def env_value(name: str) -> str:
    \"\"\"One variable's value, or <unset>.\"\"\"
    return os.environ.get(name, "<unset>")


app.run()
"""


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **PLAIN}.items():
        monkeypatch.setenv(name, value)


def settings_for(home: Path, **more: object) -> Settings:
    return Settings(
        synapse_home=home,
        command_timeout=30.0,
        api_key_env="MY_MODEL_KEY",
        secret_env=("*_TOKEN",),
        **more,  # type: ignore[arg-type]
    )


def assert_no_secret(text: str) -> None:
    for name, value in SECRETS.items():
        assert name not in text, f"{name} leaked: {text[:2000]}"
        assert value not in text, f"the value of {name} leaked"


def write_server(folder: Path) -> Path:
    path = folder / "envy_server.py"
    path.write_text(MCP_SERVER)
    return path


@pytest.fixture
async def world(
    tmp_path: Path, secret_env: None
) -> AsyncIterator[tuple[BashRouter, ExtensionRegistry, Path]]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    script = home / "skills" / "probe" / "scripts" / "env_keys.py"
    script.parent.mkdir(parents=True)
    script.write_text(
        '"""Print the environment."""\nimport os\nprint(sorted(os.environ.items()))\n'
    )
    server = write_server(tmp_path)
    (home / "mcp").mkdir()
    (home / "mcp" / "mcp_servers.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "envy": {
                        "command": sys.executable,
                        "args": [str(server)],
                        # A server that needs a secret gets it from its own entry.
                        "env": {"GIVEN_SECRET": "literal-from-config"},
                    }
                }
            }
        )
    )
    settings = settings_for(home)
    registry = ExtensionRegistry(
        settings, work, watch=False, install_wrappers=False, serve_socket=False
    )
    shell = ShellSession(work, settings)
    await shell.start()
    await registry.start()
    try:
        yield BashRouter(shell, settings, extensions=registry), registry, work
    finally:
        await shell.close()
        await registry.close()


async def test_the_session_shell_inherits_no_credential(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, _, _ = world
    result = await router.route("env")
    assert result.exit_code == 0
    assert "SYNAPSE_PLAIN_VAR=visible" in result.stdout
    assert_no_secret(result.stdout)
    # The Synapse process itself keeps them (it calls the model).
    assert os.environ["ANTHROPIC_API_KEY"] == KEY


async def test_a_skill_script_inherits_no_credential(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, _, _ = world
    assert (await router.route("export FROM_SHELL=1")).exit_code == 0
    result = await router.route("skill:probe:env_keys")
    assert result.exit_code == 0, result.text
    assert "SYNAPSE_PLAIN_VAR" in result.stdout and "FROM_SHELL" in result.stdout
    assert_no_secret(result.stdout)


async def test_an_mcp_server_inherits_no_credential_but_gets_its_own_env(
    world: tuple[BashRouter, ExtensionRegistry, Path],
) -> None:
    router, registry, _ = world
    await registry.mcp.wait_all(30)
    result = await router.route("mcp:envy:env_keys")
    assert result.exit_code == 0, result.text
    assert "GIVEN_SECRET" in result.stdout.split()
    assert_no_secret(result.stdout)
    given = await router.route("mcp:envy:env_value GIVEN_SECRET")
    assert given.stdout.strip() == "literal-from-config"


def test_synapse_exec_does_not_hand_the_key_to_commands(tmp_path: Path) -> None:
    """The reported case: `ANTHROPIC_API_KEY=… synapse exec 'env | grep ANTHROPIC'`."""
    env = {**os.environ, "SYNAPSE_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": KEY}
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "env | grep -c ANTHROPIC_ || true"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert KEY not in proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0", proc.stdout + proc.stderr


# ------------------------------------------------------------ config expansion


def mcp_entry(server: Path, env: dict[str, str]) -> dict[str, object]:
    return {"mcpServers": {"envy": {"command": sys.executable, "args": [str(server)], "env": env}}}


async def test_a_workspace_config_cannot_expand_the_key(tmp_path: Path, secret_env: None) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    server = write_server(tmp_path)
    refs = {
        "T": "$ANTHROPIC_API_KEY",
        "B": "Bearer ${ANTHROPIC_AUTH_TOKEN}",
        "K": "${MY_MODEL_KEY}",
        "D": "$DEPLOY_TOKEN",
        "P": "$SYNAPSE_PLAIN_VAR",
    }
    (work / "mcp_servers.json").write_text(json.dumps(mcp_entry(server, refs)))
    # Even with the opt-in on: it covers the home config only.
    settings = settings_for(home, mcp_env_allow_credentials=True)
    registry = ExtensionRegistry(
        settings, work, watch=False, install_wrappers=False, serve_socket=False
    )
    shell = ShellSession(work, settings)
    await shell.start()
    await registry.start()
    try:
        await registry.mcp.wait_all(30)
        router = BashRouter(shell, settings, extensions=registry)
        seen = {}
        for name in refs:
            result = await router.route(f"mcp:envy:env_value {name}")
            assert result.exit_code == 0, result.text
            seen[name] = result.stdout.strip()
        assert seen == {
            "T": "$ANTHROPIC_API_KEY",
            "B": "Bearer ${ANTHROPIC_AUTH_TOKEN}",
            "K": "${MY_MODEL_KEY}",
            "D": "$DEPLOY_TOKEN",
            "P": "visible",
        }
        problems = "\n".join(registry.problems)
        assert "$ANTHROPIC_API_KEY is a model credential; left unexpanded" in problems
        assert "$DEPLOY_TOKEN is a variable named secret by the secretEnv setting" in problems
        assert_no_secret(
            problems.replace("$ANTHROPIC_API_KEY", "")
            .replace("$", "")
            .replace("ANTHROPIC_AUTH_TOKEN", "")
            .replace("MY_MODEL_KEY", "")
            .replace("DEPLOY_TOKEN", "")
        )
    finally:
        await shell.close()
        await registry.close()


def test_the_home_config_expands_a_credential_only_with_the_opt_in(
    tmp_path: Path, secret_env: None
) -> None:
    home = tmp_path / "home"
    config = home / "mcp" / "mcp_servers.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(mcp_entry(tmp_path / "s.py", {"T": "$ANTHROPIC_API_KEY"})))
    plain = settings_for(home)
    servers, problems = load_config([config], plain)
    assert dict(servers["envy"].env) == {"T": "$ANTHROPIC_API_KEY"}
    assert any('"mcpEnvAllowCredentials": true' in p for p in problems)
    assert all(KEY not in p for p in problems)
    servers, problems = load_config([config], settings_for(home, mcp_env_allow_credentials=True))
    assert dict(servers["envy"].env) == {"T": KEY} and problems == []
    # A variable that merely holds the key's value is refused too.
    os.environ["INNOCENT_LOOKING"] = f"Bearer {KEY}"
    try:
        config.write_text(json.dumps(mcp_entry(tmp_path / "s.py", {"T": "${INNOCENT_LOOKING}"})))
        servers, problems = load_config([config], plain)
        assert dict(servers["envy"].env) == {"T": "${INNOCENT_LOOKING}"}
        assert "set to a model credential's value" in problems[0]
    finally:
        del os.environ["INNOCENT_LOOKING"]


def test_only_the_home_settings_file_turns_the_opt_in_on(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "repo"
    (folder / ".synapse").mkdir(parents=True)
    home.mkdir()
    (folder / ".synapse" / "settings.json").write_text('{"mcpEnvAllowCredentials": true}')
    live = LiveSettings({"SYNAPSE_HOME": str(home)}).for_folder(folder)
    assert live().mcp_env_allow_credentials is False
    assert any("mcpEnvAllowCredentials" in p for p in live.problems)
    # Nor the face (editor settings may come from a repository's .vscode/settings.json).
    top = LiveSettings({"SYNAPSE_HOME": str(home)})
    problems = top.set_face({"mcpEnvAllowCredentials": True})
    assert top().mcp_env_allow_credentials is False
    assert any("only in $SYNAPSE_HOME/settings.json" in p for p in problems)
    (home / "settings.json").write_text('{"mcpEnvAllowCredentials": true, "secretEnv": ["X*"]}')
    top.reload()
    # Written after Synapse first loaded the home: the tightening (secretEnv) applies at
    # once, the opt-in waits until the user confirms it (trust.home_unconfirmed).
    assert top().mcp_env_allow_credentials is False and top().secret_env == ("X*",)
    assert any("mcpEnvAllowCredentials changed since" in p for p in top.problems)
    trust.record_home(home)  # `synapse trust --home`
    top.reload()
    assert top().mcp_env_allow_credentials is True and top().secret_env == ("X*",)


# ------------------------------------------------------------ nesting


async def test_a_deeply_nested_config_is_a_config_error_and_commands_still_run(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    script = home / "skills" / "hello" / "scripts" / "hi.sh"
    script.parent.mkdir(parents=True)
    script.write_text("# Say hi.\necho hi from skill\n")
    work.mkdir()
    (work / "mcp_servers.json").write_text("[" * 100_000)
    servers, problems = load_config([work / "mcp_servers.json"])
    assert servers == {} and "nested too deeply" in problems[0]
    env = {**os.environ, "SYNAPSE_HOME": str(home)}
    run = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "echo plain", "skill:hello:hi"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "plain" in run.stdout and "hi from skill" in run.stdout
    assert "recursion" not in (run.stdout + run.stderr).lower()
    # The problem is reported where config problems are (log, `synapse tools refresh`).
    registry = ExtensionRegistry(
        Settings(synapse_home=home), work, watch=False, install_wrappers=False, serve_socket=False
    )
    await registry.start()
    try:
        assert any("mcp_servers.json: nested too deeply" in p for p in registry.problems)
        assert "skill:hello:hi" in {c.name for c in registry.commands()}
    finally:
        await registry.close()


def test_the_key_is_not_in_synapses_proc_environ_for_a_same_user_command(tmp_path: Path) -> None:
    """Issue 28 item 6: in full-access a command read the key from
    `/proc/<Synapse>/environ` (the shell's environment is clean, the process that started
    it is not). Synapse is non-dumpable, so its /proc files are root's: a normal user's
    command cannot read them. Root reads anything (documented in the threat model)."""
    env = {
        **os.environ,
        "SYNAPSE_HOME": str(tmp_path / "home"),
        "ANTHROPIC_API_KEY": KEY,
        "SYNAPSE_SANDBOX": "full-access",
    }
    # bash -> its supervisor -> Synapse: every ancestor's environ, as far as readable
    probe = (
        'p=$PPID; for _ in 1 2 3; do tr "\\0" "\\n" 2>/dev/null </proc/$p/environ; '
        "p=$(awk '{print $4}' /proc/$p/stat); done | grep -c " + KEY + " || true"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    count = proc.stdout.strip().splitlines()[0]
    if os.getuid() == 0:
        assert count != "0", "as root the key is readable (the threat model says so)"
        doc = (Path(__file__).resolve().parents[2] / "docs" / "threat-model.md").read_text()
        assert "root reads" in doc and "PR_SET_DUMPABLE" in doc
    else:
        assert count == "0", proc.stdout + proc.stderr
