"""Issue 19 item 5: hooks in Claude Code's shape — real hook scripts (small bash and
python files in temp folders), run by the real assembly (`core.Workspace`, the
permission gate, the agent loop, the chat session) against the fake Messages API,
whose recorded requests show what the model was given."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.config import LiveSettings
from synapse_lsp.core import Workspace
from synapse_lsp.events import Event, Notice, ToolCallFinished, TurnFinished
from synapse_lsp.policy import trust
from synapse_lsp.policy.hooks import tool_call
from synapse_lsp.question import Question
from tests.slash_host import SessionHost

KEY = "sk-ant-hooks-test-key"


def script(path: Path, body: str) -> Path:
    """An executable hook script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def hooks_of(event: str, command: str, matcher: str = "", **extra: Any) -> dict[str, Any]:
    return {
        event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **extra}]}]
    }


def log_stdin(tmp: Path, name: str) -> str:
    """A hook command that appends its stdin (one JSON object) as a line to `name`."""
    return f"(cat; echo) >> {tmp / name}"


def logged(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Env:
    tmp: Path
    home: Path
    work: Path
    api: FakeAnthropic
    asked: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    answer: str = "Deny"
    _open: list[Any] = field(default_factory=list)

    def settings(self, home_settings: dict[str, Any]) -> LiveSettings:
        (self.home / "settings.json").write_text(json.dumps(home_settings))
        env = {"SYNAPSE_HOME": str(self.home)}
        return LiveSettings(env, folder=self.work)

    async def session(
        self, home_settings: dict[str, Any], *, trusted: bool = False, ask: bool = False
    ) -> ChatSession:
        live = self.settings(home_settings)
        assert live.problems == [], live.problems

        async def asker(question: Question) -> str:
            message, actions = question.message, question.actions
            self.asked.append((message, actions))
            return self.answer

        ws = Workspace(
            self.work, live, extensions=False, trusted=trusted, ask=asker if ask else None
        )
        self._open.append(ws)
        tools = await ws.session_tools()
        model = ModelClient(api_key=KEY, base_url=self.api.base_url, model="claude-test")
        chat = ChatSession(tools.router, live, model=model, workspace_root=self.work)
        self._open.append(chat)
        return chat

    async def close(self) -> None:
        for thing in reversed(self._open):
            await thing.close()


@pytest.fixture
async def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Env]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
    monkeypatch.setenv("MY_TOKEN", "also-secret")
    monkeypatch.delenv("SYNAPSE_TRUST_WORKSPACE", raising=False)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    async with FakeAnthropic([]) as api:
        state = Env(tmp_path, home, work, api)
        try:
            yield state
        finally:
            await state.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


def finished_calls(events: list[Event]) -> list[ToolCallFinished]:
    return [e for e in events if isinstance(e, ToolCallFinished)]


