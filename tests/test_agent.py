"""The agent loop end to end: real SDK -> fake Messages API over HTTP, real bash via the router."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.compaction import (
    DROPPED_OUTPUT,
    Compaction,
    CompactionSettings,
    maybe_compact,
)
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.prompts import SIMPLE_NATIVE_COMMANDS, bash_tool
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.turn_context import Selection, TurnContext
from synapse_lsp.builtins import default_builtins
from synapse_lsp.config import Settings
from synapse_lsp.errors import SessionBusyError
from synapse_lsp.events import (
    Event,
    Notice,
    PlanEntry,
    PlanUpdated,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
    UsageUpdated,
)
from synapse_lsp.router import BashRouter

KEY = "sk-ant-agent-test-key"
MakeSession = Callable[..., ChatSession]


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> AsyncIterator[MakeSession]:
    models: list[ModelClient] = []

    def factory(script: list[Any] | None = None, **kw: Any) -> ChatSession:
        if script:
            api.add(*script)
        model = ModelClient(
            api_key=KEY,
            base_url=api.base_url,
            model="fake-model",
            retry_base_delay=0.001,
            max_attempts=kw.pop("max_attempts", 3),
        )
        models.append(model)
        return ChatSession(
            kw.pop("router", router), kw.pop("settings", settings), model=model, **kw
        )

    yield factory
    for model in models:
        await model.close()


async def turn(session: ChatSession, text: str, context: TurnContext | None = None) -> list[Event]:
    return [e async for e in session.run_turn(text, context)]


def finished(events: list[Event]) -> TurnFinished:
    last = events[-1]
    assert isinstance(last, TurnFinished), last
    assert sum(isinstance(e, TurnFinished) for e in events) == 1
    return last


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def assert_history_valid(messages: list[dict[str, Any]]) -> None:
    """Roles alternate, starting with the user; every tool_use is answered next."""
    assert messages[0]["role"] == "user"
    for a, b in zip(messages, messages[1:], strict=False):
        assert a["role"] != b["role"]
    for i, message in enumerate(messages):
        ids = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if ids:
            answered = [
                b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"
            ]
            assert answered[: len(ids)] == ids


# ----------------------------------------------------------------- streaming


async def test_a_text_answer_streams_and_ends_the_turn(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make([{"text": "Hello from the model.", "chunk_size": 4}])
    events = await turn(session, "hi")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "Hello from the model."
    assert len(deltas) > 1
    assert any(isinstance(e, UsageUpdated) for e in events)
    done = finished(events)
    assert done.stop_reason == "end_turn" and done.error is None
    assert done.usage.output_tokens > 0
    body = api.message_requests[0]
    assert body["tools"] == [bash_tool()]  # exactly the one Bash tool
    assert body["tools"][0]["input_schema"]["required"] == ["command"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "Zone A" in body["system"][0]["text"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert session.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello from the model."}],
    }
    assert session.title == "hi"


async def test_thinking_streams_and_is_kept_with_its_signature(make: MakeSession) -> None:
    session = make([{"thinking": "hmm, let me think", "text": "42"}])
    events = await turn(session, "question")
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "hmm, let me think"
    assert session.messages[-1]["content"][0] == {
        "type": "thinking",
        "thinking": "hmm, let me think",
        "signature": "fake-signature",
    }


async def test_the_thinking_setting_asks_for_thinking_and_sends_it_back_with_tool_results(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> None:
    thinking, problems = settings.with_overrides({"maxTokens": 6000, "thinkingBudget": 2048})
    assert problems == []
    model = ModelClient.from_settings(
        thinking, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
    )
    api.add({"thinking": "list it first", "commands": ["echo listed"]}, "done")
    session = ChatSession(router, thinking, model=model)
    try:
        events = await turn(session, "go")
    finally:
        await model.close()
    assert finished(events).stop_reason == "end_turn"
    assert any(isinstance(e, ThinkingDelta) for e in events)
    first, second = api.message_requests
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 6000
    # With thinking on, the API wants the signed thinking block back before its tool_use.
    assistant = second["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "tool_use"]
    assert assistant[0]["signature"] == "fake-signature"
    # Off by default: no thinking parameter at all.
    plain = ModelClient.from_settings(settings, env={"ANTHROPIC_API_KEY": KEY})
    assert plain.thinking_budget is None


# ---------------------------------------------------------------- tool loop


async def test_a_multi_step_tool_turn_runs_every_call_in_order(
    api: FakeAnthropic, make: MakeSession, workdir: Path
) -> None:
    session = make(
        [
            {
                "text": "Let me set things up.",
                "commands": ["mkdir sub && cd sub && echo one > f.txt", "pwd", "cat f.txt"],
            },
            {"commands": ["false", "read f.txt"]},
            {"text": "All done."},
        ]
    )
    events = await turn(session, "do it")
    assert finished(events).stop_reason == "end_turn"
    started = [e.command for e in events if isinstance(e, ToolCallStarted)]
    assert started == [
        "mkdir sub && cd sub && echo one > f.txt",
        "pwd",
        "cat f.txt",
        "false",
        "read f.txt",
    ]
    done = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [d.exit_code for d in done] == [0, 0, 0, 1, 0]
    assert [d.is_error for d in done] == [False, False, False, True, False]
    assert [d.layer for d in done] == ["native", "native", "native", "native", "agent"]
    assert done[1].text.strip() == str(workdir / "sub")  # the shell kept its cwd
    assert any(isinstance(e, ToolOutput) and "one" in e.chunk for e in events)
    # the model got every result, paired with its tool_use, in order
    first, second, third = api.message_requests
    assistant = second["messages"][1]["content"]
    ids = [b["id"] for b in assistant if b["type"] == "tool_use"]
    results = tool_results(second)
    assert [r["tool_use_id"] for r in results] == ids
    assert [r["is_error"] for r in results] == [False, False, False]
    assert results[2]["content"].strip() == "one"
    failed = tool_results(third)
    assert [r["is_error"] for r in failed] == [True, False]
    assert failed[0]["content"] == "[Error] Command failed (exit code 1)\n[stderr]\n(empty)\n"
    assert "one" in failed[1]["content"]
    assert_history_valid(session.messages)


async def test_bad_tool_input_is_an_error_result_not_a_crash(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make(
        [
            {
                "content": [
                    {"type": "tool_use", "name": "Bash", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "name": "Python", "input": {"code": "1"}},
                ]
            },
            "ok",
        ]
    )
    events = await turn(session, "x")
    assert finished(events).stop_reason == "end_turn"
    results = tool_results(api.message_requests[1])
    assert all(r["is_error"] for r in results)
    assert 'needs a non-empty string "command"' in results[0]["content"]
    assert "the only tool is Bash" in results[1]["content"]


# ------------------------------------------------------------ stop reasons


async def test_max_tokens_ends_the_turn_with_a_notice(make: MakeSession) -> None:
    session = make([{"text": "The answer is cut he", "stop_reason": "max_tokens"}])
    events = await turn(session, "long please")
    assert finished(events).stop_reason == "max_tokens"
    assert any(isinstance(e, Notice) and "output limit" in e.message for e in events)


async def test_a_tool_call_with_restart_true_gives_a_fresh_shell(
    api: FakeAnthropic, make: MakeSession, workdir: Path
) -> None:
    session = make(
        [
            {"commands": ["cd / && export X=1"]},
            {"commands": [{"command": "pwd; echo ${X:-unset}", "restart": True}]},
            "fresh",
        ]
    )
    events = await turn(session, "restart it")
    assert finished(events).stop_reason == "end_turn"
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.restart for e in started] == [False, True]
    (result,) = tool_results(api.message_requests[2])
    assert result["content"] == f"{workdir}\nunset\n" and not result["is_error"]


async def test_a_command_cut_by_max_tokens_is_not_run_and_the_turn_goes_on(
    api: FakeAnthropic, make: MakeSession, workdir: Path
) -> None:
    cut = '{"command": "write big.txt \'line one\\nline tw'  # the JSON ends mid-string
    session = make(
        [
            {
                "content": [
                    {"type": "text", "text": "Writing it."},
                    {"type": "tool_use", "input_json": cut},
                ],
                "stop_reason": "max_tokens",
            },
            "I will write it in parts.",
        ]
    )
    events = await turn(session, "write a big file")
    assert finished(events).stop_reason == "end_turn"
    assert api.calls == 2
    (result,) = tool_results(api.message_requests[1])
    assert result["is_error"] is True
    assert "cut off (max_tokens)" in result["content"]
    assert not (workdir / "big.txt").exists()
    failed = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(failed) == 1 and failed[0].is_error and failed[0].category == "invalid_usage"
    # What was sent back keeps the cut input, so the model sees what it wrote.
    sent = api.message_requests[1]["messages"][-2]["content"]
    assert sent[-1]["type"] == "tool_use" and sent[-1]["input"] == {"_incomplete_json": cut}
    assert_history_valid(session.messages)


async def test_a_refusal_ends_the_turn(make: MakeSession) -> None:
    session = make([{"text": "I can't help with that.", "stop_reason": "refusal"}])
    events = await turn(session, "bad")
    assert finished(events).stop_reason == "refusal"


async def test_the_turn_limit_stops_a_looping_model(
    api: FakeAnthropic, make: MakeSession, settings: Settings
) -> None:
    limited = dataclasses.replace(settings, max_turns=3)
    session = make([{"commands": ["true"]}] * 5, settings=limited)
    events = await turn(session, "loop forever")
    assert finished(events).stop_reason == "max_turns"
    assert api.calls == 3
    assert any(isinstance(e, Notice) and "turn limit" in e.message for e in events)
    assert_history_valid(session.messages)


# -------------------------------------------------------------- API errors


async def test_retries_are_shown_as_notices_then_the_answer_arrives(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make(
        [
            {
                "error": {
                    "status": 429,
                    "type": "rate_limit_error",
                    "message": "slow",
                    "retry_after": 0,
                }
            },
            {"text": "half an ans", "drop_after": 4},
            {"text": "The full answer."},
        ],
        max_attempts=3,
    )
    events = await turn(session, "q")
    assert finished(events).stop_reason == "end_turn"
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert len(notices) == 2
    assert "429" in notices[0] and "attempt 2 of 3" in notices[0]
    assert "stream dropped" in notices[1] and "discarded" in notices[1]
    assert session.messages[-1]["content"] == [{"type": "text", "text": "The full answer."}]
    assert api.calls == 3


async def test_retries_exhausted_end_the_turn_and_keep_the_users_text(
    api: FakeAnthropic, make: MakeSession
) -> None:
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    session = make([overloaded] * 3, max_attempts=3)
    events = await turn(session, "my precious question")
    done = finished(events)
    assert done.stop_reason == "error"
    assert done.error is not None
    assert "after 3 attempts" in done.error and "overloaded_error" in done.error
    assert session.messages == [
        {"role": "user", "content": [{"type": "text", "text": "my precious question"}]}
    ]
    # the next turn sends both texts: nothing typed was lost
    api.add("Answering both.")
    events = await turn(session, "and another")
    assert finished(events).stop_reason == "end_turn"
    texts = [b["text"] for b in api.message_requests[-1]["messages"][0]["content"]]
    assert texts == ["my precious question", "and another"]


async def test_no_api_key_ends_the_turn_with_how_to_set_one(
    router: BashRouter, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    session = ChatSession(router, settings)
    events = await turn(session, "hello?")
    done = finished(events)
    assert done.stop_reason == "error"
    assert done.error is not None and "export ANTHROPIC_API_KEY=" in done.error
    assert session.messages[0]["content"][0]["text"] == "hello?"


# ------------------------------------------------------------------ cancel


@pytest.mark.parametrize(
    ("restart", "wait"),
    [(False, 0.3), (True, 0.3), (True, 0.0)],
    ids=["command", "command-after-restart", "during-the-restart"],
)
async def test_cancel_during_a_long_command_interrupts_it_and_keeps_history_valid(
    api: FakeAnthropic, make: MakeSession, router: BashRouter, restart: bool, wait: float
) -> None:
    session = make([{"commands": [{"command": "sleep 30", "restart": restart}, "echo never"]}])
    events: list[Event] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    async for event in session.run_turn("wait"):
        events.append(event)
        if isinstance(event, ToolCallStarted):
            await asyncio.sleep(wait)  # let sleep start (or not even the restart end)
            session.cancel()
    assert loop.time() - started < 20  # the sleep was interrupted, not waited out
    assert finished(events).stop_reason == "cancelled"
    cancelled = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [c.status for c in cancelled] == ["cancelled"]
    results = session.messages[-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert results[0]["content"].startswith("[Cancelled]")
    if wait:
        assert "interrupted" in results[0]["content"]
    assert "Not run" in results[1]["content"]
    assert_history_valid(session.messages)
    assert not session.busy
    # the shell survived and the next turn sends a valid history
    api.add({"commands": ["echo alive"]}, "fine")
    events = await turn(session, "again")
    assert finished(events).stop_reason == "end_turn"
    assert "alive" in tool_results(api.message_requests[-1])[0]["content"]
    assert_history_valid(api.message_requests[-1]["messages"])


async def test_cancel_mid_stream_keeps_the_partial_text(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make([{"text": "one two three four five six", "chunk_size": 4, "hang_after": 5}])
    events: list[Event] = []
    async for event in session.run_turn("talk"):
        events.append(event)
        if isinstance(event, TextDelta):
            session.cancel()
    assert finished(events).stop_reason == "cancelled"
    last = session.messages[-1]
    assert last["role"] == "assistant"
    assert last["content"][0]["text"].startswith("one")
    assert "[interrupted by the user]" in last["content"][0]["text"]
    api.add("ok")
    assert finished(await turn(session, "go on")).stop_reason == "end_turn"


async def test_a_second_turn_while_busy_is_refused(make: MakeSession) -> None:
    session = make([{"text": "slow", "delay": 0.3}, "second"])
    stream = session.run_turn("first")
    with pytest.raises(SessionBusyError):
        session.run_turn("second")
    events = [e async for e in stream]
    assert finished(events).stop_reason == "end_turn"
    assert not session.busy
    assert finished(await turn(session, "second")).stop_reason == "end_turn"


async def test_leaving_the_stream_early_cancels_the_turn(make: MakeSession) -> None:
    session = make([{"commands": ["sleep 30"]}, "unused"])
    stream = session.run_turn("x")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert not session.busy
    assert_history_valid(session.messages)


# --------------------------------------------------------------- sub-agents


async def test_bdd_nested_task_inside_a_subagent_is_blocked(
    api: FakeAnthropic, make: MakeSession
) -> None:
    """Seeds 002/003: outer call succeeds (isError=false) with the child's final text and
    the model is called exactly twice."""
    session = make(
        [
            {"commands": ['task:skill:search --prompt "find pdf skills" --description "nested"']},
            {"text": "General task finished without nested task execution."},
        ]
    )
    result = await session.router.route(
        'task:general --prompt "analyze route" --description "guard recursion"'
    )
    assert result.is_error is False
    assert result.exit_code == 0
    assert "General task finished without nested task execution." in result.text
    assert api.calls == 2
    first, second = api.message_requests
    assert "task:general" in first["system"][0]["text"]
    assert first["messages"][0]["content"][0]["text"] == "analyze route"
    blocked = tool_results(second)[0]
    assert blocked["is_error"] is False
    assert "Nested task not run" in blocked["content"]


async def test_a_subagent_streams_tagged_events_and_returns_its_final_text(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make(
        [
            {"commands": ['task:explore --prompt "where is f?" --description "find f"']},
            {"text": "Looking.", "commands": ["ls"]},
            {"text": "f is nowhere."},
            {"text": "The sub-agent says f is nowhere."},
        ]
    )
    events = await turn(session, "find f")
    assert finished(events).stop_reason == "end_turn"
    task_id = next(e.tool_call_id for e in events if isinstance(e, ToolCallStarted))
    child = [e for e in events if getattr(e, "parent_tool_call_id", None) == task_id]
    assert any(isinstance(e, ToolCallStarted) and e.command == "ls" for e in child)
    assert "".join(e.text for e in child if isinstance(e, TextDelta)) == "Looking.f is nowhere."
    outer = [e for e in events if isinstance(e, ToolCallFinished) and e.tool_call_id == task_id]
    assert outer[0].is_error is False and "f is nowhere." in outer[0].text
    assert outer[0].data["subagent"]["model_calls"] == 2
    assert api.calls == 4
    # the child's history stayed out of the parent's
    assert len(api.message_requests[3]["messages"]) == 3


async def test_explore_subagents_cannot_change_files(
    api: FakeAnthropic, make: MakeSession, workdir: Path
) -> None:
    session = make(
        [
            {"commands": ["write x.txt hi", "echo hi > y.txt", "ls", "git status"]},
            {"text": "Could not write."},
        ]
    )
    result = await session.router.route('task:explore --prompt "try" --description "ro"')
    assert result.exit_code == 0
    results = tool_results(api.message_requests[1])
    assert [r["is_error"] for r in results][:3] == [True, True, False]
    assert "read-only" in results[0]["content"]
    assert not (workdir / "x.txt").exists() and not (workdir / "y.txt").exists()


# ------------------------------------------------------------ context, prompt


async def test_the_editor_context_is_given_to_the_model(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make(["seen"])
    context = TurnContext(
        active_file="file:///proj/src/app.py",
        selection=Selection("file:///proj/src/app.py", "def main():\n    pass", 9, 0, 10, 8),
        open_files=("file:///proj/src/app.py", "file:///proj/README.md"),
    )
    await turn(session, "explain this", context)
    blocks = api.message_requests[0]["messages"][0]["content"]
    assert blocks[-1]["text"] == "explain this"
    editor = blocks[0]["text"]
    assert "<editor_context>" in editor
    assert "Active file: /proj/src/app.py" in editor
    assert "Open files: /proj/src/app.py, /proj/README.md" in editor
    assert "lines 10-11" in editor and "def main():" in editor


async def test_the_system_prompt_holds_every_builtins_help_and_the_whitelist(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make(["ok"])
    await turn(session, "x")
    system = api.message_requests[0]["system"]
    text = system[0]["text"]
    for command in default_builtins():
        assert command.help().strip() in text
    assert ", ".join(SIMPLE_NATIVE_COMMANDS) in text
    # The whitelist is exactly the seed's 22 commands (pinned here, not read back).
    seed_whitelist = (
        "ls", "pwd", "cd", "mkdir", "rmdir", "rm", "cp", "mv", "touch", "cat", "head", "tail",
        "echo", "env", "export", "which", "whoami", "date", "clear", "true", "false", "exit",
    )  # fmt: skip
    assert seed_whitelist == SIMPLE_NATIVE_COMMANDS
    zone_a, _, zone_b = text.partition("Zone B")
    assert zone_b, "no Zone B section"
    assert "git, docker, curl, npm, python, jq, tar, ssh" in zone_b
    assert "`mcp:*:*`" in zone_b and "`skill:*:*`" in zone_b and "--help" in zone_b
    assert "git, docker" not in zone_a  # help-first commands are not offered as ready
    assert "command:search" in text and "skill:load" in text
    assert "file system is your memory" in text
    assert "cache_control" not in system[1]  # the environment comes after the breakpoint


# -------------------------------------------------------------- compaction


async def test_a_long_history_is_compacted_by_a_model_summary(
    api: FakeAnthropic, make: MakeSession
) -> None:
    big = {"input_tokens": 9000, "output_tokens": 10}
    session = make(
        [
            {"commands": ["echo turn one"]},
            {"text": "first answer"},
            {"text": "second answer"},
            {"text": "third answer", "usage": big},  # now the context is 90 % full
            {"text": "SUMMARY: the user ran echo turn one."},
            {"text": "fourth answer"},
        ],
        context_window=10_000,
    )
    for prompt in ("one", "two", "three"):
        assert finished(await turn(session, prompt)).stop_reason == "end_turn"
    events = await turn(session, "four")
    assert finished(events).stop_reason == "end_turn"
    assert any(isinstance(e, Notice) and "Compacted" in e.message for e in events)
    summarise = api.message_requests[4]
    assert "tools" not in summarise
    assert "summarising" in summarise["system"]
    assert "echo turn one" in summarise["messages"][0]["content"]
    after = api.message_requests[5]["messages"]
    assert "SUMMARY: the user ran echo turn one." in after[0]["content"][0]["text"]
    user_texts = [
        b["text"] for m in after if m["role"] == "user" for b in m["content"] if "text" in b
    ]
    assert user_texts[-2:] == ["three", "four"]  # the recent turns are kept verbatim
    assert_history_valid(after)


async def test_when_the_summary_fails_older_command_output_is_dropped_instead(
    api: FakeAnthropic, make: MakeSession
) -> None:
    big = {"input_tokens": 9000, "output_tokens": 10}
    refused = {"error": {"status": 400, "type": "invalid_request_error", "message": "too long"}}
    session = make(
        [
            {"commands": ["echo old-$((40 + 2))"]},
            {"text": "first answer"},
            {"text": "second answer"},
            {"text": "third answer", "usage": big},
            refused,  # the summary call fails
            {"text": "fourth answer"},
        ],
        context_window=10_000,
    )
    for prompt in ("one", "two", "three"):
        await turn(session, prompt)
    events = await turn(session, "four")
    assert finished(events).stop_reason == "end_turn"  # the turn goes on
    notice = next(e for e in events if isinstance(e, Notice) and "summarise" in e.message)
    assert notice.level == "warning" and "too long" in notice.message
    after = api.message_requests[5]["messages"]
    results = [b for m in after for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["content"] for r in results] == ["[output dropped to save context]"]
    assert "old-42" in str(api.message_requests[1]["messages"])  # it was there before
    assert "old-42" not in str(after)
    assert [m["content"][0].get("text") for m in after if m["role"] == "user"][0] == "one"
    assert_history_valid(after)


async def test_one_long_turn_drops_older_outputs_but_keeps_the_last(
    api: FakeAnthropic, make: MakeSession
) -> None:
    big = {"input_tokens": 9000, "output_tokens": 10}
    session = make(
        [
            {"commands": ["echo out-1"]},
            {"commands": ["echo out-2"], "usage": big},
            {"text": "done"},
        ],
        context_window=10_000,
    )
    events = await turn(session, "only turn")
    assert finished(events).stop_reason == "end_turn"
    assert any(isinstance(e, Notice) and "dropped the output" in e.message for e in events)
    assert api.calls == 3  # nothing to summarise in one turn: no summary call
    last = api.message_requests[2]["messages"]
    results = [b["content"] for m in last for b in m["content"] if b.get("type") == "tool_result"]
    assert results[0] == "[output dropped to save context]"
    assert "out-2" in results[1]  # the result the model is about to read is kept
    assert_history_valid(last)


async def test_compaction_works_on_a_plain_history_without_a_loop(api: FakeAnthropic) -> None:
    def use(i: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": "echo hi"}}

    def text(role: str, words: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "text": words}]}

    history = [
        text("user", "one"),
        {"role": "assistant", "content": [use("t1")]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "hi", "is_error": False}
            ],
        },
        text("assistant", "first answer"),
        text("user", "two"),
        text("assistant", "second answer"),
        text("user", "three"),
        text("assistant", "third answer"),
    ]
    before = json.dumps(history)
    model = ModelClient(api_key=KEY, base_url=api.base_url, model="fake-model")
    window = CompactionSettings(context_window=10_000)

    async def compact(tokens: int, settings: CompactionSettings) -> Compaction | None:
        return await maybe_compact(
            history, context_tokens=tokens, model=lambda: model, settings=settings
        )

    try:
        assert await maybe_compact(history, context_tokens=7_999, model=lambda: model) is None
        assert await compact(7_999, window) is None
        assert api.calls == 0  # below 80 % of the window nothing is asked
        api.add({"text": "SUMMARY: echo hi", "usage": {"input_tokens": 50, "output_tokens": 7}})
        done = await compact(8_000, window)
        assert done is not None and api.calls == 1
        assert json.dumps(history) == before  # the given history is left as it was
        assert "SUMMARY: echo hi" in done.messages[0]["content"][0]["text"]
        assert [m["content"][0]["text"] for m in done.messages[2:]] == [
            "two",
            "second answer",
            "three",
            "third answer",
        ]
        assert done.usage == Usage(50, 7) and "Compacted" in done.notice.message
        assert done.context_tokens > 0
        assert_history_valid(done.messages)
        # Too few turns to summarise: the older outputs are dropped instead, in a copy.
        few = CompactionSettings(context_window=10_000, keep_turns=3)
        dropped = await compact(9_000, few)
        assert dropped is not None and api.calls == 1
        assert dropped.messages[2]["content"][0]["content"] == DROPPED_OUTPUT
        assert json.dumps(history) == before
    finally:
        await model.close()


async def test_a_plan_from_a_command_reaches_the_consumer(make: MakeSession) -> None:
    plan = json.dumps({"plan": [{"step": "look around", "status": "in_progress"}]})
    # the step left in progress gets the one reminder (todoReminder): a third answer
    session = make([{"commands": [f"plan '{plan}'"]}, {"text": "planned"}, {"text": "still"}])
    events = await turn(session, "make a plan")
    assert finished(events).stop_reason == "end_turn"
    plans = [e for e in events if isinstance(e, PlanUpdated)]
    assert [p.entries for p in plans] == [(PlanEntry("look around", "in_progress"),)]


async def test_an_appended_system_prompt_reaches_the_agent_not_its_subagents(
    api: FakeAnthropic, make: MakeSession
) -> None:
    """`synapse chat --append-system-prompt`: the last block of the session's own system
    prompt (so /context counts it); a `task:*` sub-agent's prompt does not carry it."""
    session = make(
        [
            {"commands": ['task:explore --prompt "where is f?" --description "find f"']},
            {"text": "f is nowhere."},
            {"text": "Done."},
        ]
    )
    session.append_system_prompt("Answer like a pirate.")
    await turn(session, "find f")
    systems = [r["system"] for r in api.message_requests]
    assert [s[-1]["text"] == "Answer like a pirate." for s in systems] == [True, False, True]
    assert session._system()[-1]["text"] == "Answer like a pirate."
