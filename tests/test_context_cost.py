"""Context and cost (issue 19, item 3), end to end with the real SDK against the fake
Messages API: `/context` by part (counted with the API's token counting, estimated when
it fails), `/compact [focus]`, large old outputs offloaded to files only at a compaction
and read back by the model, per-turn and per-session cost from the pricing table, stored
with the session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.compaction import OFFLOADED_PREFIX
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.pricing import MODELS, context_window, price_of, spend_cost
from synapse_lsp.agent.prompts import bash_tool
from synapse_lsp.agent.scripted_api import FakeAnthropic, fake_token_count
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.config import LiveSettings, ModelPrice, Settings
from synapse_lsp.events import Event, Notice, ToolCallFinished, TurnFinished, Usage
from synapse_lsp.question import Question
from synapse_lsp.router import BashRouter
from tests.slash_host import SessionHost

KEY = "sk-ant-context-test-key"
SONNET = "claude-sonnet-5-5"  # the default model, Sonnet-tier price
MakeSession = Callable[..., ChatSession]
LISTING = "seq -f 'row %g of the long listing' 1 150"  # 150 lines, ~4 KB: offloaded


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
def store(settings: Settings) -> ChatStore:
    return ChatStore(settings.synapse_home / "sessions")


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings, store: ChatStore
) -> AsyncIterator[MakeSession]:
    models: list[ModelClient] = []
    sessions: list[ChatSession] = []

    def factory(*script: Any, model: str = SONNET, **kw: Any) -> ChatSession:
        api.add(*script)
        client = ModelClient(
            api_key=KEY, base_url=api.base_url, model=model, retry_base_delay=0.001
        )
        models.append(client)
        session = ChatSession(
            kw.pop("router", router),
            kw.pop("settings", settings),
            model=client,
            store=kw.pop("store", store),
            **kw,
        )
        sessions.append(session)
        return session

    yield factory
    for session in sessions:
        await session.close()
    for client in models:
        await client.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


def finished(events: list[Event]) -> TurnFinished:
    last = events[-1]
    assert isinstance(last, TurnFinished), last
    return last


# ------------------------------------------------------------------- /context


async def test_context_parts_are_counted_by_the_api_and_add_up(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make({"commands": ["seq 1 400"]}, "counted them")
    assert finished(await turn(session, "count to 400")).stop_reason == "end_turn"
    report = await session.context_report()
    assert report.source == "counted" and report.note is None
    assert len(api.count_requests) == 4  # all; no system; no tool; no last outputs
    system, tools = session._system(), [bash_tool()]
    whole = {"system": system, "tools": tools, "messages": session.messages}
    assert report.total == fake_token_count(whole)
    assert report.system == fake_token_count(whole) - fake_token_count(
        {"tools": tools, "messages": session.messages}
    )
    # By difference, as the report counts it: (tools + messages) - messages (the rounding
    # of ceil(chars / 4) depends on where the parts meet, so not the tools' own count).
    with_tools = fake_token_count({"tools": tools, "messages": session.messages})
    assert report.tools == with_tools - fake_token_count({"messages": session.messages}) > 0
    assert report.tool_outputs > 400 // 4  # the output of `seq 1 400` is in the last turn
    assert report.system + report.tools + report.history + report.tool_outputs == report.total
    assert report.window == context_window(SONNET) == MODELS[SONNET].context_window
    # The scripted answers were not touched by the counting.
    assert api.calls == 2
    shown = await SESSION_COMMANDS.run(SessionHost(session), "/context")
    assert "counted by the API" in shown and f"{report.total:,} of 200,000" in shown
    assert "Last tool outputs" in shown


async def test_context_is_estimated_when_the_api_cannot_count(
    router: BashRouter, settings: Settings, store: ChatStore
) -> None:
    async with FakeAnthropic(["hello"], count_tokens=False) as api:
        client = ModelClient(api_key=KEY, base_url=api.base_url, model="some-new-model")
        session = ChatSession(router, settings, model=client, store=store)
        try:
            await turn(session, "hi")
            report = await session.context_report()
            assert report.source == "estimated"
            assert report.note is not None and "404" in report.note
            assert report.total > 0 and report.history > 0 and report.tool_outputs == 0
            assert report.window == 200_000  # an unknown model: the fallback window
            assert "estimated" in report.text()
        finally:
            await session.close()
            await client.close()


# ------------------------------------------------------------------- /compact


async def test_compact_with_a_focus_reaches_the_summary_request(
    api: FakeAnthropic, make: MakeSession
) -> None:
    session = make("first answer", "second answer", "SUMMARY: all about parsers.", "third")
    await turn(session, "one")
    await turn(session, "two")
    answer = await SESSION_COMMANDS.run(SessionHost(session), "/compact the parser bug")
    assert "Compacted the conversation" in answer
    summary_request = api.message_requests[2]
    assert "tools" not in summary_request
    assert "focus on: the parser bug" in summary_request["system"]
    assert "first answer" in summary_request["messages"][0]["content"]
    await turn(session, "three")
    after = api.message_requests[3]["messages"]
    assert "SUMMARY: all about parsers." in after[0]["content"][0]["text"]
    assert [b["text"] for b in after[-1]["content"]] == ["three"]
    assert "first answer" not in json.dumps(after)  # summarised away
    # the compaction is in the stored record too
    assert "SUMMARY" in json.dumps(session.store.load(session.id).messages)  # type: ignore[union-attr]


# -------------------------------------------------------------------- offload


async def test_large_old_outputs_are_offloaded_only_at_a_compaction_and_read_back(
    api: FakeAnthropic, workdir: Path, tmp_path: Path
) -> None:
    """Default settings (workspace-write sandbox, ask before writes outside): the model
    reads the offloaded file with `read` and nobody is asked anything."""
    from synapse_lsp.core import Workspace

    home = tmp_path / "home"
    live = LiveSettings({"SYNAPSE_HOME": str(home), "SYNAPSE_SANDBOX": "workspace-write"})
    assert live().sandbox == "workspace-write" and live().permission == (
        "ask-writes-outside-workspace"
    )
    asked: list[str] = []

    async def ask(question: Question) -> str | None:
        asked.append(question.message)
        return "Deny"

    workspace = Workspace(workdir, live, ask=ask, extensions=False)
    router = await workspace.start()
    client = ModelClient(api_key=KEY, base_url=api.base_url, model=SONNET)
    store = ChatStore(home / "sessions")
    session = ChatSession(router, live, model=client, store=store, workspace_root=workdir)
    try:
        api.add({"commands": [LISTING]}, "150 rows", "ok two", "ok three")
        await turn(session, "one")
        await turn(session, "two")
        await turn(session, "three")
        second, third = api.message_requests[2], api.message_requests[3]
        # Ordinary turns never rewrite earlier turns: the bytes before the newest
        # message (which carries the cache breakpoint) are the same from call to call.
        prefix = len(second["messages"]) - 1
        assert json.dumps(second["messages"][:prefix]) == json.dumps(third["messages"][:prefix])
        assert "row 149 of the long listing\\nrow 150" in json.dumps(third["messages"])
        assert not (store.folder(session.id) / "offload").exists()

        api.add("SUMMARY: listed 150 rows.")
        answer = await session.compact()
        assert "moved to files" in answer
        saved = store.folder(session.id) / "offload"
        files = list(saved.iterdir())
        assert len(files) == 1
        assert files[0].read_text().splitlines()[-1] == "row 150 of the long listing"
        summary_text = session.messages[0]["content"][0]["text"]
        assert str(files[0]) in summary_text and LISTING in summary_text
        # The model reads it back, in the sandboxed session, without a question.
        api.add({"commands": [f"read {files[0]}"]}, "read it")
        events = await turn(session, "what was the last number?")
        result = next(e for e in events if isinstance(e, ToolCallFinished))
        assert result.status == "completed", result.text
        assert "row 149 of the long listing" in result.text and asked == []
        # A fork has its own copies, and its history names them: deleting the original
        # loses nothing of the fork.
        fork = store.fork(session.id)
        copied = store.folder(fork.id) / "offload" / files[0].name
        assert copied.read_text() == files[0].read_text()
        await session.close()
        store.delete(session.id)
        history = json.dumps(store.load(fork.id).messages)
        assert str(copied) in history and str(files[0]) not in history
        assert copied.is_file()
    finally:
        await session.close()
        await client.close()
        await workspace.close()


async def test_a_compaction_offloads_large_outputs_of_kept_turns_before_the_last(
    api: FakeAnthropic, make: MakeSession
) -> None:
    """Automatic compaction keeps two turns: the older kept turn's large output becomes a
    reference, the current turn's output stays in the history."""
    big = {"input_tokens": 9000, "output_tokens": 10}
    session = make(
        "first",
        {"commands": [LISTING]},
        "second",
        {"commands": ["seq -f 'now %g' 1 150"], "usage": big},
        "SUMMARY: earlier stuff.",
        "fourth",
        context_window=10_000,
    )
    await turn(session, "one")
    await turn(session, "two")
    events = await turn(session, "three")
    assert finished(events).stop_reason == "end_turn"
    assert any(isinstance(e, Notice) and "moved to files" in e.message for e in events)
    last = api.message_requests[-1]["messages"]
    results = [b["content"] for m in last for b in m["content"] if b.get("type") == "tool_result"]
    assert len(results) == 2
    assert results[0].startswith(OFFLOADED_PREFIX) and "read it with: read" in results[0]
    assert "now 149\nnow 150" in results[1]  # the current turn's output is kept
    path = Path(results[0][len(OFFLOADED_PREFIX) :].split(":", 1)[0])
    assert (
        path.read_text()
        .rstrip()
        .endswith("row 149 of the long listing\nrow 150 of the long listing")
    )