def last(events: list[Event]) -> TurnFinished:
    end = events[-1]
    assert isinstance(end, TurnFinished)
    return end


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool_result texts of a request's last user message."""
    content = body["messages"][-1]["content"]
    return [b["content"] for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def texts(body: dict[str, Any]) -> str:
    """Every text block the request's user messages carry."""
    out = []
    for message in body["messages"]:
        if message["role"] != "user" or isinstance(message["content"], str):
            continue
        out += [b.get("text", "") for b in message["content"] if b.get("type") == "text"]
    return "\n".join(out)


# ------------------------------------------------------------------ PreToolUse


async def test_pre_tool_use_exit_2_denies_with_the_reason_the_model_sees(env: Env) -> None:
    guard = script(
        env.tmp / "hooks" / "no-rm.sh",
        f"""#!/usr/bin/env bash
input=$(cat)
printf '%s\\n' "$input" >> {env.tmp / "pre.log"}
case "$input" in *'rm -rf'*) echo "no rm -rf in this project" >&2; exit 2;; esac
exit 0
""",
    )
    (env.work / "build").mkdir()
    session = await env.session({"hooks": hooks_of("PreToolUse", str(guard), "Bash")})
    env.api.add({"commands": ["rm -rf build", "echo fine"]}, {"text": "ok"})
    events = await turn(session, "clean up")
    denied, ran = finished_calls(events)
    assert denied.status == "denied"
    assert "Not run: denied by a PreToolUse hook: no rm -rf in this project" in denied.text
    assert ran.status == "completed" and ran.text == "fine\n"
    assert (env.work / "build").is_dir()
    results = tool_results(env.api.message_requests[1])
    assert "denied by a PreToolUse hook: no rm -rf in this project" in results[0]
    first, second = logged(env.tmp / "pre.log")
    assert first == {
        "session_id": session.id,
        "transcript_path": "",
        "cwd": str(env.work),
        "permission_mode": "ask-writes-outside-workspace",  # the `permission` policy
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf build"},
        "tool_use_id": denied.tool_call_id,
    }
    assert second["tool_input"] == {"command": "echo fine"}


async def test_pre_tool_use_json_deny_and_a_compound_line_seen_whole(env: Env) -> None:
    guard = script(
        env.tmp / "hooks" / "json-deny.py",
        """#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
if "curl" in data["tool_input"]["command"]:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no network from here"}}))
""",
    )
    session = await env.session({"hooks": hooks_of("PreToolUse", str(guard), "*")})
    env.api.add({"commands": ["echo a && curl -s example.invalid"]}, {"text": "ok"})
    events = await turn(session, "fetch")
    (denied,) = finished_calls(events)
    assert denied.status == "denied"
    assert "denied by a PreToolUse hook: no network from here" in denied.text
    assert "no network from here" in tool_results(env.api.message_requests[1])[0]


@pytest.mark.parametrize(
    ("body", "timeout", "expected"),
    [
        ("echo 'hook broke' >&2; exit 1", 60, "exited with 1: hook broke"),
        ("echo $$ > {tmp}/hook.pid; sleep 30", 0.5, "timed out after 0.5 s"),
        ("kill -9 $$", 60, "was killed by signal 9"),
    ],
    ids=["crash", "timeout", "signal"],
)
async def test_a_failing_pre_tool_use_hook_denies_the_call(
    env: Env, body: str, timeout: float, expected: str
) -> None:
    hook = script(env.tmp / "hooks" / "bad.sh", "#!/usr/bin/env bash\n" + body.format(tmp=env.tmp))
    session = await env.session({"hooks": hooks_of("PreToolUse", str(hook), timeout=timeout)})
    env.api.add({"commands": ["touch ran.txt"]}, {"text": "ok"})
    events = await turn(session, "go")
    (call,) = finished_calls(events)
    assert call.status == "denied"
    assert expected in call.text, call.text
    assert "a PreToolUse hook that fails denies the call" in call.text
    assert not (env.work / "ran.txt").exists()
    assert expected in tool_results(env.api.message_requests[1])[0]
    pid_file = env.tmp / "hook.pid"
    if pid_file.exists():  # the timed-out hook's process group was killed
        pid = int(pid_file.read_text())
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


async def test_a_hook_that_cannot_start_denies(env: Env) -> None:
    missing = env.tmp / "no-such-hook.sh"
    session = await env.session({"hooks": hooks_of("PreToolUse", str(missing))})
    env.api.add({"commands": ["echo hi"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "go"))
    assert call.status == "denied" and "exited with 127" in call.text


async def test_matcher_edit_fires_for_edit_and_write_not_for_ls(env: Env) -> None:
    (env.work / "f.txt").write_text("a\n")
    session = await env.session(
        {"hooks": hooks_of("PreToolUse", log_stdin(env.tmp, "edits.log"), "Edit|Write")}
    )
    env.api.add(
        {"commands": ["ls", "edit f.txt a b", "write sub/g.txt 'hello'", "edit f.txt b c && ls"]},
        {"text": "ok"},
    )
    events = await turn(session, "edit")
    assert [c.status for c in finished_calls(events)] == ["completed"] * 4
    seen = [(e["tool_name"], e["tool_input"]) for e in logged(env.tmp / "edits.log")]
    assert seen == [
        (
            "Edit",
            {
                "file_path": str(env.work / "f.txt"),
                "old_string": "a",
                "new_string": "b",
                "replace_all": False,
            },
        ),
        ("Write", {"file_path": str(env.work / "sub" / "g.txt"), "content": "hello"}),
    ]  # `ls` and the compound line are Bash


@pytest.mark.parametrize(
    ("line", "name", "tool_input"),
    [
        ("ls -la", "Bash", {"command": "ls -la"}),
        (
            "edit src/a.py 'x = 1' 'x = 2' --all",
            "Edit",
            {
                "file_path": "/w/src/a.py",
                "old_string": "x = 1",
                "new_string": "x = 2",
                "replace_all": True,
            },
        ),
        (
            "write notes.md <<'EOF'\nhi\nEOF",
            "Write",
            {"file_path": "/w/notes.md", "content": "hi\n"},
        ),
        ("write a.md '---\nname: a'", "Write", {"file_path": "/w/a.md", "content": "---\nname: a"}),
        (
            "read /etc/hosts --offset 2 --limit 5",
            "Read",
            {"file_path": "/etc/hosts", "offset": 2, "limit": 5},
        ),
        ("read ../x", "Read", {"file_path": "/x"}),
        (
            "mcp:github:create_issue --title t",
            "mcp__github__create_issue",
            {"command": "mcp:github:create_issue --title t"},
        ),
        ("read a | grep x", "Bash", {"command": "read a | grep x"}),
        ("edit f only-two", "Bash", {"command": "edit f only-two"}),
        ("skill:pdf:merge a b", "Bash", {"command": "skill:pdf:merge a b"}),
        (
            "task:explore -p 'where?' -d find",
            "Bash",
            {"command": "task:explore -p 'where?' -d find"},
        ),
    ],
)
def test_how_a_line_is_named_to_hooks(line: str, name: str, tool_input: dict[str, Any]) -> None:
    assert tool_call(line, Path("/w")) == (name, tool_input)


async def test_allow_skips_the_policy_and_ask_forces_the_question(env: Env) -> None:
    decide = script(
        env.tmp / "hooks" / "decide.py",
        """#!/usr/bin/env python3
import json, sys
command = json.load(sys.stdin)["tool_input"]["command"]
decision = "ask" if command.startswith("echo ask") else "allow"
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": decision, "permissionDecisionReason": "check " + command}}))
""",
    )
    settings = {"permission": "ask-all-native", "hooks": hooks_of("PreToolUse", str(decide))}
    session = await env.session(settings, ask=True)
    env.answer = "Allow once"
    env.api.add({"commands": ["echo allowed", "echo ask me"]}, {"text": "ok"})
    events = await turn(session, "go")
    assert [c.status for c in finished_calls(events)] == ["completed", "completed"]
    (question,) = env.asked  # the allowed line skipped ask-all-native's question
    message, actions = question
    assert "echo ask me" in message and "a PreToolUse hook asks: check echo ask me" in message
    assert actions == ("Allow once", "Deny")  # it asks again next time: nothing to remember


async def test_deny_rules_still_win_over_a_hook_allow(env: Env) -> None:
    allow = 'echo \'{"hookSpecificOutput": {"permissionDecision": "allow"}}\''
    session = await env.session({"deny": ["rm *"], "hooks": hooks_of("PreToolUse", allow)})
    env.api.add({"commands": ["rm -f x"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "go"))
    assert call.status == "denied" and "denied by the `deny` setting" in call.text


# ------------------------------------------------------------------ PostToolUse


async def test_post_tool_use_exit_2_reaches_the_model_and_a_crash_only_warns(env: Env) -> None:
    lint = script(
        env.tmp / "hooks" / "lint.sh",
        f"""#!/usr/bin/env bash
input=$(cat)
printf '%s\\n' "$input" >> {env.tmp / "post.log"}
case "$input" in *make-it-fail*) echo "lint: 3 problems in f.txt" >&2; exit 2;; esac
""",
    )
    broken = "echo 'formatter missing' >&2; exit 3"
    settings = {
        "hooks": {
            "PostToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": str(lint)}]},
                {"matcher": "Write", "hooks": [{"type": "command", "command": broken}]},
            ]
        }
    }
    session = await env.session(settings)
    env.api.add({"commands": ["echo make-it-fail", "write f.txt x"]}, {"text": "ok"})
    events = await turn(session, "go")
    flagged, written = finished_calls(events)
    assert flagged.text == "make-it-fail\n\n[PostToolUse hook] lint: 3 problems in f.txt"
    assert written.status == "completed" and "[PostToolUse hook]" not in written.text
    results = tool_results(env.api.message_requests[1])
    assert results[0].startswith("make-it-fail\n\n[PostToolUse hook] lint: 3 problems in f.txt")
    warnings = [e.message for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any("formatter missing" in w and "(ignored)" in w for w in warnings), warnings
    (entry,) = logged(env.tmp / "post.log")
    assert entry["hook_event_name"] == "PostToolUse"
    assert entry["tool_response"]["stdout"] == "make-it-fail\n"
    assert entry["tool_response"]["exit_code"] == 0


async def test_post_tool_use_continue_false_ends_the_turn(env: Env) -> None:
    stop = 'echo \'{"continue": false, "stopReason": "build is red"}\''
    session = await env.session({"hooks": hooks_of("PostToolUse", stop)})
    env.api.add({"commands": ["echo one"]}, {"text": "never asked"})
    events = await turn(session, "go")
    assert last(events).stop_reason == "end_turn"
    assert any(isinstance(e, Notice) and "build is red" in e.message for e in events)
    assert env.api.calls == 1


# ------------------------------------------------------------------ the session's events


async def test_user_prompt_submit_adds_context_and_can_block(env: Env) -> None:
    gate = script(
        env.tmp / "hooks" / "prompt.py",
        """#!/usr/bin/env python3
import json, sys
prompt = json.load(sys.stdin)["prompt"]
if "password" in prompt:
    print("prompts must not carry passwords", file=sys.stderr)
    sys.exit(2)
print("Current branch: feature/x")
""",
    )
    session = await env.session({"hooks": hooks_of("UserPromptSubmit", str(gate))})
    env.api.add({"text": "hello"})
    await turn(session, "hi there")
    assert "UserPromptSubmit hook additional context:\nCurrent branch: feature/x" in texts(
        env.api.message_requests[0]
    )
    events = await turn(session, "my password is hunter2")
    end = last(events)
    assert end.stop_reason == "error"
    assert end.error == "blocked by a UserPromptSubmit hook: prompts must not carry passwords"
    assert env.api.calls == 1  # the blocked prompt never reached the model
    assert "hunter2" not in json.dumps(session.messages)


async def test_stop_can_continue_the_turn_up_to_the_cap(env: Env) -> None:
    from synapse_lsp.agent.session_hooks import MAX_STOP_CONTINUATIONS

    stop = script(
        env.tmp / "hooks" / "stop.sh",
        f"""#!/usr/bin/env bash
cat >> {env.tmp / "stop.log"}; echo >> {env.tmp / "stop.log"}
echo '{{"decision": "block", "reason": "run the tests before you stop"}}'
""",
    )
    session = await env.session({"hooks": hooks_of("Stop", str(stop))})
    env.api.add(*[{"text": f"done {i}"} for i in range(MAX_STOP_CONTINUATIONS + 1)])
    events = await turn(session, "fix it")
    assert last(events).stop_reason == "end_turn"
    assert env.api.calls == MAX_STOP_CONTINUATIONS + 1  # the cap, though it always blocks
    assert texts(env.api.message_requests[1]).endswith(
        "Stop hook feedback:\nrun the tests before you stop"
    )
    actives = [e["stop_hook_active"] for e in logged(env.tmp / "stop.log")]
    assert actives == [False] + [True] * MAX_STOP_CONTINUATIONS
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any(f"({MAX_STOP_CONTINUATIONS} continuations a turn at most)" in n for n in notices)


async def test_session_start_context_comes_once(env: Env) -> None:
    start = (
        'echo \'{"hookSpecificOutput": {"hookEventName": "SessionStart", '
        '"additionalContext": "This project tests with pytest -q"}}\''
    )
    resume_only = f"touch {env.tmp / 'resumed'}"
    settings = {
        "hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [{"type": "command", "command": start}]},
                {"matcher": "resume", "hooks": [{"type": "command", "command": resume_only}]},
            ]
        }
    }
    session = await env.session(settings)
    env.api.add({"text": "one"}, {"text": "two"})
    await turn(session, "first")
    await turn(session, "second")
    first, second = env.api.message_requests
    assert "SessionStart hook additional context:\nThis project tests with pytest -q" in texts(
        first
    )
    assert texts(second).count("This project tests with pytest -q") == 1  # from history only
    assert not (env.tmp / "resumed").exists()


