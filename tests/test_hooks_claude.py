"""Issue 32 item 3: hooks as Claude Code's behave — `{}` adds nothing, no Stop hook after
the tool-failure breaker, a Stop hook that keeps blocking (a Ralph loop, up to a cap),
`$CLAUDE_ENV_FILE` exports for the session shell. Real hook scripts, the real
assembly, the fake Messages API (tests/test_hooks.py's helpers)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.events import Notice
from tests.test_hooks import (
    Env,
    finished_calls,
    hooks_of,
    last,
    log_stdin,
    logged,
    script,
    texts,
    turn,
)


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


@pytest.mark.parametrize("printed", ["{}", "  {}  "])
async def test_a_json_answer_with_nothing_to_add_adds_nothing(env: Env, printed: str) -> None:
    """`{}` printed by a hook (an answer with nothing in it) was injected as context
    into every prompt."""
    command = f"printf '%s\\n' '{printed}'"
    hooks = {**hooks_of("UserPromptSubmit", command), **hooks_of("SessionStart", command)}
    session = await env.session({"hooks": hooks})
    env.api.add({"text": "hi"})
    await turn(session, "hello")
    sent = texts(env.api.message_requests[0])
    assert "hook additional context" not in sent, sent
    assert sent.strip() == "hello"


async def test_no_stop_hook_after_the_tool_failure_breaker(env: Env) -> None:
    stop = f"cat >> {env.tmp / 'stop.log'}; echo >> {env.tmp / 'stop.log'}; " + (
        'echo \'{"decision": "block", "reason": "keep going"}\''
    )
    settings = {"maxToolFailures": 2, "hooks": hooks_of("Stop", stop)}
    session = await env.session(settings)
    env.api.add({"commands": ["false", "false"]}, {"text": "both failed, sorry"})
    events = await turn(session, "try")
    assert last(events).stop_reason == "end_turn"
    assert env.api.calls == 2  # the report after the breaker, and no continuation
    assert logged(env.tmp / "stop.log") == []
    assert not any(isinstance(e, Notice) and "Stop hook" in e.message for e in events)


async def test_a_ralph_loop_goes_on_until_the_stop_hook_is_satisfied(env: Env) -> None:
    """A Stop hook blocks until progress.txt holds 3 lines; each continuation of the
    agent adds one. It went on once a turn, so the file stopped at 2 lines."""
    progress = env.work / "progress.txt"
    stop = script(
        env.tmp / "hooks" / "ralph.sh",
        f"""#!/usr/bin/env bash
cat >> {env.tmp / "stop.log"}; echo >> {env.tmp / "stop.log"}
lines=$(wc -l < {progress} 2>/dev/null || echo 0)
if [ "$lines" -lt 3 ]; then
  echo "only $lines of 3 steps done: do the next one" >&2
  exit 2
fi
""",
    )
    session = await env.session({"hooks": hooks_of("Stop", str(stop))})
    for step in (1, 2, 3):
        env.api.add({"commands": [f"echo step{step} >> progress.txt"]}, {"text": f"did {step}"})
    events = await turn(session, "work through the plan")
    assert last(events).stop_reason == "end_turn"
    assert progress.read_text().splitlines() == ["step1", "step2", "step3"]
    assert env.api.calls == 6
    assert [e["stop_hook_active"] for e in logged(env.tmp / "stop.log")] == [False, True, True]
    assert "only 2 of 3 steps done" in texts(env.api.message_requests[4])
    assert not any(isinstance(e, Notice) and e.level == "warning" for e in events)


async def test_session_start_exports_reach_the_session_shell(env: Env) -> None:
    start = script(
        env.tmp / "hooks" / "env.sh",
        """#!/usr/bin/env bash
