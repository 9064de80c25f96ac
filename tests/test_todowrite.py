"""`TodoWrite '<json>'` (Claude Code's shape) next to `plan`: one store, one event, its
validation errors, the `TodoWrite` tool name's hint, and the one reminder when a turn
ends with steps not completed — through the real router, bash and SDK (fake API)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.builtins.plan import current_plan
from synapse_lsp.config import Settings
from synapse_lsp.events import (
    NOTICE_TODO_REMINDER,
    Event,
    Notice,
    PlanEntry,
    PlanUpdated,
    TurnFinished,
)
from synapse_lsp.router import BashRouter

KEY = "sk-ant-todo-test-key"

TODOS = {
    "todos": [
        {"content": "Read the parser", "activeForm": "Reading the parser", "status": "completed"},
        {"content": "Fix quoting", "activeForm": "Fixing quoting", "status": "in_progress"},
        {"content": "Run tests", "activeForm": "Running tests", "status": "pending"},
    ]
}


def quoted(value: Any) -> str:
    return "'" + json.dumps(value).replace("'", "'\\''") + "'"


class Seen:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    @property
    def plans(self) -> list[PlanUpdated]:
        return [e for e in self.events if isinstance(e, PlanUpdated)]


# ------------------------------------------------------------------ the command


async def test_todowrite_sets_the_same_plan_as_plan(router: BashRouter) -> None:
    seen = Seen()
    out = await router.route(f"TodoWrite {quoted(TODOS)}", emit=seen)
    assert out.exit_code == 0 and out.layer.value == "agent"
    assert "Plan updated: 1 of 3 completed, 1 in progress." in out.text
    assert "[>] 2. Fix quoting" in out.text
    (event,) = seen.plans
    assert event.entries == (
        PlanEntry("Read the parser", "completed", "Reading the parser"),
        PlanEntry("Fix quoting", "in_progress", "Fixing quoting"),
        PlanEntry("Run tests", "pending", "Running tests"),
    )
    # one store: `plan` reads and changes what TodoWrite set, activeForm kept
    shown = await router.route("plan show")
    assert "[>] 2. Fix quoting" in shown.text
    await router.route("plan done", emit=seen)
    assert seen.plans[-1].entries[1] == PlanEntry("Fix quoting", "completed", "Fixing quoting")
    assert current_plan(router.state).steps[2].active_form == "Running tests"
    # and TodoWrite replaces what plan set
    await router.route("plan set 'only step'")
    again = await router.route(
        "TodoWrite <<'EOF'\n"
        + json.dumps({"todos": [{"content": "x", "activeForm": "Doing x", "status": "pending"}]})
        + "\nEOF"
    )
    assert again.exit_code == 0
    assert [e.step for e in current_plan(router.state).steps] == ["x"]
    cleared = await router.route("TodoWrite " + quoted({"todos": []}))
    assert cleared.text.startswith("Plan cleared.")
    assert current_plan(router.state).steps == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "not valid JSON"),
        ({"plan": []}, 'expected a JSON object {"todos"'),
        ({"todos": [], "extra": 1}, "unknown field 'extra' (allowed: todos)"),
        ({"todos": "a, b"}, '"todos" must be a list'),
        ({"todos": ["a"]}, "todo 1 must be an object"),
        (
            {"todos": [{"content": "", "status": "pending"}]},
            'todo 1: "content" must be a non-empty',
        ),
        ({"todos": [{"content": "a", "status": "doing"}]}, "todo 1: status 'doing' is not one of"),
        ({"todos": [{"content": "a"}]}, "todo 1: status missing is not one of"),
        ({"todos": [{"content": "a", "status": "pending", "when": 1}]}, "unknown field 'when'"),
        ({"todos": [{"content": "a", "activeForm": 3, "status": "pending"}]}, "activeForm"),
        (
            {
                "todos": [
                    {"content": "a", "status": "in_progress"},
                    {"content": "b", "status": "in_progress"},
                ]
            },
            "at most one todo may be in_progress; todos 1, 2 are",
        ),
        (
            {"todos": [{"content": f"s{i}", "status": "pending"} for i in range(21)]},
            "21 todos; at most 20",
        ),
    ],
)
async def test_todowrite_validation_errors_are_clear_and_change_nothing(
    router: BashRouter, value: Any, message: str
) -> None:
    await router.route("plan set 'kept'")
    seen = Seen()
    text = value if isinstance(value, str) else json.dumps(value)
    line = f"TodoWrite {shlex.quote(text)}"
    out = await router.route(line, emit=seen)
    assert out.exit_code == 2 and out.is_error
    assert message in out.text, out.text
    assert 'Usage help: Bash(command="TodoWrite --help")' in out.text
    assert seen.plans == []
    assert [e.step for e in current_plan(router.state).steps] == ["kept"]


async def test_twenty_todos_are_accepted(router: BashRouter) -> None:
    value = {"todos": [{"content": f"s{i}", "status": "pending"} for i in range(20)]}
    out = await router.route(f"TodoWrite {quoted(value)}")
    assert out.exit_code == 0 and len(current_plan(router.state).steps) == 20


async def test_todowrite_help_and_the_prompt(router: BashRouter) -> None:
    out = await router.route("TodoWrite --help")
    assert out.exit_code == 0
    assert "at most one in_progress" in out.text and "At most 20 items" in out.text


# ------------------------------------------------------------------ the loop


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> AsyncIterator[Callable[..., ChatSession]]:
    models: list[ModelClient] = []

    def factory(**changes: Any) -> ChatSession:
        model = ModelClient(
            api_key=KEY, base_url=api.base_url, model="fake-model", retry_base_delay=0.001
        )
        models.append(model)
        return ChatSession(router, dataclasses.replace(settings, **changes), model=model)

    yield factory
    for model in models:
        await model.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


def reminders(events: list[Event]) -> list[Notice]:
    return [e for e in events if isinstance(e, Notice) and e.code == NOTICE_TODO_REMINDER]


def last_user_text(body: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in body["messages"][-1]["content"])


async def test_the_todowrite_tool_name_gets_the_same_call_as_a_command(
    api: FakeAnthropic, make: Callable[..., ChatSession]
) -> None:
    api.add(
        {"content": [{"type": "tool_use", "name": "TodoWrite", "input": TODOS}]},
        {"commands": [f"TodoWrite {quoted(TODOS)}"]},
        "Planned.",
        "Still working on it next turn.",
    )
    session = make()
    events = await turn(session, "plan it")
    first = api.message_requests[1]["messages"][-1]["content"][0]
    assert first["is_error"] and "Unknown tool 'TodoWrite'" in first["content"]
    assert 'Bash(command="TodoWrite \'{\\"todos\\"' in first["content"]
    assert [p.entries[1].active_form for p in events if isinstance(p, PlanUpdated)] == [
        "Fixing quoting"
    ]


async def test_a_turn_ending_with_steps_not_done_gets_one_reminder(
    api: FakeAnthropic, make: Callable[..., ChatSession]
) -> None:
    api.add(
        {"commands": [f"TodoWrite {quoted(TODOS)}"]},
        "I stop here.",  # two steps not completed: the reminder
        # the model answers the reminder by updating the plan... still not done:
        {"commands": ["plan start 3"]},
        "Stopping anyway.",  # no second reminder in the same turn
    )
    session = make()
    events = await turn(session, "do it")
    done = events[-1]
    assert isinstance(done, TurnFinished) and done.stop_reason == "end_turn"
    assert len(reminders(events)) == 1
    assert api.calls == 4  # one extra model call (and the plan update it made), never a loop
    reminder = last_user_text(api.message_requests[2])
    assert "<system-reminder>" in reminder and "- Fix quoting" in reminder
    assert "- Read the parser" not in reminder  # completed steps are not listed
    # the next turn: the plan changed since the reminder, so one more (per turn, at most)
    api.add("ok", "still ok")
    events = await turn(session, "next")
    assert len(reminders(events)) == 1 and api.calls == 6
    # ... but an unchanged plan is not reminded of again
    api.add("fine")
    events = await turn(session, "and again")
    assert reminders(events) == [] and api.calls == 7


async def test_no_reminder_when_done_or_turned_off(
    api: FakeAnthropic, make: Callable[..., ChatSession]
) -> None:
    done = {"todos": [{"content": "a", "activeForm": "A", "status": "completed"}]}
    api.add({"commands": [f"TodoWrite {quoted(done)}"]}, "All done.")
    session = make()
    events = await turn(session, "x")
    assert reminders(events) == [] and api.calls == 2
    api.add({"commands": [f"TodoWrite {quoted(TODOS)}"]}, "Stopping.")
    off = make(todo_reminder=False)
    events = await turn(off, "y")
    assert reminders(events) == [] and api.calls == 4


async def test_subagents_keep_their_own_plan(
    api: FakeAnthropic, make: Callable[..., ChatSession], workdir: Path
) -> None:
    """A sub-agent's plan is its own (nested under its call), never the session's; and
    a sub-agent gets no reminder."""
    sub = {"todos": [{"content": "sub step", "activeForm": "Subbing", "status": "pending"}]}
    api.add(
        {"commands": ["task:general -p 'plan inside' -d 'sub plan'"]},
        {"commands": [f"TodoWrite {quoted(sub)}"]},
        "sub finished",
        "parent finished",
    )
    session = make()
    events = await turn(session, "delegate")
    plans = [e for e in events if isinstance(e, PlanUpdated)]
    assert len(plans) == 1 and plans[0].parent_tool_call_id is not None
    assert current_plan(session.router.state).steps == ()
    assert reminders(events) == [] and api.calls == 4