# ------------------------------------------------------------------ trust, secrets, /hooks


async def test_a_folder_hook_runs_only_when_the_folder_is_trusted(env: Env) -> None:
    (env.work / ".claude").mkdir()
    folder_hook = {"hooks": hooks_of("PreToolUse", "echo 'folder says no' >&2; exit 2")}
    (env.work / ".claude" / "settings.json").write_text(json.dumps(folder_hook))
    untrusted = await env.session({})
    env.api.add({"commands": ["echo ran"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(untrusted, "go"))
    assert call.status == "completed"
    listing = await SESSION_COMMANDS.run(SessionHost(untrusted), "/hooks")
    assert (
        f"Not loaded (the folder is not trusted): {env.work / '.claude' / 'settings.json'}"
        in listing
    )
    ws = Workspace(env.work, env.settings({}), extensions=False, trusted=False)
    assert ws.trust_notice is not None and ".claude/settings.json (hooks)" in ws.trust_notice
    (env.work / ".claude" / "settings.local.json").write_text('{"permissions": {}}')
    assert trust.needs_trust(env.work) == [env.work / ".claude" / "settings.json"]  # asked about

    trusted = await env.session({}, trusted=True)
    env.api.add({"commands": ["echo ran"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(trusted, "go"))
    assert call.status == "denied" and "folder says no" in call.text


async def test_a_folder_settings_file_may_carry_hooks_without_a_complaint(env: Env) -> None:
    (env.work / ".synapse").mkdir()
    (env.work / ".synapse" / "settings.json").write_text(
        json.dumps({"maxTurns": 7, "hooks": hooks_of("Stop", "true")})
    )
    live = env.settings({})
    assert live.problems == [] and live().max_turns == 7 and dict(live().hooks) == {}
    refused = live.set_face({"hooks": hooks_of("Stop", "true")})
    assert any("hooks can be set only in $SYNAPSE_HOME/settings.json" in p for p in refused)
    assert dict(live().hooks) == {}


async def test_hooks_get_no_model_credentials(env: Env) -> None:
    dump = f"env > {env.tmp / 'hook.env'}"
    session = await env.session(
        {"secretEnv": ["MY_TOKEN"], "hooks": hooks_of("UserPromptSubmit", dump)}
    )
    env.api.add({"text": "ok"})
    await turn(session, "hi")
    seen = dict(
        line.split("=", 1)
        for line in (env.tmp / "hook.env").read_text().splitlines()
        if "=" in line
    )
    assert "ANTHROPIC_API_KEY" not in seen and "MY_TOKEN" not in seen
    assert not any(k.startswith("ANTHROPIC_") for k in seen)
    assert seen["CLAUDE_PROJECT_DIR"] == str(env.work)
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-must-not-leak"  # Synapse keeps it


async def test_slash_hooks_lists_them_with_their_problems(env: Env) -> None:
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Edit|Write", "hooks": [{"command": "./fmt.sh", "timeout": 5}]},
                {"matcher": "(", "hooks": [{"command": "never"}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "./check.sh"}]}],
            "PostToolUseFailure": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
            "PostToolUse": [{"hooks": [{"type": "prompt", "prompt": "judge it"}]}],
        }
    }
    session = await env.session(settings)
    listing = await SESSION_COMMANDS.run(SessionHost(session), "/hooks")
    source = env.home / "settings.json"
    lines = listing.splitlines()
    assert lines[:4] == [
        "PreToolUse",
        f"  Edit|Write  ./fmt.sh  (timeout 5 s; {source})",
        "Stop",
        f"  -  ./check.sh  (timeout 60 s; {source})",
    ]
    problems = "\n".join(lines[4:])
    assert "hooks.PreToolUse[1].matcher '(': bad pattern" in problems
    assert "hooks.PostToolUseFailure: not an event Synapse runs" in problems
    assert "type 'prompt' is not supported" in problems