# ----------------------------------------------------------------------- cost


def expected_cost(usage: Usage, price: ModelPrice) -> float:
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / 1e6


USAGE_A = {
    "input_tokens": 1200,
    "output_tokens": 300,
    "cache_creation_input_tokens": 5000,
    "cache_read_input_tokens": 40000,
}
USAGE_B = {
    "input_tokens": 700,
    "output_tokens": 90,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 45000,
}


async def test_turn_and_session_cost_follow_the_pricing_table(
    make: MakeSession, store: ChatStore, router: BashRouter, settings: Settings
) -> None:
    session = make(
        {"commands": ["echo hi"], "usage": USAGE_A},
        {"text": "done", "usage": USAGE_B},
        {"text": "again", "usage": USAGE_B},
    )
    await turn(session, "one")
    price = price_of(SONNET)
    assert price == ModelPrice(3.0, 15.0, 3.75, 0.30)
    turn_one = Usage(**USAGE_A) + Usage(**USAGE_B)
    assert session.turn_cost().usage == turn_one
    assert session.turn_cost().amount == pytest.approx(expected_cost(turn_one, price))
    await turn(session, "two")
    assert session.turn_cost().amount == pytest.approx(expected_cost(Usage(**USAGE_B), price))
    total = turn_one + Usage(**USAGE_B)
    assert session.session_cost().usage == total == session.usage
    assert session.session_cost().amount == pytest.approx(expected_cost(total, price))
    shown = await SESSION_COMMANDS.run(SessionHost(session), "/cost")
    assert f"${expected_cost(total, price):.4f}" in shown and "Session: 2,600 in" in shown

    # Stored with the session: a resume has the same totals (and /resume says so).
    sid = session.id
    await session.close()
    again = ChatSession.resume(store, sid, router, settings)
    try:
        assert again.session_cost().usage == total
        assert again.session_cost().amount == pytest.approx(expected_cost(total, price))
        assert again.spend == {SONNET: total}
    finally:
        await again.close()


