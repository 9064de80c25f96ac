"""Issue 27 ("first hour, round 3"), items 5-7: errors that name the fix, each once.

In tests/faults/ so that they run as a non-root user too: an unwritable folder is
unwritable only there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient, StreamRetry
from synapse_lsp.config import LiveSettings
from synapse_lsp.errors import ModelError
from tests.fake_api import FakeApiProcess


def _synapse(
    args: list[str], home: Path, cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update({"SYNAPSE_HOME": str(home), "NO_COLOR": "1", **(extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", *args],
        capture_output=True, text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        timeout=120,
    )  # fmt: skip


def _settings(home: Path, values: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps(values))


# ------------------------------------------------------------------ item 5


def test_a_misspelt_setting_names_the_file_and_the_key_it_is_near(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _settings(home, {"commandTimout": 5, "maxTurn": 3, "nonsenseKey": 1})
    live = LiveSettings({"SYNAPSE_HOME": str(home)})
    text = "\n".join(live.problems)
    assert f"{home / 'settings.json'}: unknown setting 'commandTimout'" in text
    assert "(did you mean 'commandTimeout'?); ignored" in text
    assert "(did you mean 'maxTurns'?)" in text
    assert "unknown setting 'nonsenseKey'; ignored" in text
    assert live.refusals == []  # none of them restricts: start, with the warnings
    assert live().command_timeout == 120.0


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({"sandbx": "read-only"}, "did you mean 'sandbox'?"),
        ({"Deny": ["rm"]}, "did you mean 'deny'?"),
        ({"secretEnvs": ["TOKEN"]}, "did you mean 'secretEnv'?"),
        ({"netwrk": "off"}, "did you mean 'network'?"),
        ({"permision": "ask-all-native"}, "did you mean 'permission'?"),
        ({"hook": {}}, "did you mean 'hooks'?"),
        ({"sandbox": "readonly"}, "'readonly' is not one of"),
        ({"deny": "rm"}, "expected a list of strings"),
    ],
)
def test_a_restrictive_setting_misspelt_or_bad_is_refused(
    tmp_path: Path, values: dict[str, Any], refused: str
) -> None:
    home = tmp_path / "home"
    _settings(home, values)
    live = LiveSettings({"SYNAPSE_HOME": str(home)})
    assert len(live.refusals) == 1 and refused in live.refusals[0], live.problems
    assert "refused" in live.refusals[0]


def test_a_folders_misspelt_deny_is_refused_and_other_typos_are_warnings(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "work"
    (folder / ".synapse").mkdir(parents=True)
    (folder / ".synapse" / "settings.json").write_text(json.dumps({"dny": ["rm"], "modl": "x"}))
    live = LiveSettings({"SYNAPSE_HOME": str(home)}).for_folder(folder)
    [refusal] = live.refusals
    assert str(folder / ".synapse" / "settings.json") in refusal and "'deny'" in refusal
    typo = "unknown setting 'modl' (did you mean 'model'?); ignored"
    assert any(typo in p for p in live.problems)


def test_exec_warns_once_and_runs_or_refuses_a_restrictive_typo(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _settings(home, {"commandTimout": 5})
    ran = _synapse(["exec", "echo ran-it"], home, work)
    assert ran.returncode == 0 and ran.stdout == "ran-it\n", ran.stderr
    assert ran.stderr.count("commandTimout") == 1, ran.stderr
    _settings(home, {"sandbx": "read-only"})
    refused = _synapse(["exec", "echo ran-it"], home, work)
    assert refused.returncode == 2 and "ran-it" not in refused.stdout
    assert refused.stderr.count("'sandbx'") == 1 and "fix the name" in refused.stderr


def test_chat_starts_with_a_warning_for_a_typo_and_refuses_a_restrictive_one(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _settings(home, {"commandTimout": 5})
    with FakeApiProcess([{"text": "Answer."}], tmp_path / "api") as api:
        ok = _synapse(["chat", "-p", "hi"], home, work, api.env())
    assert ok.returncode == 0 and ok.stdout == "Answer.\n", ok.stderr
    assert ok.stderr.count("did you mean 'commandTimeout'?") == 1, ok.stderr
    _settings(home, {"sandbx": "read-only"})
    with FakeApiProcess([{"text": "Answer."}], tmp_path / "api2") as api:
        refused = _synapse(["chat", "-p", "hi"], home, work, api.env())
        assert api.message_bodies() == []  # nothing was sent
    assert refused.returncode == 2 and refused.stdout == ""
    assert "did you mean 'sandbox'?" in refused.stderr


# ------------------------------------------------------------------ item 6


def _resolves_as_no_such_host(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
    except socket.gaierror as exc:
        return exc.errno == socket.EAI_NONAME
    return False


async def test_a_host_that_does_not_exist_is_not_retried_and_the_url_is_named() -> None:
    url = "https://api.anthropic.invalid"
    client = ModelClient(
        api_key="k", base_url=url, base_url_source="$ANTHROPIC_BASE_URL",
        retry_base_delay=0.01, retry_max_delay=0.01,
    )  # fmt: skip
    retries: list[StreamRetry] = []
    with pytest.raises(ModelError) as caught:
        async for item in client.stream(system="s", messages=[{"role": "user", "content": "x"}]):
            if isinstance(item, StreamRetry):
                retries.append(item)
    await client.close()
    message = caught.value.message
    assert f"{url} (from $ANTHROPIC_BASE_URL)" in message
    if _resolves_as_no_such_host("api.anthropic.invalid"):
        assert retries == [] and "does not resolve" in message and "not retried" in message
    else:  # a resolver that cannot answer now (EAI_AGAIN) may answer later: retried
        assert len(retries) == 4 and "failed after 5 attempts" in message


def test_chat_p_names_a_bad_url_and_its_source_once(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    proc = _synapse(
        ["chat", "-p", "hi"], home, work,
        {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "htp://api.example"},
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == ""
    assert "htp://api.example (from $ANTHROPIC_BASE_URL)" in proc.stderr
    assert proc.stderr.count("Cannot reach the model API") == 1, proc.stderr
    assert "Retrying" not in proc.stderr


# ------------------------------------------------------------------ item 7


@pytest.mark.parametrize("how", ["a file in its path", "a folder without write permission"])
def test_an_unwritable_synapse_home_is_one_line(tmp_path: Path, how: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    if how == "a file in its path":
        (tmp_path / "afile").write_text("")
        home = tmp_path / "afile" / "home"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere; the non-root leg runs this case")
        home = tmp_path / "ro"
        home.mkdir(mode=0o555)
    proc = _synapse(["chat", "--demo", "-p", "hi"], home, work)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    about_home = [line for line in proc.stderr.splitlines() if str(home) in line]
    assert len(about_home) == 1, proc.stderr
    assert "is not writable" in about_home[0] and "Set SYNAPSE_HOME" in about_home[0]
    assert "(offline demo model)" in proc.stdout + proc.stderr  # and the turn ran


def test_a_missing_bubblewrap_is_said_once_by_each_face(tmp_path: Path) -> None:
    home, work, bin_dir = tmp_path / "home", tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    for tool in ("bash", "ls", "cat", "env", "git", "sh"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True)
        if found.stdout.strip():
            (bin_dir / tool).symlink_to(found.stdout.strip())
    no_bwrap = {"PATH": str(bin_dir), "SYNAPSE_SANDBOX": "workspace-write"}
    one_shot = _synapse(["chat", "--demo", "-p", "hi"], home, work, no_bwrap)
    assert one_shot.stderr.count("bubblewrap (bwrap) is not installed") == 1, one_shot.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update({"SYNAPSE_HOME": str(home), "NO_COLOR": "1", **no_bwrap})
    repl = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "--demo"],
        input="hi\n/exit\n", capture_output=True, text=True, env=env, cwd=work, timeout=120,
    )  # fmt: skip
    both = repl.stdout + repl.stderr
    assert both.count("bubblewrap (bwrap) is not installed") == 1, both
    assert "Sandbox: workspace-write requested, NOT sandboxed" in repl.stdout


async def test_an_api_error_never_shows_the_urls_credentials() -> None:
    url = "http://someone:s3cret-token@127.0.0.1:9/v1?key=k3y-in-query"
    client = ModelClient(
        api_key="k", base_url=url, base_url_source="$ANTHROPIC_BASE_URL",
        max_attempts=2, retry_base_delay=0.01, retry_max_delay=0.01,
    )  # fmt: skip
    with pytest.raises(ModelError) as caught:
        async for _ in client.stream(system="s", messages=[{"role": "user", "content": "x"}]):
            pass
    await client.close()
    message = caught.value.message
    assert "http://…@127.0.0.1:9/v1 (from $ANTHROPIC_BASE_URL)" in message
    assert "s3cret-token" not in message and "k3y-in-query" not in message