async def test_slash_hooks_without_hooks_says_where_they_go(env: Env) -> None:
    session = await env.session({})
    listing = await SESSION_COMMANDS.run(SessionHost(session), "/hooks")
    assert listing.startswith('No hooks. Add them under "hooks" in $SYNAPSE_HOME/settings.json')


async def test_the_users_own_commands_run_no_hooks(env: Env) -> None:
    live = env.settings({"hooks": hooks_of("PreToolUse", "exit 2")})
    ws = Workspace(env.work, live, extensions=False)
    env._open.append(ws)
    result = await ws.run("echo direct")  # an editor's direct command: not a chat turn
    assert result.exit_code == 0 and result.stdout == "direct\n"


def test_hook_json_on_stdin_is_what_claude_code_sends() -> None:
    """The fields every hook gets, by event (docs/user-guide.md "Hooks")."""
    common = {"session_id", "transcript_path", "cwd", "permission_mode", "hook_event_name"}
    per_event: dict[str, set[str]] = {
        "PreToolUse": {"tool_name", "tool_input", "tool_use_id"},
        "PostToolUse": {"tool_name", "tool_input", "tool_response", "tool_use_id"},
        "UserPromptSubmit": {"prompt"},
        "Stop": {"stop_hook_active"},
        "SessionStart": {"source"},
        "SessionEnd": {"reason"},
        "PreCompact": {"trigger", "custom_instructions"},
        "Notification": {"message", "notification_type"},
    }
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text()
    section = guide.split("## Hooks", 1)[1].split("\n## ", 1)[0]
    for name in common | set().union(*per_event.values()):
        assert f"`{name}`" in section, name


