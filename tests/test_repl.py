"""`synapse chat` as a user runs it: a real process, stdin/stdout, the fake API over HTTP.

Each `synapse chat` process that talks to a model imports the SDK (seconds), so one
process serves every check it can, and independent processes run side by side.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.fake_api import FakeApiProcess

TIMEOUT = 60.0


def spawn(
    args: list[str], env: dict[str, str], cwd: Path, *, stdin: str | None = ""
) -> subprocess.Popen[str]:
    """Start `synapse chat ARGS`; `stdin` is written and closed at once unless None."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
        proc.stdin = None  # communicate() must not touch it again
    return proc


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"synapse chat did not finish:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def chat(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return finish(spawn(args, env, cwd))


def home_env(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base if base is not None else os.environ)
    env["SYNAPSE_HOME"] = str(home)
    return env


def keyless_env(home: Path) -> dict[str, str]:
    env = home_env(home)
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("ANTHROPIC_BASE_URL", None)
    return env


class Terminal:
    """An interactive `synapse chat` whose output is read as it comes."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = spawn([], env, cwd, stdin=None)
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _pump(stream: Any, into: list[str]) -> None:
        for chunk in iter(lambda: stream.read(1), ""):
            into.append(chunk)

    @property
    def out(self) -> str:
        return "".join(self._out)

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while text not in self.out:
            assert self.proc.poll() is None, f"chat exited early:\n{self.out}"
            assert time.monotonic() < deadline, f"never printed {text!r}:\n{self.out}"
            time.sleep(0.02)

    def close(self, last_input: str) -> tuple[int, str, str]:
        self.type(last_input)
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        for reader in self._readers:
            reader.join(timeout=10)
        return code, self.out, "".join(self._err)


def test_interactive_bang_commands_and_ctrl_c(tmp_path: Path, workdir: Path) -> None:
    """`!cmd` runs in the session's shell, its output shown, and the next prompt tells the
    model what ran; Ctrl-C cancels the running turn (its command is interrupted), not
    the program."""
    script: list[Any] = [{"commands": ["sleep 30"]}, {"text": "still here"}]
    (workdir / "marker.txt").write_text("x")
    with FakeApiProcess(script, tmp_path / "api") as api:
        term = Terminal(home_env(tmp_path / "home", api.env()), workdir)
        term.type("!false\n!ls\n!exit 3\n")
        term.wait_for("Command exited with code 3")
        assert api.requests() == []  # nothing went to the model
        term.type("wait a while\n")
        deadline = time.monotonic() + TIMEOUT
        while not api.requests():
            assert time.monotonic() < deadline, "the turn never reached the model"
            time.sleep(0.05)
        term.wait_for("sleep 30")  # the tool call is shown: the command is running now
        time.sleep(0.5)
        started = time.monotonic()
        term.proc.send_signal(signal.SIGINT)
        term.wait_for("(turn cancelled)")
        assert time.monotonic() - started < 25  # did not wait for `sleep 30`
        code, out, err = term.close("are you there?\n/exit\n")
        bodies = api.message_bodies()
    assert code == 0, err
    assert "Command exited with code 1" in out
    assert "marker.txt" in out  # ran in the current directory, output attached
    assert "Command exited with code 3" in out
    assert "You (1)> " in out and "You (3)> " in out
    assert "still here" in out
    results = bodies[-1]["messages"][2]["content"]
    assert results[0]["type"] == "tool_result" and "[Cancelled]" in results[0]["content"]
    texts = [b.get("text") for m in bodies[0]["messages"] for b in m["content"]]
    assert len(texts) == 1 and texts[0].startswith("wait a while\n\n[Before this message")
    # the model is told briefly what the user ran, with the exit statuses
    assert "$ false\n(exit 1)\n$ ls\n(exit 0)\n$ exit 3\n(exit 3" in texts[0]


def test_one_shot_answers_fails_clearly_and_sessions_resume(tmp_path: Path, workdir: Path) -> None:
    """`-p` prints the final answer on stdout (tool activity on stderr) and exits 0; an API
    failure exits 1 with the cause; the session is listed and resumed with its history."""
    script: list[Any] = [
        {"text": "Let me check.", "commands": ["echo from-the-tool"]},
        {"text": "Final answer: 42"},
        {"text": "second answer"},
    ]
    bad = {"error": {"status": 400, "type": "invalid_request_error", "message": "bad model"}}
    with (
        FakeApiProcess(script, tmp_path / "api") as api,
        FakeApiProcess([bad], tmp_path / "bad-api") as bad_api,
    ):
        env = home_env(tmp_path / "home", api.env())
        answer = spawn(["-p", "what is the answer?"], env, workdir)
        failing = spawn(["-p", "hi"], home_env(tmp_path / "home2", bad_api.env()), workdir)
        proc, failed = finish(answer), finish(failing)

        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "Final answer: 42\n"
        assert "Let me check." in proc.stderr
        assert failed.returncode == 1
        assert "Error: The model API refused the request" in failed.stderr
        assert "bad model" in failed.stderr and "Traceback" not in failed.stderr

        listed = chat(["--list"], env, workdir)
        session_id, _, rest = listed.stdout.strip().partition("  ")
        assert rest.endswith("what is the answer?")
        again = chat(["--resume", session_id, "-p", "and now?"], env, workdir)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "second answer\n"
        missing = chat(["--resume", "no-such-session", "-p", "x"], env, workdir)
        bodies = api.message_bodies()
    assert "from-the-tool" in bodies[1]["messages"][-1]["content"][0]["content"]
    assert bodies[0]["messages"][0]["content"][-1]["text"] == "what is the answer?"
    sent = bodies[-1]["messages"]  # the resumed session sends its whole history
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "what is the answer?"
    assert sent[2]["content"][0]["type"] == "tool_result"
    assert sent[3]["content"][0]["text"] == "Final answer: 42"
    assert sent[4]["content"][-1]["text"] == "and now?"
    assert missing.returncode == 2 and "no session 'no-such-session'" in missing.stderr
    assert len(bodies) == 3  # the unknown session never reached the model


def test_without_a_key(tmp_path: Path, workdir: Path) -> None:
    """`-p` explains how to set a key; the interactive REPL (and `--demo -p`) runs the
    offline demo model through the real router and shell."""
    (workdir / "visible.txt").write_text("x")
    no_key = spawn(["-p", "hi"], keyless_env(tmp_path / "h1"), workdir)
    repl = spawn([], keyless_env(tmp_path / "h2"), workdir, stdin="show me\n")
    demo = spawn(["--demo", "-p", "hi"], keyless_env(tmp_path / "h3"), workdir)
    refused, proc, one_shot = finish(no_key), finish(repl), finish(demo)
    assert refused.returncode == 2
    assert "export ANTHROPIC_API_KEY=" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert proc.returncode == 0, proc.stderr
    assert "Offline demo model" in proc.stderr
    assert "You said: \u201cshow me\u201d" in proc.stdout
    assert "visible.txt" in proc.stdout  # the demo really ran `ls` through the router
    assert one_shot.returncode == 0, one_shot.stderr
    assert "whole loop" in one_shot.stdout


def test_model_settings_from_environment_and_flags_and_thinking_shown(
    tmp_path: Path, workdir: Path
) -> None:
    """SYNAPSE_MODEL / SYNAPSE_MAX_TOKENS / SYNAPSE_THINKING_BUDGET reach the request; flags
    win over them; thinking is shown (dimmed) in the REPL, never printed by `-p`; a bad
    value is a clear error before anything starts."""
    answer: dict[str, Any] = {"thinking": "pondering the question", "text": "The answer."}
    env_vars = {
        "SYNAPSE_MODEL": "env-model",
        "ANTHROPIC_MODEL": "not-this-one",
        "SYNAPSE_MAX_TOKENS": "6000",
        "SYNAPSE_THINKING_BUDGET": "2048",
    }
    with (
        FakeApiProcess([answer], tmp_path / "api1") as api1,
        FakeApiProcess([answer], tmp_path / "api2") as api2,
        FakeApiProcess([answer], tmp_path / "api3") as api3,
    ):
        one_shot = spawn(["-p", "q"], home_env(tmp_path / "h1", api1.env(**env_vars)), workdir)
        flags = spawn(
            ["--model", "flag-model", "--thinking", "0", "--max-tokens", "1000", "-p", "q"],
            home_env(tmp_path / "h2", api2.env(**env_vars)),
            workdir,
        )
        repl = spawn([], home_env(tmp_path / "h3", api3.env(**env_vars)), workdir, stdin="q\n")
        bad_env = spawn(
            ["-p", "q"], home_env(tmp_path / "h4", api1.env(SYNAPSE_MAX_TOKENS="lots")), workdir
        )
        bad_flag = spawn(["--thinking", "100", "-p", "q"], home_env(tmp_path / "h5"), workdir)
        done = [finish(p) for p in (one_shot, flags, repl, bad_env, bad_flag)]
        bodies = [api.message_bodies() for api in (api1, api2, api3)]
    (p1, p2, p3, p4, p5) = done
    assert p1.returncode == 0, p1.stderr
    assert p1.stdout == "The answer.\n" and "pondering" not in p1.stdout + p1.stderr
    first = bodies[0][0]
    assert first["model"] == "env-model" and first["max_tokens"] == 6000
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert p2.returncode == 0, p2.stderr
    second = bodies[1][0]
    assert second["model"] == "flag-model" and second["max_tokens"] == 1000
    assert "thinking" not in second
    assert p3.returncode == 0, p3.stderr
    assert "(thinking)" in p3.stdout and "pondering the question" in p3.stdout
    assert p3.stdout.index("pondering") < p3.stdout.index("The answer.")
    assert "\033[" not in p3.stdout  # no colour codes when stdout is not a terminal
    assert p4.returncode == 2 and "$SYNAPSE_MAX_TOKENS: expected a whole number" in p4.stderr
    assert p5.returncode == 2 and "at least 1024" in p5.stderr
    assert len(bodies[0]) == 1  # the bad runs never reached a model


def test_slash_commands_and_an_unknown_resume_keeps_the_current_session(
    tmp_path: Path, workdir: Path
) -> None:
    """Slash commands come from the one table (case-insensitive, aliases); `/resume` of
    an unknown id says so and the next prompt still goes to the current session."""
    script: list[Any] = [{"text": "first answer"}, {"text": "second answer"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        lines = "hello\n/RESUME no-such-session\n/H\nstill here?\n/Q\n"
        proc = finish(spawn([], env, workdir, stdin=lines))
        bodies = api.message_bodies()
    assert proc.returncode == 0, proc.stderr
    assert (
        "no session 'no-such-session'" in proc.stdout and "current session goes on" in proc.stdout
    )
    assert "/resume ID" in proc.stdout and "(also /h, /?)" in proc.stdout
    assert len(bodies) == 2
    sent = bodies[1]["messages"]  # the second prompt continues the first session
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"][-1]["text"] == "still here?"
