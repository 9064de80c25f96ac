"""The Neovim plugin against the real server, in real headless Neovim.

Each test starts `nvim --headless --clean -u nvim-client/tests/driver.lua` with
the plugin on 'runtimepath'; the plugin spawns `python -m synapse_lsp` through
Neovim's LSP client, the server talks to the scripted fake Anthropic API
(in-process, on loopback), and the driver writes what it saw (buffer lines,
disk text, transcript lines, permission asks) as JSON before `qa!`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "nvim-client"
DRIVER = CLIENT / "tests" / "driver.lua"
NVIM = shutil.which("nvim")

_missing = [
    name for name in ("server.py", "fakeapi.py") if not (ROOT / "synapse_lsp" / name).exists()
]

pytestmark = [
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install neovim)"),
    pytest.mark.skipif(bool(_missing), reason=f"synapse_lsp/{', '.join(_missing)} not written yet"),
    pytest.mark.timeout(90),
]


async def run_nvim(
    scenario: str,
    workdir: Path,
    tmp_path: Path,
    *,
    script: Any,
    settings: dict[str, Any] | None = None,
    permission: str | None = None,
    open_file: str | None = "a.py",
) -> dict[str, Any]:
    """Run one driver scenario with the fake API serving `script`; return its JSON."""
    from synapse_lsp.fakeapi import FakeAnthropic

    assert NVIM is not None
    out = tmp_path / f"{scenario}.json"
    async with FakeAnthropic(script) as api:
        config = {
            "cmd": [sys.executable, "-m", "synapse_lsp"],
            "cmd_env": {
                "ANTHROPIC_BASE_URL": api.base_url,
                "ANTHROPIC_API_KEY": "test-key-not-real",
                "SYNAPSE_HOME": str(tmp_path / "synapse-home"),
            },
            "settings": settings or {},
            "permission": permission,
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "NVIM"))}
        env.update(
            {
                "SYN_CLIENT": str(CLIENT),
                "SYN_OUT": str(out),
                "SYN_SCENARIO": scenario,
                "SYN_CONFIG": json.dumps(config),
                "HOME": str(tmp_path / "home"),
                "XDG_STATE_HOME": str(tmp_path / "state"),
            }
        )
        args = [NVIM, "--headless", "--clean", "-u", str(DRIVER)]
        if open_file:
            args.append(open_file)
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=workdir,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=75)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"nvim did not finish scenario {scenario!r}") from None
    assert out.exists(), (
        f"no result from nvim (exit {proc.returncode})\n"
        f"stdout: {stdout.decode(errors='replace')[-2000:]}\n"
        f"stderr: {stderr.decode(errors='replace')[-2000:]}"
    )
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["ok"], f"{result.get('error')}\n{result.get('messages', '')}"
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "a.py").write_text("x = 1\nfoo = 2\n")
    return work


def summary_title(command: str) -> str:
    from synapse_lsp.summary import summarize

    return summarize(command).title


async def test_setup_attaches_the_real_server(project: Path, tmp_path: Path) -> None:
    result = await run_nvim("attach", project, tmp_path, script=[])
    assert result["attached"] is True
    assert result["second_attached"] is True
    assert result["client_count"] == 1
    assert "synapse.session.prompt" in result["commands"]
    assert "synapse.shell.run" in result["commands"]
    status = result["status"]["res"]
    assert status["apiKey"] is True
    assert [w["uri"] for w in status["workspaces"]] == [project.as_uri()]


async def test_run_edit_changes_the_modified_buffer_not_the_disk(
    project: Path, tmp_path: Path
) -> None:
    result = await run_nvim("run_edit", project, tmp_path, script=[])
    assert result["buffer"] == ["x = 10", "bar = 2"]
    assert result["modified"] is True
    assert result["disk"] == "x = 1\nfoo = 2\n"
    transcript = result["transcript"]
    assert transcript[0] == "#### Run: edit a.py 'foo' 'bar' [completed]"
    assert transcript[-1] == ""
    assert any("a.py" in line for line in transcript[1:-1]), transcript


async def test_chat_turn_streams_into_the_transcript(project: Path, tmp_path: Path) -> None:
    script = [
        {
            "text": "Streaming the answer in small pieces.",
            "commands": ["echo hello-from-tool"],
            "chunk_size": 3,
            "chunk_delay": 0.03,
        },
        {"text": "All done."},
    ]
    result = await run_nvim("chat", project, tmp_path, script=script)
    title = summary_title("echo hello-from-tool")
    assert result["transcript"] == [
        "### You",
        "list things",
        "",
        "### Synapse",
        "Streaming the answer in small pieces.",
        "",
        f"#### Tool: {title} [completed]",
        "    $ echo hello-from-tool",
        "    hello-from-tool",
        "",
        "All done.",
        "",
    ]
    # the answer arrived in pieces and was drawn more than once
    assert result["seen_partial"] is True
    assert result["flushes"] >= 2
    # the tool call's body is a fold under its header
    assert result["fold"]["level"] == 1


async def test_cancel_stops_a_running_turn(project: Path, tmp_path: Path) -> None:
    script = [{"commands": ["sleep 30"]}, {"text": "should not be asked"}]
    result = await run_nvim("cancel", project, tmp_path, script=script)
    title = summary_title("sleep 30")
    assert result["stop_reason"] == "cancelled"
    transcript = result["transcript"]
    assert transcript[:3] == ["### You", "wait for it", ""]
    assert f"#### Tool: {title} [cancelled]" in transcript
    assert transcript[-2:] == ["*Turn ended: cancelled*", ""]
    assert "should not be asked" not in "\n".join(transcript)


async def test_deny_prevents_the_command(project: Path, tmp_path: Path) -> None:
    script = [{"commands": ["touch created.txt"]}, {"text": "Understood."}]
    result = await run_nvim("deny", project, tmp_path, script=script, permission="ask-all-native")
    assert result["created"] is False
    assert len(result["asked"]) == 1
    ask = result["asked"][0]
    assert "touch created.txt" in ask["message"]
    assert [a["title"] for a in ask["actions"]] == ["Allow once", "Allow for this session", "Deny"]
    title = summary_title("touch created.txt")
    transcript = result["transcript"]
    header = transcript.index(f"#### Tool: {title} [failed, exit 126]")
    assert transcript[header + 1] == "    $ touch created.txt"
    body = transcript[header + 1 : transcript.index("", header)]
    assert "    Not run: denied by the user" in body, body
    assert transcript[-2:] == ["Understood.", ""]
