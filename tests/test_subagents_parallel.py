"""Parallel sub-agents end to end: the real SDK against the fake Messages API, real bash.

Adjacent `task:*` calls of one response run concurrently (proved by timestamps the
commands write themselves, never by wall time), each sub-agent in a shell of its own
(its `$$`), results in call order, a mixed response in order, the cap
(`maxParallelTasks`) queues the rest, permission questions one at a time, cancel
stops them all, and the editor sees each sub-agent's updates nested under its call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic, normalize_response
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.cli.render import Renderer
from synapse_lsp.config import Settings
from synapse_lsp.events import Event, ToolCallFinished, ToolCallStarted, TurnFinished
from synapse_lsp.policy.gate import ALLOW_ONCE, AskingGate
from synapse_lsp.question import Question
from synapse_lsp.router import BashRouter

KEY = "sk-ant-parallel-test-key"
SUB = "SUB:"  # sub-agent prompts start with it: the fake API answers them by their state


class SubAgentAPI(FakeAnthropic):
    """The fake API, answering sub-agents by what their request holds (their calls
    interleave in any order): a sub-agent's first call gets `sub_command` (the same for
    all), a call after a tool result gets `sub_final`, a template naming its prompt and
    the command's output. The parent's calls take the scripted queue."""

    def __init__(self) -> None:
        super().__init__([])
        self.sub_command: str = "true"
        self.sub_final = normalize_response(
            {"template": True, "text": "report on {last_user_text}: {last_tool_result}"}
        )

    def _next(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        messages = (body or {}).get("messages", [])
        first = messages[0]["content"] if messages else []
        text = first[0].get("text", "") if isinstance(first, list) and first else str(first)
        if not text.startswith(SUB):
            return super()._next(body)
        last = messages[-1]["content"]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
            return self.sub_final
        return normalize_response({"commands": [self.sub_command]})


@pytest.fixture
async def api() -> AsyncIterator[SubAgentAPI]:
    server = SubAgentAPI()
    async with server:
        yield server


MakeSession = Callable[..., ChatSession]


@pytest.fixture
async def make(api: SubAgentAPI, router: BashRouter, settings: Settings) -> AsyncIterator[Any]:
    models: list[ModelClient] = []

    def factory(*, router_: BashRouter | None = None, **changes: Any) -> ChatSession:
        model = ModelClient(
            api_key=KEY, base_url=api.base_url, model="fake-model", retry_base_delay=0.001
        )
        models.append(model)
        return ChatSession(router_ or router, dataclasses.replace(settings, **changes), model=model)

    yield factory
    for model in models:
        await model.close()


def task(name: str, *flags: str) -> str:
    return f"task:general -p '{SUB} {name}' -d 'sub-agent {name}' " + " ".join(flags)


def stamps(path: Path) -> dict[str, dict[str, float]]:
    """`<pid> start|end <time>` lines -> {pid: {"start": t, "end": t}}."""
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        pid, what, when = line.split()
        out.setdefault(pid, {})[what] = float(when)
    return out


def stamp_command(sleep: str) -> str:
    return (
        'echo "$$ start $(date +%s.%N)" >> stamps.txt; '
        "n=$(flock arrivals.lock sh -c 'echo x >> arrivals.txt; wc -l < arrivals.txt'); "
        f"sleep {sleep}; "
        'echo "$$ end $(date +%s.%N)" >> stamps.txt; echo "pid=$$ n=$n"'
    )


def top_calls(events: list[Event]) -> list[ToolCallStarted]:
    return [e for e in events if isinstance(e, ToolCallStarted) and e.parent_tool_call_id is None]


def finished(events: list[Event]) -> TurnFinished:
    last = events[-1]
    assert isinstance(last, TurnFinished), last
    return last


async def run(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pids: list[int]) -> bool:
    for _ in range(200):  # a closed shell's bash is reaped promptly; bounded wait
        if not any(alive(p) for p in pids):
            return True
        await asyncio.sleep(0.05)
    return False


# ------------------------------------------------------------------ concurrency


async def test_three_task_calls_run_concurrently_in_own_shells_results_in_call_order(
    api: SubAgentAPI, make: MakeSession, workdir: Path, router: BashRouter
) -> None:
    # The first to arrive sleeps longest, so they finish in the reverse of arriving.
    api.sub_command = stamp_command("0.$(( (4 - n) * 3 ))")
    api.add({"commands": [task("alpha"), task("beta"), task("gamma")]}, "all three reported")
    session = make()
    events = await run(session, "fan out")
    assert finished(events).stop_reason == "end_turn"

    times = stamps(workdir / "stamps.txt")
    assert len(times) == 3  # three different `$$`: three shells
    assert str(router.shell.pid) not in times  # none of them the session's own shell
    assert max(t["start"] for t in times.values()) < min(t["end"] for t in times.values())

    calls = top_calls(events)
    assert [c.command for c in calls] == [task("alpha"), task("beta"), task("gamma")]
    ids = [c.tool_call_id for c in calls]
    # each sub-agent's events are nested under its own call
    for call_id in ids:
        nested = [e for e in events if getattr(e, "parent_tool_call_id", None) == call_id]
        assert [e.command for e in nested if isinstance(e, ToolCallStarted)] == [api.sub_command]
    # results go back in call order, each carrying its own sub-agent's report
    body = api.message_requests[-1]
    results = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ids
    for result, name in zip(results, ("alpha", "beta", "gamma"), strict=True):
        assert f"report on {SUB} {name}:" in result["content"] and not result["is_error"]
    # ... although they finished in another order: the last to arrive (n=3) first
    arrival = {c.tool_call_id: int(r["content"].split("n=")[1].split()[0]) for c, r in
               zip(calls, results, strict=True)}  # fmt: skip
    done_order = [
        e.tool_call_id for e in events if isinstance(e, ToolCallFinished) and e.tool_call_id in ids
    ]
    assert done_order == sorted(ids, key=lambda i: -arrival[i])
    # every sub-agent's shell was closed when it finished
    pids = [int(p) for p in times]
    assert await gone(pids)
    # the terminal labels each nested command with its sub-agent while several run
    out, activity = io.StringIO(), io.StringIO()
    renderer = Renderer(out, activity, one_shot=False)
    for event in events:
        renderer.show(event)
    shown = activity.getvalue()
    for name in ("alpha", "beta", "gamma"):
        assert f"\u25b8 [sub-agent {name}] Run `echo" in shown
    assert "all three reported" in out.getvalue()


async def test_the_cap_queues_the_rest(api: SubAgentAPI, make: MakeSession, workdir: Path) -> None:
    api.sub_command = stamp_command("0.5")
    api.add({"commands": [task("a"), task("b"), task("c")]}, "done")
    session = make(max_parallel_tasks=2)
    events = await run(session, "fan out, two at a time")
    assert finished(events).stop_reason == "end_turn"
    spans = sorted(stamps(workdir / "stamps.txt").values(), key=lambda t: t["start"])
    assert len(spans) == 3
    first, second, third = spans
    assert second["start"] < first["end"]  # two together
    assert third["start"] >= min(first["end"], second["end"])  # the third waited for a slot


async def test_a_mixed_response_keeps_its_order(
    api: SubAgentAPI, make: MakeSession, workdir: Path
) -> None:
    """`edit`, then a task, then a native command, then two tasks: only the two adjacent
    tasks run together; everything else in order."""
    (workdir / "f.txt").write_text("old\n")
    api.sub_command = 'echo "task saw $(cat f.txt)" >> order.txt; sleep 0.3'
    api.add(
        {
            "commands": [
                "edit f.txt old new",
                task("one"),
                "echo native >> order.txt",
                task("two"),
                task("three"),
            ]
        },
        "ok",
    )
    session = make()
    events = await run(session, "mixed")
    assert finished(events).stop_reason == "end_turn"
    lines = (workdir / "order.txt").read_text().splitlines()
    # the task after the edit saw it; the native command ran after the first task ended
    assert lines == ["task saw new", "native", "task saw new", "task saw new"]
    calls = [c.command for c in top_calls(events)]
    assert calls[:3] == ["edit f.txt old new", task("one"), "echo native >> order.txt"]
    results = [
        b for b in api.message_requests[-1]["messages"][-1]["content"] if b["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == [c.tool_call_id for c in top_calls(events)]


async def test_permission_questions_of_parallel_subagents_are_asked_one_at_a_time(
    api: SubAgentAPI, make: MakeSession, router: BashRouter, settings: Settings, workdir: Path
) -> None:
    asked: list[str] = []
    active = 0
    most = 0

    async def ask(question: Question) -> str:
        message = question.message
        nonlocal active, most
        active += 1
        most = max(most, active)
        asked.append(message)
        await asyncio.sleep(0.2)  # the user thinks; another question must wait
        active -= 1
        return ALLOW_ONCE

    asking = dataclasses.replace(settings, permission="ask-all-native")
    gate = AskingGate(asking, workdir, ask)
    api.sub_command = "touch made-by-$$"
    api.add({"commands": [task("x"), task("y"), task("z")]}, "done")
    session = make(router_=router.derive(permission=gate), permission="ask-all-native")
    events = await run(session, "ask three times")
    assert finished(events).stop_reason == "end_turn"
    assert len(asked) == 3 and most == 1
    assert len(list(workdir.glob("made-by-*"))) == 3


async def test_cancel_stops_every_parallel_subagent(
    api: SubAgentAPI, make: MakeSession, workdir: Path
) -> None:
    api.sub_command = 'echo "$$" >> pids.txt; sleep 30; echo finished >> ended.txt'
    api.add({"commands": [task("p"), task("q"), task("r"), "echo after >> ended.txt"]})
    session = make()
    events: list[Event] = []
    async for event in session.run_turn("start three and cancel"):
        events.append(event)
        sleeping = [e for e in events if isinstance(e, ToolCallStarted) and e.parent_tool_call_id]
        if isinstance(event, ToolCallStarted) and len(sleeping) == 3:
            for _ in range(200):  # each sleep is running (its pid written)
                written = (
                    (workdir / "pids.txt").read_text().split()
                    if (workdir / "pids.txt").exists()
                    else []
                )
                if len(written) == 3:
                    break
                await asyncio.sleep(0.02)
            session.cancel()
    assert finished(events).stop_reason == "cancelled"
    calls = top_calls(events)
    task_ids = [c.tool_call_id for c in calls[:3]]
    ended = {e.tool_call_id: e.status for e in events if isinstance(e, ToolCallFinished)}
    assert all(ended[i] == "cancelled" for i in task_ids)
    nested = [e for e in events if isinstance(e, ToolCallFinished) and e.parent_tool_call_id]
    assert len(nested) == 3 and all(e.status == "cancelled" for e in nested)
    assert not (workdir / "ended.txt").exists()  # no sleep finished, the last call never ran
    results = session.messages[-1]["content"]
    assert [r["content"].startswith("[Cancelled]") for r in results] == [True] * 4
    assert "Not run" in results[3]["content"]
    pids = [int(p) for p in (workdir / "pids.txt").read_text().split()]
    assert await gone(pids)  # the sub-agents' shells are closed
    # the session goes on
    api.add("fine")
    assert finished(await run(session, "again")).stop_reason == "end_turn"


async def test_task_flags_model_and_max_turns(api: SubAgentAPI, make: MakeSession) -> None:
    api.sub_command = "true"
    line = task("m", "--model other-model", "--max-turns 1")
    api.add({"commands": [line, task("n")]}, "done")
    session = make()
    events = await run(session, "flags")
    assert finished(events).stop_reason == "end_turn"
    subs = [
        b for b in api.message_requests if b["messages"][0]["content"][0]["text"].startswith(SUB)
    ]
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for body in subs:
        by_prompt.setdefault(body["messages"][0]["content"][0]["text"], []).append(body)
    assert [b["model"] for b in by_prompt[f"{SUB} m"]] == ["other-model"]  # one call: the limit
    assert {b["model"] for b in by_prompt[f"{SUB} n"]} == {"fake-model"}
    done = {e.tool_call_id: e for e in events if isinstance(e, ToolCallFinished)}
    first = done[top_calls(events)[0].tool_call_id]
    assert first.is_error and "stopped early (max_turns)" in first.text
    assert first.data["subagent"]["max_turns"] == 1
    assert first.data["subagent"]["model"] == "other-model"
    bad = await session.router.route("task:general -p x --max-turns 0")
    assert bad.exit_code == 2 and "--max-turns must be 1 or more" in bad.text


# ------------------------------------------------------------------ the editor


async def test_lsp_updates_nest_each_subagent_under_its_call(tmp_path: Path) -> None:
    from tests.lsp_client import editor

    proj = tmp_path / "proj"
    proj.mkdir()
    api = SubAgentAPI()
    async with api:
        api.sub_command = "echo hello from $$"
        api.add({"commands": [task("left"), task("right")]}, "both done")
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
        async with editor(tmp_path / "home", [proj], env=env) as ed:
            created = await ed.command("synapse.session.new", {})
            sid = created["sessionId"]
            result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            assert result["stopReason"] == "end_turn"
            updates = ed.session_updates(sid)
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    top = [u["toolCallId"] for u in calls if "parentToolCallId" not in u]
    assert len(top) == 2
    for call_id in top:
        mine = [u for u in updates if u.get("parentToolCallId") == call_id]
        kinds = {u["sessionUpdate"] for u in mine}
        assert {"tool_call", "tool_call_update", "agent_message_chunk"} <= kinds
        text = "".join(
            u["content"]["text"] for u in mine if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert text.startswith("report on SUB:")
    assert json.dumps(updates).count('"parentToolCallId"') > 4
