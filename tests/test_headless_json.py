"""Issue 33 item 2, headless JSON as automation expects: `synapse chat -p` with
`--output-format json|stream-json`, `--input-format stream-json`, `--continue`,
`--append-system-prompt`, `--allow`/`--deny` for one run, and the exit-code table
(cli/headless.py, docs/user-guide.md "Headless runs: JSON in and out").

Real `synapse chat` processes against the fake Messages API on loopback, in the user's
default configuration (sandbox on, the folder untrusted); stdout must hold JSON only.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from synapse_lsp import __version__
from synapse_lsp.agent.pricing import spend_cost
from synapse_lsp.events import Usage
from tests.fake_api import FakeApiProcess
from tests.test_repl import TIMEOUT, finish, home_env, spawn

USAGE_KEYS = {"input_tokens", "output_tokens", "cache_creation_input_tokens",
              "cache_read_input_tokens"}  # fmt: skip
RESULT_KEYS = {
    "type", "subtype", "is_error", "result", "session_id", "num_turns", "duration_ms",
    "duration_api_ms", "total_cost_usd", "usage", "permission_denials", "exit_code",
    "stop_reason", "error",
}  # fmt: skip
EXEC_KEYS = {"command", "layer", "exitCode", "isError", "category", "stdout", "stderr", "text",
             "durationMs"}  # fmt: skip


def parse(stdout: str) -> list[dict[str, Any]]:
    """Every line of stdout is one JSON object (nothing else may reach stdout)."""
    assert stdout.endswith("\n"), stdout[-200:]
    return [json.loads(line) for line in stdout.splitlines()]


def run(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> tuple[int, list[dict[str, Any]], str]:
    done = finish(spawn(args, env, cwd, stdin=stdin))
    return done.returncode, parse(done.stdout), done.stderr


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_stream_json_shows_every_event_kind(tmp_path: Path, workdir: Path) -> None:
    """init first, result last; a retried request's notice, the text of each response,
    its usage, each command's call and result (the exec record's keys), a denial of a
    write outside the workspace (-p cannot ask), a plan; the appended system prompt
    reaches the session's requests."""
    outside = tmp_path / "outside.txt"
    script = [
        {"error": {"status": 529, "type": "overloaded_error", "message": "busy", "retry_after": 0}},
        {"text": "Let me look.", "commands": [
            "ls; echo warn >&2", f"touch {outside}", "plan --step 'Look around' --status completed",
        ]},
        {"text": "Only a.txt is here."},
    ]  # fmt: skip
    (workdir / "a.txt").write_text("x")
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        args = ["-p", "what is here?", "--output-format", "stream-json",
                "--append-system-prompt", "Answer in one sentence."]  # fmt: skip
        code, events, err = run(args, env, workdir)
        bodies = api.message_bodies()
    assert code == 0, err
    assert not outside.exists()
    kinds = [e["type"] for e in events]
    assert kinds[0] == "init" and kinds[-1] == "result" and kinds.count("result") == 1
    assert set(kinds) == {"init", "notice", "assistant", "usage", "tool_call", "tool_result",
                          "permission_denial", "plan", "result"}  # fmt: skip
    init, result = events[0], events[-1]
    sid = init.pop("session_id")
    assert init == {
        "type": "init", "resumed": False, "cwd": str(workdir.resolve()),
        "model": "claude-sonnet-5-5", "tools": ["Bash"], "commands": init["commands"],
        "permission_mode": "ask-writes-outside-workspace", "questions": "denied",
        "allow": [], "deny": [], "sandbox": init["sandbox"], "network": "off",
        "version": __version__,
    }  # fmt: skip
    assert {"read", "write", "edit", "plan", "task"} <= set(init["commands"])
    assert init["sandbox"] == os.environ.get("SYNAPSE_SANDBOX", "workspace-write")
    notices = of(events, "notice")
    (retry,) = [n for n in notices if "Retrying" in n["message"]]
    assert retry["level"] == "warning" and retry["code"] is None
    assert all(n is retry or "NOT sandboxed" in n["message"] for n in notices), notices
    said = [(e["text"], e["parent_tool_call_id"]) for e in of(events, "assistant")]
    assert said == [("Let me look.", None), ("Only a.txt is here.", None)]
    calls = of(events, "tool_call")
    assert [c["command"] for c in calls] == list(script[1]["commands"])  # type: ignore[index]
    assert calls[1]["title"].startswith("Run `touch ") and calls[1]["kind"] == "edit"
    ls, touch, plan = of(events, "tool_result")
    assert set(ls) >= EXEC_KEYS and ls["id"] == calls[0]["id"]
    assert (ls["stdout"], ls["stderr"], ls["exitCode"]) == ("a.txt\n", "warn\n", 0)
    assert ls["status"] == "completed"
    assert ls["text"] == "a.txt\n[stderr]\nwarn\n" and ls["layer"] == "native"
    assert (touch["status"], touch["exitCode"]) == ("denied", 126)
    assert touch["category"] == "permission_denied"
    (denial,) = of(events, "permission_denial")
    assert denial["id"] == touch["id"] and denial["command"] == f"touch {outside}"
    assert "writes outside the workspace" in denial["reason"]
    assert "synapse chat -p cannot ask" in denial["reason"]
    assert plan["text"].startswith("Plan updated") and plan["layer"] == "agent"
    assert of(events, "plan")[0]["entries"] == [
        {"step": "Look around", "status": "completed", "active_form": None}
    ]
    usages = of(events, "usage")
    assert len(usages) == 2 and all(set(u["usage"]) == USAGE_KEYS for u in usages)
    total = Usage()
    for u in usages:
        total = total + Usage(**u["usage"])
    assert usages[-1]["total"] == result["usage"] == total.__dict__
    assert set(result) == RESULT_KEYS
    assert result["session_id"] == sid and result["num_turns"] == 2
    assert (result["subtype"], result["is_error"], result["exit_code"]) == ("success", False, 0)
    assert result["result"] == "Only a.txt is here."
    assert result["permission_denials"] == [{k: denial[k] for k in ("id", "command", "reason")}]
    price = spend_cost({"claude-sonnet-5-5": total}).amount
    assert price is not None and result["total_cost_usd"] == round(price, 6)
    assert result["duration_ms"] >= result["duration_api_ms"] >= 0
    systems = [b["system"] for b in bodies]
    assert len(bodies) == 3 and all(s[-1]["text"] == "Answer in one sentence." for s in systems)


