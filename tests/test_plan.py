"""The `plan` / `todo` built-in: Codex update_plan JSON, the short forms, every
validation error, session state and the PlanUpdated event, through the real router."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.builtins.plan import PlanCommand
from synapse_lsp.commands import CommandContext, FailureCategory, Layer
from synapse_lsp.config import Settings
from synapse_lsp.events import PlanEntry, PlanUpdated
from synapse_lsp.files import DiskFiles
from synapse_lsp.router import BashRouter, RouteResult

THREE = {
    "explanation": "fix the quoting bug",
    "plan": [
        {"step": "Read the parser", "status": "completed"},
        {"step": "Fix quoting", "status": "in_progress"},
        {"step": "Run tests", "status": "pending"},
    ],
}


def _quoted(value: Any) -> str:
    return "'" + json.dumps(value).replace("'", "'\\''") + "'"


class Events:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.seen.append(event)

    @property
    def plans(self) -> list[PlanUpdated]:
        return [e for e in self.seen if isinstance(e, PlanUpdated)]


# ------------------------------------------------------- direct (no shell)


async def test_json_argument_direct(tmp_path: Path) -> None:
    events = Events()
    state: dict[str, Any] = {}
    ctx = CommandContext(
        cwd=tmp_path,
        settings=Settings(synapse_home=tmp_path / "home"),
        files=DiskFiles(),
        state=state,
        emit=events,
    )
    out = await PlanCommand().run([json.dumps(THREE)], ctx)
    assert out.exit_code == 0
    assert out.data == THREE
    assert state["plan"] == THREE
    assert events.plans == [
        PlanUpdated(
            entries=(
                PlanEntry("Read the parser", "completed"),
                PlanEntry("Fix quoting", "in_progress"),
                PlanEntry("Run tests", "pending"),
            ),
            explanation="fix the quoting bug",
        )
    ]
    assert out.stdout == (
        "Plan updated: 1 of 3 completed, 1 in progress.\n"
        "Why: fix the quoting bug\n"
        "[x] 1. Read the parser\n"
        "[>] 2. Fix quoting\n"
        "[ ] 3. Run tests\n"
    )


# ------------------------------------------------------- through the router


@pytest.fixture
def events() -> Events:
    return Events()


async def test_plan_is_an_agent_builtin(router: BashRouter) -> None:
    assert router.layer_of("plan set a") is Layer.AGENT
    assert router.layer_of("todo set a") is Layer.AGENT


async def test_json_argument_via_router(router: BashRouter, events: Events) -> None:
    result = await router.route(f"plan {_quoted(THREE)}", emit=events)
    assert result.exit_code == 0, result.text
    assert result.data == THREE
    assert router.state["plan"] == THREE
    assert len(events.plans) == 1


async def test_heredoc_json_and_todo_alias(router: BashRouter, events: Events) -> None:
    body = json.dumps({"plan": [{"step": "only step", "status": "in_progress"}]}, indent=2)
    result = await router.route(f"todo <<'EOF'\n{body}\nEOF", emit=events)
    assert result.exit_code == 0, result.text
    assert result.data == {
        "plan": [{"step": "only step", "status": "in_progress"}],
        "explanation": None,
    }
    assert events.plans[0].entries == (PlanEntry("only step", "in_progress"),)


async def test_empty_plan_clears(router: BashRouter, events: Events) -> None:
    await router.route(f"plan {_quoted(THREE)}", emit=events)
    result = await router.route("plan '{\"plan\": []}'", emit=events)
    assert result.exit_code == 0
    assert result.stdout == "Plan cleared.\n"
    assert router.state["plan"] == {"plan": [], "explanation": None}
    assert events.plans[-1] == PlanUpdated(entries=(), explanation=None)


async def test_short_forms(router: BashRouter, events: Events) -> None:
    def steps(r: RouteResult) -> list[tuple[str, str]]:
        return [(s["step"], s["status"]) for s in r.data["plan"]]

    r = await router.route('plan set "Read code" "Fix bug" --explanation "bug 12"', emit=events)
    assert steps(r) == [("Read code", "pending"), ("Fix bug", "pending")]
    assert r.data["explanation"] == "bug 12"
    r = await router.route('plan add "Run tests"', emit=events)
    assert steps(r)[-1] == ("Run tests", "pending")
    assert r.data["explanation"] == "bug 12"  # kept by short forms
    r = await router.route("plan start 1", emit=events)
    assert steps(r)[0] == ("Read code", "in_progress")
    r = await router.route("plan start 2", emit=events)  # finishes the step in progress
    assert steps(r)[:2] == [("Read code", "completed"), ("Fix bug", "in_progress")]
    r = await router.route("plan done", emit=events)
    assert steps(r)[1] == ("Fix bug", "completed")
    r = await router.route("plan done 3", emit=events)
    assert [s for _, s in steps(r)] == ["completed"] * 3
    assert len(events.plans) == 6
    shown = await router.route("plan", emit=events)
    assert shown.stdout.startswith("Plan: 3 of 3 completed, 0 in progress.\n")
    assert len(events.plans) == 6  # showing emits nothing
    r = await router.route("plan clear", emit=events)
    assert r.data["plan"] == []


async def test_flag_form(router: BashRouter) -> None:
    r = await router.route(
        'plan --step "a" --status completed --step "b" --status=in_progress --step=c'
    )
    assert r.exit_code == 0, r.text
    assert r.data["plan"] == [
        {"step": "a", "status": "completed"},
        {"step": "b", "status": "in_progress"},
        {"step": "c", "status": "pending"},
    ]


async def test_show_when_empty(router: BashRouter) -> None:
    r = await router.route("plan show")
    assert r.exit_code == 0
    assert "No plan yet" in r.stdout
    assert r.data == {"plan": [], "explanation": None}


async def test_help_forms(router: BashRouter) -> None:
    short = await router.route("plan -h")
    assert short.exit_code == 0 and short.stdout.startswith("plan ")
    full = await router.route("todo --help")
    assert "in_progress" in full.stdout and "plan done [N]" in full.stdout


def _bad(**changes: Any) -> str:
    return _quoted({**THREE, **changes})


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (f"plan {_bad(extra=1)}", "unknown field 'extra' (allowed: explanation, plan)"),
        ("plan '{\"explanation\": \"x\"}'", 'missing field "plan"'),
        ("plan '{\"plan\": {}}'", '"plan" must be a list'),
        ("plan '[1, 2]'", "expected a JSON object"),
        ("plan '{\"plan\": [], \"explanation\": 3}'", '"explanation" must be a string'),
        ("plan '{\"plan\": [\"step\"]}'", "plan item 1 must be an object"),
        ("plan '{\"plan\": [{\"step\": \"a\", \"status\": \"done\"}]}'",
         "step 1: status 'done' is not one of: pending, in_progress, completed"),
        ("plan '{\"plan\": [{\"step\": \"a\"}]}'",
         "step 1: status missing is not one of: pending, in_progress, completed"),
        ("plan '{\"plan\": [{\"step\": \"a\", \"status\": \"pending\", \"note\": 1}]}'",
         "plan item 1: unknown field 'note' (allowed: step, status)"),
        ("plan '{\"plan\": [{\"step\": \" \", \"status\": \"pending\"}]}'",
         '"step" must be a non-empty string'),
        (f"plan {_bad(plan=[{'step': 'a', 'status': 'in_progress'}, {'step': 'b', 'status': 'in_progress'}])}",  # noqa: E501
         "at most one step may be in_progress; steps 1, 2 are"),
        ("plan '{\"plan\": [}'", "the argument is not valid JSON"),
        ('plan {"plan": []}', "the JSON must be one quoted argument"),
        ("plan set", "set needs at least one step"),
        ("plan add", "add needs at least one step"),
        ("plan start 4", "start: there is no step 4 (the plan is empty)"),
        ("plan done x", "done: 'x' is not a step number"),
        ("plan done", "no step is in progress"),
        ("plan finish 1", "unknown subcommand 'finish'"),
        ("plan --status pending", "unknown option --status"),
        ('plan --step a --status doing', "step 1: status 'doing' is not one of"),
        ('plan --step a --bogus', "unknown option --bogus"),
        ('plan --step a b', "unexpected word 'b'"),
        ('plan --step', "--step needs a value"),
        ('plan --explanation', "--explanation needs a value"),
        ('plan --explanation why', "--explanation needs a plan change with it"),
        ("plan clear now", "clear takes no arguments"),
        ('plan set "a" ""', "a step must not be empty"),
    ],
)  # fmt: skip
async def test_validation_errors(
    router: BashRouter, events: Events, command: str, message: str
) -> None:
    await router.route(f"plan {_quoted({'plan': []})}")  # known starting point: empty
    before = dict(router.state)
    result = await router.route(command, emit=events)
    assert result.exit_code == 2
    assert result.category is FailureCategory.INVALID_USAGE
    assert message in result.stderr
    assert 'Bash(command="plan --help")' in result.stderr
    assert router.state == before  # nothing half-applied
    assert events.plans == []


async def test_state_is_per_router_session(router: BashRouter) -> None:
    await router.route('plan set "mine"')
    other = router.derive(state={})
    shown = await other.route("plan")
    assert "No plan yet" in shown.stdout
    assert router.state["plan"]["plan"] == [{"step": "mine", "status": "pending"}]