cat > /dev/null
{
  echo '# set by the hook'
  echo 'export GREETING="hello world"'
  echo 'PROJECT_MODE=dev'
  echo 'export MY_TOKEN=leaked'
  echo 'export PROMPT_COMMAND=evil'
  echo 'export SNEAKY=$(id)'
  echo 'export TWO=a; rm -rf x'
} >> "$CLAUDE_ENV_FILE"
""",
    )
    settings = {"secretEnv": ["MY_TOKEN"], "hooks": hooks_of("SessionStart", str(start))}
    session = await env.session(settings)
    env.api.add(
        {"commands": ['echo "$GREETING/$PROJECT_MODE/${MY_TOKEN:-none}/${SNEAKY:-none}"']},
        {"text": "ok"},
    )
    events = await turn(session, "show")
    (call,) = finished_calls(events)
    assert call.text == "hello world/dev/none/none\n", call.text
    warnings = [e.message for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any("MY_TOKEN is a secret" in w for w in warnings), warnings
    assert any("PROMPT_COMMAND belongs to the session shell" in w for w in warnings)
    assert any("command substitution" in w for w in warnings)
    assert any("line 7" in w and "one shell word" in w for w in warnings)
    assert len(warnings) == 4


REWRITE = r"""#!/usr/bin/env python3
import json, sys
command = json.load(sys.stdin)["tool_input"].get("command", "")
if command.startswith("rm "):  # a trash can instead of rm; says allow, which counts for nothing
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "mkdir -p .trash && mv " + command[3:] + " .trash/"}}}))
"""


async def test_updated_input_replaces_the_command_and_is_gated_again(env: Env) -> None:
    hook = script(env.tmp / "hooks" / "rewrite.py", REWRITE)
    (env.work / "old.txt").write_text("x")
    session = await env.session({"hooks": hooks_of("PreToolUse", str(hook), "Bash")})
    env.api.add({"commands": ["rm old.txt"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "delete it"))
    assert call.status == "completed", call.text
    assert not (env.work / "old.txt").exists()
    assert (env.work / ".trash" / "old.txt").read_text() == "x"
    said = "replaced the command (updatedInput) with: mkdir -p .trash && mv old.txt .trash/"
    assert said in str(env.api.message_requests[-1]["messages"][-1]["content"])

    # The rewrite is the line the gate judges: the `deny` setting refuses it.
    (env.work / "new.txt").write_text("y")
    session = await env.session(
        {"deny": ["mv * .trash/"], "hooks": hooks_of("PreToolUse", str(hook), "Bash")}
    )
    env.api.add({"commands": ["rm new.txt"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "delete it"))
    assert call.status == "denied" and "denied by the `deny` setting" in call.text, call.text
    assert "replaced the command (updatedInput) with: mkdir -p .trash && mv new.txt" in call.text
    assert (env.work / "new.txt").exists()


async def test_updated_input_outside_the_workspace_still_asks(env: Env) -> None:
    """A hook's `allow` with its rewrite skips nothing: the new line writes outside the
    workspace, so the sandbox refuses it and the user is asked (or asked up front)."""
    outside = env.tmp / "outside.txt"
    rewrite = (
        'echo \'{"hookSpecificOutput": {"permissionDecision": "allow", '
        f'"updatedInput": {{"command": "touch {outside}"}}}}}}\''
    )
    session = await env.session({"hooks": hooks_of("PreToolUse", rewrite, "Bash")}, ask=True)
    env.answer = "Deny"
    env.api.add({"commands": ["echo harmless"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "go"))
    assert env.asked and str(outside) in env.asked[0][0], env.asked
    assert call.status in ("denied", "failed"), call.text
    assert not outside.exists()


# ------------------------------------------------------- SessionEnd, PreCompact, Notification


async def test_session_end_and_pre_compact_run_with_their_fields(env: Env) -> None:
    hooks = {
        **hooks_of("SessionStart", "true"),
        **hooks_of("SessionEnd", log_stdin(env.tmp, "end.log"), "other"),
        **hooks_of("PreCompact", log_stdin(env.tmp, "compact.log"), "manual"),
    }
    session = await env.session({"hooks": hooks})
    env.api.add({"text": "one"})
    await turn(session, "first")
    await session.compact("keep the API notes")
    (compacted,) = logged(env.tmp / "compact.log")
    assert compacted["hook_event_name"] == "PreCompact"
    assert compacted["trigger"] == "manual"
    assert compacted["custom_instructions"] == "keep the API notes"
    assert logged(env.tmp / "end.log") == []
    await session.close()
    (ended,) = logged(env.tmp / "end.log")
    assert ended["hook_event_name"] == "SessionEnd" and ended["reason"] == "other"
    assert ended["session_id"] == session.id


async def test_subagent_stop_runs_when_a_task_finished(env: Env) -> None:
    session = await env.session({"hooks": hooks_of("SubagentStop", log_stdin(env.tmp, "sub.log"))})
    env.api.add(
        {"commands": ['task:explore --prompt "look" --description "look"']},
        {"text": "nothing there"},
        {"text": "done"},
    )
    await turn(session, "go")
    (stopped,) = logged(env.tmp / "sub.log")
    assert stopped["hook_event_name"] == "SubagentStop"
    assert stopped["agent_type"] == "explore" and stopped["stop_hook_active"] is False


async def test_a_notification_hook_runs_while_a_permission_question_waits(env: Env) -> None:
    outside = env.tmp / "elsewhere"
    hook = log_stdin(env.tmp, "notify.log")
    session = await env.session(
        {"permission": "ask-all-native", "hooks": hooks_of("Notification", hook)}, ask=True
    )
    env.api.add({"commands": [f"mkdir {outside}"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "go"))
    assert call.status == "denied" and env.asked
    for _ in range(100):  # it runs alongside the question, not before it
        if logged(env.tmp / "notify.log"):
            break
        await asyncio.sleep(0.05)
    (notified,) = logged(env.tmp / "notify.log")
    assert notified["hook_event_name"] == "Notification"
    assert notified["notification_type"] == "permission_prompt"
    assert f"mkdir {outside}" in notified["message"]


# ------------------------------------------------------- ~/.claude/settings.json


async def test_the_users_claude_code_hooks_run_named_once_and_can_be_turned_off(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = env.tmp / "claude-config"
    claude.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    guard = "echo 'blocked by a ~/.claude hook' >&2; exit 2"
    (claude / "settings.json").write_text(
        json.dumps({"model": "opus", "hooks": hooks_of("PreToolUse", guard, "Bash")})
    )
    session = await env.session({})  # an untrusted folder; the user's own file counts
    env.api.add({"commands": ["touch a.txt"]}, {"text": "ok"}, {"commands": ["touch b.txt"]})
    env.api.add({"text": "ok"})
    first = await turn(session, "go")
    (call,) = finished_calls(first)
    assert call.status == "denied" and "blocked by a ~/.claude hook" in call.text
    named = [e.message for e in first if isinstance(e, Notice) and "Claude Code hooks" in e.message]
    assert len(named) == 1 and f"PreToolUse `{guard}`" in named[0], named
    assert '"claudeUserHooks": false' in named[0]
    second = await turn(session, "again")
    assert not any(isinstance(e, Notice) and "Claude Code hooks" in e.message for e in second)
    assert not (env.work / "a.txt").exists() and not (env.work / "b.txt").exists()

    session = await env.session({"claudeUserHooks": False})
    env.api.add({"commands": ["touch c.txt"]}, {"text": "ok"})
    (call,) = finished_calls(await turn(session, "go"))
    assert call.status == "completed" and (env.work / "c.txt").exists()


def test_chat_p_separates_the_texts_of_a_turn_a_stop_hook_continued(
    tmp_path: Path, workdir: Path
) -> None:
    """`synapse chat -p`: the answer after a Stop hook sent the agent on is a paragraph of
    its own (it was printed glued: `first stopafter stop hook`)."""
    from tests.fake_api import FakeApiProcess
    from tests.test_repl import chat, home_env

    mark = tmp_path / "stopped-once"
    hook = tmp_path / "stop.sh"
    hook.write_text(
        f"#!/bin/sh\ncat >/dev/null\nif [ -e {mark} ]; then exit 0; fi\n"
        f"touch {mark}\necho 'check the tests too' >&2\nexit 2\n"
    )
    hook.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    stop = {"Stop": [{"hooks": [{"type": "command", "command": str(hook)}]}]}
    (home / "settings.json").write_text(json.dumps({"hooks": stop}))
    with FakeApiProcess(
        [{"text": "first stop"}, {"text": "after stop hook"}], tmp_path / "a"
    ) as api:
        done = chat(["-p", "go"], home_env(home, api.env()), workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "first stop\n\nafter stop hook\n"