async def test_an_unknown_model_shows_tokens_and_cost_unknown_unless_priced(
    make: MakeSession, settings: Settings
) -> None:
    session = make({"text": "hi", "usage": USAGE_B}, model="claude-future-9")
    await turn(session, "hello")
    cost = session.session_cost()
    assert cost.amount is None and cost.unpriced == ("claude-future-9",)
    assert cost.usage == Usage(**USAGE_B)
    shown = await SESSION_COMMANDS.run(SessionHost(session), "/cost")
    assert "cost unknown" in shown and "claude-future-9" in shown and "700 in" in shown
    # The `pricing` setting prices it (cache prices default to 1.25x / 0.1x input).
    priced, problems = settings.with_overrides(
        {"pricing": {"claude-future-9": {"input": 2, "output": 10}}}
    )
    assert problems == []
    session.settings_source = lambda: priced
    expected = expected_cost(Usage(**USAGE_B), ModelPrice(2.0, 10.0, 2.5, 0.2))
    assert session.session_cost().amount == pytest.approx(expected)


def test_pricing_lookup_is_exact_dated_or_overridden() -> None:
    assert price_of("claude-sonnet-4-5-20250929") == price_of("claude-sonnet-4-5")
    assert price_of("claude-3-5-haiku-latest") == ModelPrice(0.8, 4.0, 1.0, 0.08)
    assert price_of("claude-opus-4-7") is None  # not the price of claude-opus-4
    settings, problems = Settings().with_overrides(
        {"pricing": {"claude-sonnet-4-5": {"input": 1, "output": 2, "cacheRead": 0}}}
    )
    assert problems == []
    assert price_of("claude-sonnet-4-5", settings.pricing) == ModelPrice(1.0, 2.0, 1.25, 0.0)
    _, bad = Settings().with_overrides({"pricing": {"m": {"input": -1, "output": 2}}})
    assert bad and "must be a number >= 0" in bad[0]
    _, missing = Settings().with_overrides({"pricing": {"m": {"input": 1}}})
    assert missing and "input, output (required)" in missing[0]
    mixed = spend_cost({SONNET: Usage(1_000_000, 0), "synapse-demo": Usage(5, 5)})
    assert mixed.amount == pytest.approx(3.0) and mixed.unpriced == ()


