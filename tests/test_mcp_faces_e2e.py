"""The MCP client's server features in each face, end to end (docs/extensions.md "In the
faces", docs/user-guide.md "What MCP servers ask of you"): real `synapse` processes (REPL
on a pty, `chat -p --output-format stream-json`, the LSP server under pytest-lsp, `synapse
acp` under the ACP SDK's client), the real stdio fixture server
(tests/mcp_servers/capabilities_server.py, configured in $SYNAPSE_HOME/mcp/mcp_servers.json,
which loads whatever the folder's trust) and the scripted fake Messages API.

- progress (`mcp:caps:slow`) is shown live, while the call still runs, in the LSP, ACP and
  REPL faces; `chat -p` stream-json has no live-output event (documented in
  cli/json_events.py): the progress lines arrive in the call's `tool_result.stdout`;
- an elicitation form answered field by field on the REPL's terminal;
- a yes/no elicitation answered with `window/showMessageRequest` buttons in the editor,
  and a form with fields to type declined there;
- `/mcp:caps:review 'x = 1'` as the prompt of the LSP and ACP faces sends the rendered
  prompt as the user's message.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.schema import TextContentBlock

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.fake_api import FakeApiProcess
from tests.lsp_client import Editor, editor
from tests.test_acp_client import AcpTestClient, acp_agent, agent_env, finished
from tests.test_mcp_faces import config
from tests.test_repl import finish, home_env, spawn
from tests.test_repl_bang import PtyChat

SLOW = "mcp:caps:slow --steps 3 --delay 0.4"
STEPS = [f"[progress {i}/3] step {i} of 3" for i in (1, 2, 3)]
REVIEWED = "Please review this code (short review):\nx = 1"
LSP_KEY = "sk-ant-fake-lsp-test"


def _tool_results(bodies: list[dict[str, Any]]) -> list[str]:
    """The text of every tool_result block the model was sent (latest request's history)."""
    texts = []
    for message in bodies[-1]["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block["content"]
                texts.append(
                    inner if isinstance(inner, str) else "".join(c.get("text", "") for c in inner)
                )
    return texts


def _first_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> float:
    """Poll until `predicate()`; the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never saw {what}"
        await asyncio.sleep(0.01)
    return time.monotonic()


# ------------------------------------------------------------------ 1. progress


def test_stream_json_carries_progress_only_in_the_tool_result(
    tmp_path: Path, workdir: Path
) -> None:
    """stream-json has no live-output event (cli/json_events.py: "nor live output as it
    comes"): the progress lines are collected into the call's `tool_result.stdout`; the
    model gets only the result."""
    home = tmp_path / "home"
    config(home)
    script = [{"commands": [SLOW]}, {"text": "done"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        args = ["--trust", "-p", "go", "--output-format", "stream-json"]
        done = finish(spawn(args, home_env(home, api.env()), workdir))
        bodies = api.message_bodies()
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    call_at, result_at = kinds.index("tool_call"), kinds.index("tool_result")
    assert events[call_at]["command"] == SLOW
    between = {e["type"] for e in events[call_at + 1 : result_at]}
    assert between <= {"notice"}, between  # nothing carries live output
    result = events[result_at]
    assert result["status"] == "completed", result
    assert result["stdout"] == "".join(s + "\n" for s in STEPS), result
    assert "done after 3 steps" in result["text"]
    (told,) = [r for r in _tool_results(bodies) if "done after 3 steps" in r]
    assert "[progress" not in told  # progress is not given to the model


async def test_the_editor_shows_progress_while_the_call_runs(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    async with FakeAnthropic([{"commands": [SLOW]}, {"text": "done"}]) as api:
        env = {"ANTHROPIC_API_KEY": LSP_KEY, "ANTHROPIC_BASE_URL": api.base_url}
        async with editor(home, [workdir], env=env) as ed:
            sid = (await ed.command("synapse.session.new", {}))["sessionId"]
            prompt = asyncio.create_task(
                ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            )

            def output() -> str:
                return "".join(
                    u["output"]["text"] for u in ed.session_updates(sid) if "output" in u
                )

            def ended() -> bool:
                return any(
                    u["sessionUpdate"] == "tool_call_update" and u.get("status")
                    for u in ed.session_updates(sid)
                )

            first = await _until(lambda: STEPS[0] in output(), STEPS[0])
            assert not ended(), ed.session_updates(sid)  # shown while the call runs
            assert STEPS[2] not in output()
            last = await _until(lambda: STEPS[2] in output(), STEPS[2])
            assert last - first > 0.4  # each line as it came, not all at the end
            result = await asyncio.wait_for(prompt, 60)
    assert result["stopReason"] == "end_turn", result
    assert output() == "".join(s + "\n" for s in STEPS)
    (done,) = [u for u in ed.session_updates(sid) if u.get("status") == "completed"]
    assert "done after 3 steps" in json.dumps(done)


async def test_acp_shows_progress_while_the_call_runs(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    async with FakeAnthropic([{"commands": [SLOW]}, {"text": "done"}]) as api:
        client = AcpTestClient()
        async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            prompt = asyncio.create_task(
                conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text="go")])
            )

            def live() -> str:
                return json.dumps(
                    [
                        u
                        for u in client.of(sid)
                        if u["sessionUpdate"] == "tool_call_update"
                        and u.get("status") not in ("completed", "failed")
                    ]
                )

            first = await _until(lambda: STEPS[0] in live(), STEPS[0])
            assert not finished(client.of(sid)), client.of(sid)  # while the call runs
            last = await _until(lambda: STEPS[2] in live(), STEPS[2])
            assert last - first > 0.4
            result = await asyncio.wait_for(prompt, 60)
    assert result.stop_reason == "end_turn"
    (done,) = finished(client.of(sid))
    assert done["status"] == "completed" and "done after 3 steps" in json.dumps(done)


def test_the_repl_shows_progress_while_the_call_runs(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    script = [{"commands": [SLOW]}, {"text": "all done"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        pty = PtyChat(home_env(home, api.env()), workdir, no_color=True)
        try:
            at = pty.wait_for("You (1)> ")
            pty.type("go\r")
            at = pty.wait_for(STEPS[0], at)
            first = time.monotonic()
            assert len(api.message_bodies()) == 1  # the call has not ended: no next request
            assert STEPS[2] not in pty.out
            at = pty.wait_for(STEPS[2], at)
            assert time.monotonic() - first > 0.4
            at = pty.wait_for("all done", at)
            at = pty.wait_for("You (2)> ", at)
            pty.type("/exit\r")
            assert pty.wait_exit() == 0
        finally:
            pty.close()
        bodies = api.message_bodies()
    assert STEPS[1] in pty.out
    (told,) = [r for r in _tool_results(bodies) if "done after 3 steps" in r]
    assert "[progress" not in told


# ------------------------------------------------------- 2. elicitation in the REPL


def test_the_repl_asks_a_form_field_by_field(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    script = [{"commands": ["mcp:caps:ask_user 'Who?'"]}, {"text": "thanks"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        pty = PtyChat(home_env(home, api.env()), workdir, no_color=True)
        try:
            at = pty.wait_for("You (1)> ")
            pty.type("ask me\r")
            at = pty.wait_for("The MCP server caps asks:", at)
            at = pty.wait_for("Who?", at)
            at = pty.wait_for("Your name", at)
            at = pty.wait_for("> ", at)
            pty.type("Ann Lee\r")
            at = pty.wait_for("Color (1=red, 2=green; required)> ", at)
            pty.type("purple\r")  # does not fit: asked again
            at = pty.wait_for("(one of red, green", at)
            at = pty.wait_for("Color (1=red, 2=green; required)> ", at)
            pty.type("2\r")
            at = pty.wait_for("Subscribe", at)
            at = pty.wait_for("> ", at)
            pty.type("\r")  # its default
            at = pty.wait_for("Age", at)
            at = pty.wait_for("> ", at)
            pty.type("\r")  # optional, no default: left out
            at = pty.wait_for("thanks", at)
            at = pty.wait_for("You (2)> ", at)
            pty.type("/exit\r")
            assert pty.wait_exit() == 0
        finally:
            pty.close()
        bodies = api.message_bodies()
    expected = {"age": None, "color": "green", "name": "Ann Lee", "subscribe": False}
    results = _tool_results(bodies)
    assert any("accepted: " + json.dumps(expected, sort_keys=True) in r for r in results), results


# ----------------------------------------------------- 3. elicitation in the editor


async def _editor_turns(
    home: Path, workdir: Path, script: list[Any], prompts: list[str]
) -> tuple[Editor, list[dict[str, Any]], list[dict[str, Any]]]:
    """Run each prompt as a turn of one editor session; the editor, its session's
    updates and the model's requests. Every button question is answered Accept."""
    config(home)
    async with FakeAnthropic(script) as api:
        env = {"ANTHROPIC_API_KEY": LSP_KEY, "ANTHROPIC_BASE_URL": api.base_url}
        async with editor(home, [workdir], env=env) as ed:
            ed.answer = "Accept"
            sid = (await ed.command("synapse.session.new", {}))["sessionId"]
            for text in prompts:
                done = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": text})
                assert done["stopReason"] == "end_turn", done
            return ed, ed.session_updates(sid), api.message_requests


async def test_the_editor_asks_yes_no_with_buttons_and_declines_typed_fields(
    tmp_path: Path, workdir: Path
) -> None:
    script = [
        {"commands": ["mcp:caps:confirm 'Deploy?'"]},
        {"text": "deployed"},
        {"commands": ["mcp:caps:ask_user 'Who?'"]},
        {"text": "declined"},
    ]
    ed, _updates, bodies = await _editor_turns(tmp_path / "home", workdir, script, ["go", "ask me"])
    asked = [(a.message, [x.title for x in a.actions or []]) for a in ed.asks]
    assert asked == [("caps asks: Deploy?", ["Accept", "Decline"])]  # ask_user not asked
    results = [r.strip() for r in _tool_results(bodies)]
    assert [r.splitlines()[0] for r in results] == ["accept", "decline"], results


async def test_the_editor_says_why_it_declined_a_form_with_typed_fields(
    tmp_path: Path, workdir: Path
) -> None:
    script = [{"commands": ["mcp:caps:ask_user 'Who?'"]}, {"text": "declined"}]
    _ed, updates, bodies = await _editor_turns(tmp_path / "home", workdir, script, ["ask me"])
    (told,) = _tool_results(bodies)
    assert told.strip().startswith("decline")
    # docs/user-guide.md: "a form with a field to type is declined, saying so"
    shown = json.dumps(updates) + told
    assert "Your name, Age must be typed" in shown, shown


# --------------------------------------------------- 4. prompts as slash commands


async def test_a_prompt_slash_command_is_the_editors_message(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    async with FakeAnthropic([{"text": "looks fine"}]) as api:
        env = {"ANTHROPIC_API_KEY": LSP_KEY, "ANTHROPIC_BASE_URL": api.base_url}
        async with editor(home, [workdir], env=env) as ed:
            sid = (await ed.command("synapse.session.new", {}))["sessionId"]
            text = "/mcp:caps:review 'x = 1'"
            result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": text})
    assert result["stopReason"] == "end_turn", result
    assert len(api.message_requests) == 1
    assert _first_user_text(api.message_requests[0]) == REVIEWED


async def test_a_prompt_slash_command_is_the_acp_clients_message(
    tmp_path: Path, workdir: Path
) -> None:
    home = tmp_path / "home"
    config(home)
    async with FakeAnthropic([{"text": "looks fine"}]) as api:
        client = AcpTestClient()
        async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            line = TextContentBlock(type="text", text="/mcp:caps:review 'x = 1'")
            result = await conn.prompt(session_id=sid, prompt=[line])
            await client.wait_for(lambda: _offered(client.of(sid), "mcp:caps:review"))
    assert result.stop_reason == "end_turn"
    assert len(api.message_requests) == 1
    assert _first_user_text(api.message_requests[0]) == REVIEWED


def _offered(updates: list[dict[str, Any]], name: str) -> bool:
    return any(
        c["name"] == name
        for u in updates
        if u["sessionUpdate"] == "available_commands_update"
        for c in u["availableCommands"]
    )


_ = pytest  # the async tests run on pytest-asyncio's loop