# ------------------------------------------------------- security review H3


def _direct(tmp: Path, event: str, command: str) -> tuple[Any, Any, list[Notice]]:
    """Hooks run straight, without a session: (hooks, scope, the notices it showed)."""
    from synapse_lsp.config import Settings
    from synapse_lsp.policy.hooks import Hooks, HookScope

    settings = Settings(synapse_home=tmp, hooks=hooks_of(event, command))
    shown: list[Notice] = []
    known = Hooks(lambda: settings, tmp, lambda: False)
    return known, HookScope(known, "sid", "/dev/null", lambda: tmp, shown.append), shown


DENY_ECHOING = r"""python3 -c '
import json, sys
command = json.load(sys.stdin)["tool_input"].get("command", "")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "deny", "permissionDecisionReason": "refused: " + command}}))
'"""


async def test_a_pre_tool_use_answer_over_1_mib_denies(tmp_path: Path) -> None:
    """A deny hook that echoes the command in its reason: a long line made its JSON
    too long to read, and the deny came back as no opinion."""
    known, scope, _ = _direct(tmp_path, "PreToolUse", DENY_ECHOING)
    short = await known.pre_tool_use(scope, "rm -rf ~/x", tmp_path)
    assert short.decision == "deny" and short.reason.endswith("refused: rm -rf ~/x")
    long = await known.pre_tool_use(scope, "rm -rf ~/x # " + "A" * (1 << 20), tmp_path)
    assert long.decision == "deny"
    assert "its output was over 1 MiB" in long.reason


