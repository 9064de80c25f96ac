"""`synapse chat` as a user runs it: a real process, stdin/stdout, the fake API over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fake_api import FakeApiProcess


def chat(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def home_env(tmp_path: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base if base is not None else os.environ)
    env["SYNAPSE_HOME"] = str(tmp_path / "home")
    return env


def test_bang_runs_in_the_terminal_and_reports_failures(tmp_path: Path, workdir: Path) -> None:
    with FakeApiProcess([], tmp_path / "api") as api:
        env = home_env(tmp_path, api.env())
        (workdir / "marker.txt").write_text("x")
        proc = chat([], env, workdir, stdin="!false\n!ls\n!exit 3\n/exit\n")
        assert api.requests() == []  # nothing went to the model
    assert proc.returncode == 0, proc.stderr
    assert "Command exited with code 1" in proc.stdout
    assert "marker.txt" in proc.stdout  # ran in the current directory, output attached
    assert "Command exited with code 3" in proc.stdout
    assert "You (1)> " in proc.stdout and "You (3)> " in proc.stdout


def test_one_shot_prints_the_final_answer_on_stdout(tmp_path: Path, workdir: Path) -> None:
    script: list[Any] = [
        {"text": "Let me check.", "commands": ["echo from-the-tool"]},
        {"text": "Final answer: 42"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path, api.env())
        proc = chat(["-p", "what is the answer?"], env, workdir)
        bodies = api.message_bodies()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Final answer: 42\n"
    assert "Let me check." in proc.stderr
    assert "from-the-tool" in bodies[1]["messages"][-1]["content"][0]["content"]
    assert bodies[0]["messages"][0]["content"][-1]["text"] == "what is the answer?"


def test_one_shot_failures_exit_non_zero_with_a_clear_message(
    tmp_path: Path, workdir: Path
) -> None:
    bad = {"error": {"status": 400, "type": "invalid_request_error", "message": "bad model"}}
    with FakeApiProcess([bad], tmp_path / "api") as api:
        proc = chat(["-p", "hi"], home_env(tmp_path, api.env()), workdir)
    assert proc.returncode == 1
    assert "Error: The model API refused the request" in proc.stderr and "bad model" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_api_key_explains_how_to_set_one(tmp_path: Path, workdir: Path) -> None:
    env = home_env(tmp_path)
    env.pop("ANTHROPIC_API_KEY", None)
    proc = chat(["-p", "hi"], env, workdir)
    assert proc.returncode == 2
    assert "export ANTHROPIC_API_KEY=" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_a_key_the_repl_runs_the_offline_demo(tmp_path: Path, workdir: Path) -> None:
    env = home_env(tmp_path)
    env.pop("ANTHROPIC_API_KEY", None)
    (workdir / "visible.txt").write_text("x")
    proc = chat([], env, workdir, stdin="show me\n")
    assert proc.returncode == 0, proc.stderr
    assert "Offline demo model" in proc.stderr
    assert "You said: \u201cshow me\u201d" in proc.stdout
    assert "visible.txt" in proc.stdout  # the demo really ran `ls` through the router
    one_shot = chat(["--demo", "-p", "hi"], env, workdir)
    assert one_shot.returncode == 0
    assert "whole loop" in one_shot.stdout


def test_sessions_are_listed_and_resumed(tmp_path: Path, workdir: Path) -> None:
    with FakeApiProcess(["first answer", "second answer"], tmp_path / "api") as api:
        env = home_env(tmp_path, api.env())
        assert chat(["-p", "remember the word banana"], env, workdir).returncode == 0
        listed = chat(["--list"], env, workdir)
        session_id, _, rest = listed.stdout.strip().partition("  ")
        assert rest.endswith("remember the word banana")
        again = chat(["--resume", session_id, "-p", "which word?"], env, workdir)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "second answer\n"
        sent = api.message_bodies()[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "remember the word banana"
    missing = chat(["--resume", "no-such-session", "-p", "x"], env, workdir)
    assert missing.returncode == 2 and "no session 'no-such-session'" in missing.stderr


def test_ctrl_c_cancels_the_turn_not_the_program(tmp_path: Path, workdir: Path) -> None:
    script: list[Any] = [{"commands": ["sleep 30"]}, {"text": "still here"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        proc = subprocess.Popen(
            [sys.executable, "-m", "synapse_lsp.cli", "chat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=home_env(tmp_path, api.env()),
            cwd=workdir,
        )
        assert proc.stdin is not None
        proc.stdin.write("wait a while\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not api.requests():
            assert time.monotonic() < deadline, "the turn never reached the model"
            time.sleep(0.05)
        time.sleep(1.0)  # the sleep command is running now
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate("are you there?\n/exit\n", timeout=30)
        assert time.monotonic() - started < 25  # did not wait for `sleep 30`
        bodies = api.message_bodies()
    assert proc.returncode == 0, err
    assert "(turn cancelled)" in out
    assert "still here" in out
    results = bodies[-1]["messages"][2]["content"]
    assert results[0]["type"] == "tool_result" and "[Cancelled]" in results[0]["content"]