def test_pricing_is_read_only_from_the_home_settings_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "repo"
    (folder / ".synapse").mkdir(parents=True)
    price = {"pricing": {"my-model": {"input": 1, "output": 5}}}
    (home / "settings.json").write_text(json.dumps(price))
    (folder / ".synapse" / "settings.json").write_text(
        json.dumps({"pricing": {"my-model": {"input": 0, "output": 0}}})
    )
    live = LiveSettings({"SYNAPSE_HOME": str(home)}, folder=folder)
    assert live().pricing.get("my-model") == ModelPrice(1.0, 5.0, 1.25, 0.1)
    assert any("pricing" in p for p in live.problems)  # the folder's is refused


async def test_a_subagent_on_another_model_is_priced_at_its_own_price(
    make: MakeSession,
) -> None:
    haiku = "claude-haiku-4-5"
    line = f'task:general -p "count the files" -d "count" --model {haiku}'
    session = make(
        {"commands": [line], "usage": USAGE_A},
        {"text": "3 files", "usage": USAGE_B},  # the sub-agent's answer, on haiku
        {"text": "There are 3 files.", "usage": USAGE_B},
    )
    events = await turn(session, "how many files?")
    assert finished(events).stop_reason == "end_turn"
    assert session.last_turn_spend == {
        SONNET: Usage(**USAGE_A) + Usage(**USAGE_B),
        haiku: Usage(**USAGE_B),
    }
    sonnet_price, haiku_price = price_of(SONNET), price_of(haiku)
    assert sonnet_price is not None and haiku_price is not None
    want = expected_cost(Usage(**USAGE_A) + Usage(**USAGE_B), sonnet_price) + expected_cost(
        Usage(**USAGE_B), haiku_price
    )
    assert session.turn_cost().amount == pytest.approx(want)
    assert session.turn_cost().usage == finished(events).usage  # every token counted once


async def test_resume_in_the_repl_says_what_the_session_used_so_far(
    make: MakeSession, store: ChatStore, router: BashRouter, tmp_path: Path
) -> None:
    from synapse_lsp.cli.chat import Runtime

    session = make({"text": "hi", "usage": USAGE_B})
    await turn(session, "hello there")
    sid = session.id
    await session.close()
    live = LiveSettings({"SYNAPSE_HOME": str(tmp_path / "synapse-home")})
    runtime = Runtime(live, tmp_path, store, router=router)
    try:
        shown = await SESSION_COMMANDS.run(runtime, f"/resume {sid}")
        price = price_of(SONNET)
        assert price is not None
        assert f"Resumed {sid}: hello there" in shown
        assert "So far: 700 in, 90 out, 45,000 cache read" in shown
        assert f"${expected_cost(Usage(**USAGE_B), price):.4f}" in shown
        assert "$" in await SESSION_COMMANDS.run(runtime, "/cost")
    finally:
        if runtime.session is not None:
            await runtime.session.close()


async def test_a_session_stored_before_usage_records_keeps_its_tokens_without_a_price(
    store: ChatStore, router: BashRouter, settings: Settings
) -> None:
    from synapse_lsp.agent.pricing import UNRECORDED, cost_line

    store.create("older-session", "from before", None)
    store.append_event("older-session", TurnFinished("end_turn", Usage(**USAGE_B)))
    store.close("older-session")
    session = ChatSession.resume(store, "older-session", router, settings)
    try:
        cost = session.session_cost()
        assert cost.usage == Usage(**USAGE_B) == session.usage
        assert cost.amount is None and cost.unpriced == (UNRECORDED,)
        line = cost_line("Session", cost)
        assert "cost unknown" in line and "pricing" not in line  # no price would help
    finally:
        await session.close()
