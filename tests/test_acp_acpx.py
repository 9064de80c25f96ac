"""`synapse acp` driven by an ACP client we did not write: acpx (npm, pinned), one-shot
`exec` with `--format json` (every JSON-RPC message it exchanged, one per line), the
fake Messages API as a separate process.

acpx is installed once per machine into a cache folder (`npm install`, the npm registry
is reachable here and in CI); without node/npm these tests fail, they do not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_api import FakeApiProcess
from tests.test_acp_client import SYNAPSE

ACPX_VERSION = "0.19.1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "synapse-tests"


@pytest.fixture(scope="session")
def acpx() -> Path:
    folder = CACHE / f"acpx-{ACPX_VERSION}"
    binary = folder / "node_modules" / ".bin" / "acpx"
    if not binary.exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed to install acpx (./dev setup installs node)"
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
             "--ignore-scripts", f"acpx@{ACPX_VERSION}"],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    return binary


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "a.py").write_text("x = 1\n")
    return path


def run_acpx(
    acpx: Path, api: FakeApiProcess, proj: Path, home: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    env = api.env(SYNAPSE_HOME=str(home), HOME=str(home.parent))
    done = subprocess.run(
        [str(acpx), "--agent", f"{SYNAPSE} acp", "--cwd", str(proj), "--format", "json",
         "--timeout", "120", *args],
        cwd=proj, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    messages = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, messages


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def test_acpx_runs_a_turn_with_an_edit_through_its_fs(
    acpx: Path, proj: Path, tmp_path: Path
) -> None:
    script = [
        {"text": "Listing.", "commands": ["ls"]},
        {"commands": ["edit a.py 'x = 1' 'x = 2'"]},
        {"text": "Done."},
    ]
    with FakeApiProcess(script, tmp_path / "fake-api") as fake:
        done, messages = run_acpx(
            acpx, fake, proj, tmp_path / "home", "--approve-all", "exec", "fix x"
        )
    assert done.returncode == 0, done.stderr
    results = [m["result"] for m in messages if "result" in m and "stopReason" in m["result"]]
    assert [r["stopReason"] for r in results] == ["end_turn"]
    writes = [m for m in messages if m.get("method") == "fs/write_text_file"]
    assert [w["params"]["content"] for w in writes] == ["x = 2\n"]
    assert (proj / "a.py").read_text() == "x = 2\n"  # acpx saved it
    diffs = [
        c
        for u in updates(messages)
        if u["sessionUpdate"] == "tool_call_update"
        for c in u.get("content", [])
        if c["type"] == "diff"
    ]
    assert diffs == [
        {"path": str(proj / "a.py"), "oldText": "x = 1\n", "newText": "x = 2\n", "type": "diff"}
    ]


def test_acpx_deny_all_answers_our_permission_request(
    acpx: Path, proj: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"permission": "ask-all-native"}))
    script = [{"commands": ["touch made.txt"]}, {"text": "Denied, as you wish."}]
    with FakeApiProcess(script, tmp_path / "fake-api-3") as fake:
        done, messages = run_acpx(acpx, fake, proj, home, "--deny-all", "exec", "make it")
    assert done.returncode == 5, done.stderr  # acpx: "a permission was denied"
    asked = [m for m in messages if m.get("method") == "session/request_permission"]
    assert len(asked) == 1
    assert asked[0]["params"]["toolCall"]["rawInput"] == {"command": "touch made.txt"}
    assert not (proj / "made.txt").exists()
    ends = [u for u in updates(messages) if u.get("status") == "failed"]
    assert ends and ends[-1]["rawOutput"]["status"] == "denied"


def test_acpx_approve_reads_refuses_a_write_and_the_model_is_told_who_refused(
    acpx: Path, proj: Path, tmp_path: Path
) -> None:
    """Issue 27 item 8: with `--approve-reads` (docs/acp.md's example) acpx answers
    fs/write_text_file with an error; the model is told that the client refused, its
    reason, and to ask the user to allow writes there - not to read `edit --help`."""
    script = [{"commands": ["edit a.py 'x = 1' 'x = 2'"]}, {"text": "Please allow writes."}]
    with FakeApiProcess(script, tmp_path / "fake-api-4") as fake:
        done, messages = run_acpx(
            acpx, fake, proj, tmp_path / "home", "--approve-reads", "exec", "fix x"
        )
        bodies = fake.message_bodies()
    refused = [m["error"] for m in messages if "error" in m]
    assert refused and "Permission denied for fs/write_text_file" in json.dumps(refused), (
        done.stderr
    )
    result = bodies[-1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert (
        f"edit: {proj / 'a.py'}: the editor (the ACP client) refused to write it "
        "(Internal error: Permission denied for fs/write_text_file)"
    ) in result["content"]
    assert result["content"].endswith(
        "Hint: The user's ACP client refused the write (its reason is above), so `--help` "
        "cannot help: ask the user to allow file writes in their client (its permission "
        "prompt or settings; with acpx, `--approve-all` rather than `--approve-reads`), "
        "then retry.\n"
    )
    assert "edit --help" not in result["content"]
    assert (proj / "a.py").read_text() == "x = 1\n"