@pytest.mark.parametrize(
    "printed",
    [
        "{not json",
        '\\ufeff{"hookSpecificOutput": {"permissionDecision": "deny"',  # a BOM, cut short
        "  \\n{} trailing",
    ],
)
async def test_pre_tool_use_output_that_starts_like_json_but_is_not_denies(
    tmp_path: Path, printed: str
) -> None:
    known, scope, _ = _direct(tmp_path, "PreToolUse", f"printf '%b' '{printed}'")
    verdict = await known.pre_tool_use(scope, "ls", tmp_path)
    assert verdict.decision == "deny"
    assert "its output was not valid JSON" in verdict.reason


async def test_pre_tool_use_json_after_a_bom_is_read(tmp_path: Path) -> None:
    answer = (
        '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}'
    )
    known, scope, _ = _direct(tmp_path, "PreToolUse", f"printf '\\xef\\xbb\\xbf%s' '{answer}'")
    verdict = await known.pre_tool_use(scope, "ls", tmp_path)
    assert verdict == type(verdict)("deny", "denied by a PreToolUse hook: no")
    plain, scope, _ = _direct(tmp_path, "PreToolUse", "echo just words")
    assert (await plain.pre_tool_use(scope, "ls", tmp_path)).decision is None


async def test_other_events_with_bad_output_warn_and_go_on(tmp_path: Path) -> None:
    known, scope, shown = _direct(tmp_path, "UserPromptSubmit", "echo '{broken'")
    verdict = await known.user_prompt_submit(scope, "hello")
    assert verdict.blocked is None and verdict.context == ()  # not taken as context either
    (warning,) = [n for n in shown if n.level == "warning"]
    assert "not valid JSON" in warning.message and "(ignored)" in warning.message


