"""Sessions on disk: written as they happen, listed, resumed, deleted; crashes lose little."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.agent.fakeapi import FakeAnthropic
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.store import SessionNotFoundError, SessionStore
from synapse_lsp.config import Settings
from synapse_lsp.events import (
    Event,
    PlanEntry,
    PlanUpdated,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    Usage,
    UserMessage,
    event_from_dict,
    event_to_dict,
)
from synapse_lsp.router import BashRouter


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def model(api: FakeAnthropic) -> AsyncIterator[ModelClient]:
    client = ModelClient(api_key="k", base_url=api.base_url, model="fake-model")
    yield client
    await client.close()


@pytest.fixture
def store(settings: Settings) -> SessionStore:
    return SessionStore(settings.synapse_home / "sessions")


async def run(session: ChatSession, text: str) -> TurnFinished:
    events = [e async for e in session.run_turn(text)]
    last = events[-1]
    assert isinstance(last, TurnFinished)
    return last


def test_events_round_trip_through_dicts() -> None:
    events: list[Event] = [
        TextDelta("hi", "toolu_1"),
        ToolCallStarted("t", "ls", True),
        ToolCallFinished("t", "failed", 2, True, "err", "native", "execution_error", {"a": [1]}),
        PlanUpdated((PlanEntry("step", "in_progress"),), "why"),
        TurnFinished("error", Usage(1, 2, 3, 4), "boom"),
        UserMessage("question"),
    ]
    for event in events:
        data = json.loads(json.dumps(event_to_dict(event)))
        assert event_from_dict(data) == event
    assert event_to_dict(events[1])["type"] == "tool_call_started"
    with pytest.raises(ValueError, match="unknown event type"):
        event_from_dict({"type": "nope"})


async def test_a_conversation_is_stored_as_it_happens_and_resumed(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: SessionStore, workdir: Path,
) -> None:  # fmt: skip
    api.add({"text": "Listing.", "commands": ["echo stored-output"]}, "Done listing.")
    session = ChatSession(router, settings, model=model, store=store, workspace_root=workdir)
    assert (await run(session, "list things\nplease")).stop_reason == "end_turn"
    path = store.path(session.id)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["kind"] == "meta" and records[0]["title"] == "list things"
    assert [r["message"]["role"] for r in records if r["kind"] == "message"] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    kinds = [r["event"]["type"] for r in records if r["kind"] == "event"]
    assert kinds[0] == "user_message" and kinds[-1] == "turn_finished"
    assert kinds.count("text_delta") == 2  # coalesced per message, not per chunk

    infos = store.list()
    assert [(i.id, i.title, i.workspace) for i in infos] == [
        (session.id, "list things", str(workdir))
    ]

    resumed = ChatSession.resume(store, session.id, router, settings, model=model)
    assert resumed.title == "list things"
    assert resumed.messages == session.messages
    transcript = resumed.transcript()
    assert transcript[0] == UserMessage("list things\nplease")
    assert TextDelta("Done listing.") in transcript
    assert any(isinstance(e, ToolCallFinished) and "stored-output" in e.text for e in transcript)
    api.add("I remember.")
    assert (await run(resumed, "what did you run?")).stop_reason == "end_turn"
    sent = api.message_requests[-1]["messages"]
    assert len(sent) == 5
    assert sent[0]["content"][0]["text"] == "list things\nplease"
    assert sent[-1]["content"][0]["text"] == "what did you run?"
    await session.close()
    await resumed.close()


async def test_a_torn_last_line_and_an_unanswered_tool_use_are_repaired(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: SessionStore,
) -> None:  # fmt: skip
    store.create("crashed", "crash test", None)
    store.append_message("crashed", {"role": "user", "content": [{"type": "text", "text": "go"}]})
    tool_use = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}
    store.append_message("crashed", {"role": "assistant", "content": [tool_use]})
    store.close()
    with store.path("crashed").open("a") as fh:
        fh.write('{"kind":"message","message":{"role":"us')  # the crash, mid-write
    resumed = ChatSession.resume(store, "crashed", router, settings, model=model)
    assert resumed.messages[-1]["role"] == "user"
    result = resumed.messages[-1]["content"][0]
    assert result["tool_use_id"] == "toolu_9" and result["is_error"] is True
    api.add("recovered")
    assert (await run(resumed, "continue")).stop_reason == "end_turn"
    sent = api.message_requests[-1]["messages"]
    assert [b["type"] for b in sent[-1]["content"]] == ["tool_result", "text"]
    await resumed.close()


async def test_list_is_newest_first_and_delete_removes(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: SessionStore,
) -> None:  # fmt: skip
    assert store.list() == []
    api.add("a", "b")
    first = ChatSession(router, settings, model=model, store=store, session_id="s-1")
    await run(first, "first chat")
    second = ChatSession(router, settings, model=model, store=store, session_id="s-2")
    await run(second, "second chat")
    import os

    os.utime(store.path("s-1"), (1_000_000, 1_000_000))  # make s-1 older
    assert [i.id for i in store.list()] == ["s-2", "s-1"]
    store.delete("s-1")
    assert [i.id for i in store.list()] == ["s-2"]
    with pytest.raises(SessionNotFoundError):
        store.delete("s-1")
    with pytest.raises(SessionNotFoundError):
        ChatSession.resume(store, "s-1", router, settings)
    with pytest.raises(SessionNotFoundError, match="invalid session id"):
        store.load("../../etc/passwd")
    await first.close()
    await second.close()


async def test_a_session_without_a_store_keeps_a_transcript_in_memory(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings
) -> None:
    api.add("hello")
    session = ChatSession(router, settings, model=model)
    await run(session, "hi")
    assert session.transcript()[0] == UserMessage("hi")
    assert isinstance(session.transcript()[-1], TurnFinished)
    assert session.usage.output_tokens > 0