def test_json_prints_exactly_one_object_and_text_is_unchanged(
    tmp_path: Path, workdir: Path
) -> None:
    """`json`: the result alone, one JSON document; `-p -` reads the prompt from stdin;
    the text format prints the answer as before; an empty answer fails in both."""
    script = {"responses": [], "fallback": {"template": True, "text": "You said: {last_user_text}"}}
    with (
        FakeApiProcess(script, tmp_path / "api") as api,
        FakeApiProcess([{"commands": ["true"]}, ""], tmp_path / "silent") as silent,
    ):
        env = home_env(tmp_path / "home", api.env())
        as_json = spawn(["-p", "-", "--output-format", "json"], env, workdir, stdin="hello\n")
        text = spawn(["-p", "hi there"], env, workdir)
        quiet_env = home_env(tmp_path / "home2", silent.env())
        no_answer = spawn(["-p", "say nothing", "--output-format", "json"], quiet_env, workdir)
        one, two, three = finish(as_json), finish(text), finish(no_answer)
    assert one.returncode == 0, one.stderr
    assert one.stdout.count("\n") == 1
    result = json.loads(one.stdout)
    assert set(result) == RESULT_KEYS
    assert (result["type"], result["subtype"], result["result"]) == ("result", "success",
                                                                     "You said: hello")  # fmt: skip
    assert two.returncode == 0 and two.stdout == "You said: hi there\n"
    assert three.returncode == 1, three.stderr
    silent_result = json.loads(three.stdout)
    assert (silent_result["subtype"], silent_result["exit_code"]) == ("error_no_answer", 1)