@pytest.mark.parametrize(
    ("tail", "timeout", "status", "said"),
    [("exit 0", 30, "completed", ""), ("sleep 300", 1, "denied", "timed out after 1 s")],
    ids=["exits-at-once", "times-out"],
)
async def test_a_hook_with_a_detached_child_is_done_when_it_exits_or_times_out(
    env: Env, tail: str, timeout: float, status: str, said: str
) -> None:
    """Issue 28 item 3: `setsid sleep 301 &` holding the hook's stdout held the tool
    call 5 minutes (Python 3.11's `Process.wait()` waits for the pipes too) and an
    exit 0 counted as a failure. The hook is done when its process exits, and the
    timeout is the timeout."""
    pids = env.tmp / "detached.pid"
    hook = script(
        env.tmp / "hooks" / "detach.sh",
        f"#!/usr/bin/env bash\nsetsid sleep 301 &\necho $! > {pids}\n{tail}\n",
    )
    session = await env.session({"hooks": hooks_of("PreToolUse", str(hook), timeout=timeout)})
    env.api.add({"commands": ["touch ran.txt"]}, {"text": "ok"})
    try:
        async with asyncio.timeout(25):  # a liveness bound, far below the child's 301 s
            events = await turn(session, "go")
        (call,) = finished_calls(events)
        assert call.status == status and said in call.text, call.text
        assert (env.work / "ran.txt").exists() == (status == "completed")
    finally:
        if pids.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pids.read_text()), signal.SIGKILL)
