"""Every face asks the same way (issue 17, item 4): the REPL on a terminal asks with
numbered answers; `synapse chat -p` and `synapse exec` cannot ask, so what would be
asked is denied with the reason, unless `--yes` allows it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fake_api import FakeApiProcess
from tests.test_repl import chat, home_env
from tests.test_repl_bang import PtyChat


def _tool_results(bodies: list[dict[str, Any]]) -> list[str]:
    texts = []
    for body in bodies:
        for block in body["messages"][-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block["content"]
                texts.append(
                    content if isinstance(content, str) else "".join(c["text"] for c in content)
                )
    return texts


def test_the_repl_asks_on_its_terminal_and_the_answer_decides(
    tmp_path: Path, workdir: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    script: list[Any] = [
        {"commands": [f"touch {outside}/allowed"]},
        {"text": "made one"},
        {"commands": [f"touch {outside}/refused"]},
        {"text": "tried another"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        pty = PtyChat(home_env(tmp_path / "home", api.env()), workdir, no_color=True)
        try:
            at = pty.wait_for("You (1)> ")
            pty.type("make a file\r")
            at = pty.wait_for("writes outside the workspace", at)
            at = pty.wait_for("[1] Allow once", at)
            at = pty.wait_for("Answer 1-", at)
            pty.type("1\r")
            at = pty.wait_for("made one", at)
            at = pty.wait_for("You (2)> ", at)
            pty.type("another\r")
            at = pty.wait_for("Answer 1-", at)
            pty.type("\r")  # Enter alone: Deny
            at = pty.wait_for("tried another", at)
            at = pty.wait_for("You (3)> ", at)
            pty.type("/exit\r")
            assert pty.wait_exit() == 0
        finally:
            pty.close()
        results = _tool_results(api.message_bodies())
    assert (outside / "allowed").exists()
    assert not (outside / "refused").exists()
    assert any("denied by the user" in r for r in results), results


def test_chat_p_denies_what_it_would_ask_unless_yes(tmp_path: Path, workdir: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    script: list[Any] = [
        {"commands": [f"touch {outside}/one"]},
        {"text": "done"},
        {"commands": [f"touch {outside}/two"]},
        {"text": "done"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        refused = chat(["-p", "make it"], env, workdir)
        allowed = chat(["-p", "make it", "--yes"], env, workdir)
        results = _tool_results(api.message_bodies())
    assert refused.returncode == 0 and allowed.returncode == 0, (refused.stderr, allowed.stderr)
    assert not (outside / "one").exists()
    assert (outside / "two").exists()
    assert "Not run: denied: writes outside the workspace" in results[0]
    assert "synapse chat -p cannot ask; run it again with --yes" in results[0]
    assert "Not run" not in results[1]


def _exec(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = home_env(home)
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_exec_denies_what_it_would_ask_unless_yes(tmp_path: Path, workdir: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    home = tmp_path / "home"
    refused = _exec(workdir, home, "--json", f"touch {outside}/x", "touch inside.txt")
    records = [json.loads(line) for line in refused.stdout.splitlines()]
    assert refused.returncode == 126
    assert records[0]["category"] == "permission_denied"
    assert "synapse exec cannot ask; run it again with --yes" in records[0]["stderr"]
    assert records[1]["exitCode"] == 0  # inside the workspace: nothing to ask
    assert not (outside / "x").exists() and (workdir / "inside.txt").exists()
    allowed = _exec(workdir, home, "--yes", f"touch {outside}/x")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert (outside / "x").exists()
    bad = _exec(workdir, home, "--sandbox", "nowhere", "true")
    assert bad.returncode == 2 and "--sandbox" in bad.stderr