def test_a_signal_cancels_the_turn_and_the_result_says_so(tmp_path: Path, workdir: Path) -> None:
    """SIGINT (stream-json) and SIGTERM (json) while a command runs: the turn ends
    `cancelled`, its result says so, and the process exits 130 / 143."""
    script = {"responses": [], "fallback": {"commands": ["sleep 30"]}}
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        procs = {
            signal.SIGINT: spawn(["-p", "wait", "--output-format", "stream-json"], env, workdir),
            signal.SIGTERM: spawn(["-p", "wait", "--output-format", "json"], env, workdir),
        }
        deadline = time.monotonic() + TIMEOUT
        while len(api.message_bodies()) < 2:  # both sent their request; `sleep` runs soon
            assert time.monotonic() < deadline, "no request reached the API"
            time.sleep(0.05)
        time.sleep(1.0)
        started = time.monotonic()
        for sig, proc in procs.items():
            proc.send_signal(sig)
        ended = {sig: finish(proc) for sig, proc in procs.items()}
    assert time.monotonic() - started < 25  # did not wait for `sleep 30`
    for sig, done in ended.items():
        assert done.returncode == 128 + sig, done.stderr
        result = parse(done.stdout)[-1]
        assert (result["type"], result["subtype"], result["is_error"]) == ("result", "cancelled",
                                                                           True)  # fmt: skip
        assert result["exit_code"] == 128 + sig and result["stop_reason"] == "cancelled"
    assert len(parse(ended[signal.SIGTERM].stdout)) == 1


def test_the_turn_limit_has_its_own_exit_code(tmp_path: Path, workdir: Path) -> None:
    script = {"responses": [], "fallback": {"commands": ["true"]}}
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        args = ["--max-turns", "2", "-p", "go", "--output-format", "stream-json"]
        code, events, err = run(args, env, workdir)
    assert code == 3, err
    result = events[-1]
    assert (result["subtype"], result["exit_code"], result["num_turns"]) == ("error_max_turns",
                                                                             3, 2)  # fmt: skip
    (notice,) = [n for n in of(events, "notice") if n["code"] == "max_turns"]
    assert "Stopped after 2 model calls" in notice["message"]


class Lines:
    """A process's stdout lines, read as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stream = proc.stdout
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self.queue.put(line)

    def until_result(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] != "result":
            events.append(json.loads(self.queue.get(timeout=TIMEOUT)))
        return events


def test_stream_json_input_runs_each_line_as_a_turn(tmp_path: Path, workdir: Path) -> None:
    """User messages on stdin, one a line, each a turn of one session, its result out
    before the next line is written; a malformed line is an error event, the next line
    still runs, and the run exits 2."""
    script = {"responses": [], "fallback": {"template": True, "text": "You said: {last_user_text}"}}
    first = {"type": "user", "message": {"role": "user", "content": "first"}}
    blocks = [{"type": "text", "text": "second"}]
    second = {"type": "user", "session_id": "", "parent_tool_use_id": None,
              "message": {"role": "user", "content": blocks}}  # fmt: skip
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json"]
        proc = spawn(args, env, workdir, stdin=None)
        assert proc.stdin is not None
        lines = Lines(proc)
        proc.stdin.write(json.dumps(first) + "\n")
        proc.stdin.flush()
        turn1 = lines.until_result()  # stdin still open: the turn ran on its line alone
        proc.stdin.write('{"type": "user"\n\n' + json.dumps(second) + "\n")
        proc.stdin.close()
        turn2 = lines.until_result()
        code = proc.wait(timeout=TIMEOUT)
        bodies = api.message_bodies()
    assert code == 2
    assert [e["type"] for e in turn1 if e["type"] != "notice"] == [
        "init",
        "assistant",
        "usage",
        "result",
    ]  # a notice: the sandbox could not run
    assert turn1[-1]["result"] == "You said: first"
    error = turn2[0]
    assert error["type"] == "error" and error["subtype"] == "invalid_input" and error["line"] == 2
    assert error["message"].startswith("input line 2: not JSON")
    assert turn2[-1]["result"] == "You said: second"
    assert turn1[-1]["session_id"] == turn2[-1]["session_id"] == turn1[0]["session_id"]
    texts = [m["content"][-1]["text"] for m in bodies[1]["messages"] if m["role"] == "user"]
    assert texts == ["first", "second"]  # one session: the second turn has the first's history
    for args, stdin, problem in [
        (["-p", "x", "--input-format", "stream-json", "--output-format", "stream-json"], "",
         "give -p alone"),
        (["-p", "--input-format", "stream-json"], "", "needs --output-format stream-json"),
        (["--output-format", "json"], "", "go with -p"),
    ]:  # fmt: skip
        bad = finish(spawn(args, env, workdir, stdin=stdin))
        assert bad.returncode == 2 and problem in bad.stderr and bad.stdout == "", bad.stderr


def test_continue_resumes_the_latest_session_of_the_folder(tmp_path: Path, workdir: Path) -> None:
    script = {"responses": [], "fallback": {"template": True, "text": "You said: {last_user_text}"}}
    other, empty = tmp_path / "other", tmp_path / "empty"
    other.mkdir()
    empty.mkdir()
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        json_p = ["--output-format", "json", "-p"]
        _, (first,), _ = run([*json_p, "remember 42"], env, workdir)
        _, (elsewhere,), _ = run([*json_p, "elsewhere"], env, other)
        code, (again,), err = run(["--continue", *json_p, "what number?"], env, workdir)
        none = finish(spawn(["-c", *json_p, "x"], env, empty))
        both = finish(spawn(["-c", "--resume", first["session_id"], *json_p, "x"], env, workdir))
        bodies = api.message_bodies()
    assert code == 0, err
    assert again["session_id"] == first["session_id"] != elsewhere["session_id"]
    texts = [m["content"][-1]["text"] for m in bodies[-1]["messages"] if m["role"] == "user"]
    assert texts == ["remember 42", "what number?"]
    assert none.returncode == 2 and "no stored session" in none.stderr and none.stdout == ""
    assert both.returncode == 2 and "not both" in both.stderr


def test_allow_and_deny_hold_for_one_run_and_are_never_written(
    tmp_path: Path, workdir: Path
) -> None:
    """With every native command asked about (a setting of the user's): `--allow ls`
    runs `ls`, `--deny echo` refuses `echo` saying so, `pwd` is refused (-p cannot
    ask); nothing is remembered, so the next run asks about `ls` again."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text('{"permission": "ask-all-native"}')
    script = {"responses": [], "fallback": {"commands": ["ls", "echo hi", "pwd"]}}
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(home, api.env())
        base = ["--max-turns", "1", "--output-format", "json", "-p", "go"]
        code, (flagged,), err = run([*base, "--allow", "ls", "--deny", "echo"], env, workdir)
        _, (plain,), _ = run(base, env, workdir)
        bad = finish(spawn([*base, "--allow", "ls && rm x"], env, workdir))
        listed = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "permissions", "list"],
            env=env, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip
    assert code == 3, err  # the turn limit: one model call
    denied = {d["command"]: d["reason"] for d in flagged["permission_denials"]}
    assert set(denied) == {"echo hi", "pwd"}
    assert denied["echo hi"] == "denied: by `--deny echo`, given for this run"
    assert "synapse chat -p cannot ask" in denied["pwd"]
    assert {d["command"] for d in plain["permission_denials"]} == {"ls", "echo hi", "pwd"}
    assert not (home / "permissions.json").exists()
    assert "no rules" in listed.stdout, listed.stdout
    assert bad.returncode == 2 and "--allow 'ls && rm x'" in bad.stderr
