"""Sessions on disk: written as they happen, listed, resumed, deleted; crashes lose little."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.history import repair_history
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.store import (
    ChatStore,
    SessionFormatError,
    SessionLockedError,
    SessionNotFoundError,
)
from synapse_lsp.config import Settings
from synapse_lsp.errors import SynapseError
from synapse_lsp.events import (
    Event,
    FileDiff,
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
def store(settings: Settings) -> ChatStore:
    return ChatStore(settings.synapse_home / "sessions")


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
        ToolCallFinished(
            *("e", "completed", 0, False, "ok"),
            diffs=(FileDiff("/p/a", "x\n", "y\n"), FileDiff("/p/n", None, "new\n")),
        ),
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
    store: ChatStore, workdir: Path,
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
    store: ChatStore,
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
    store: ChatStore,
) -> None:  # fmt: skip
    assert store.list() == []
    api.add("a", "b")
    first = ChatSession(router, settings, model=model, store=store, session_id="s-1")
    await run(first, "first chat")
    second = ChatSession(router, settings, model=model, store=store, session_id="s-2")
    await run(second, "second chat")
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


# ------------------------------------------------------------ format 2 on disk


def api_problems(messages: list[dict[str, Any]]) -> list[str]:
    """What the Messages API would refuse in a history (empty when it is valid)."""
    problems: list[str] = []
    if not messages or messages[0]["role"] != "user":
        problems.append("the first message is not the user's")
    for a, b in zip(messages, messages[1:], strict=False):
        if a["role"] == b["role"]:
            problems.append(f"two {a['role']} messages in a row")
    for i, message in enumerate(messages):
        content = message["content"]
        if not content:
            problems.append(f"message {i} is empty")
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        results = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        before = messages[i - 1]["content"] if i else []
        asked = [b["id"] for b in before if b.get("type") == "tool_use"]
        if results and results != asked:
            problems.append(f"message {i} answers {results}, asked were {asked}")
        if results and [b.get("type") for b in content[: len(results)]] != ["tool_result"] * len(
            results
        ):
            problems.append(f"message {i}: tool results do not come first")
        if uses:
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                [b.get("tool_use_id") for b in following["content"]][: len(uses)]
                if following
                else []
            )
            if answered != uses:
                problems.append(f"message {i}: tool uses {uses} answered by {answered}")
    return problems


def log_lines(store: ChatStore, session_id: str) -> list[dict[str, Any]]:
    """Every line of the log, each of which must be a whole JSON record."""
    data = store.path(session_id).read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


async def test_a_session_is_a_folder_with_a_header_a_log_and_a_lock(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: ChatStore, workdir: Path,
) -> None:  # fmt: skip
    api.add("hello")
    session = ChatSession(router, settings, model=model, store=store, workspace_root=workdir)
    await run(session, "first words")
    folder = store.root / session.id
    # checkpoints/: the turn's checkpoint record (checkpoints/record.py)
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoints",
        "events.jsonl",
        "lock",
        "session.json",
    ]
    assert [p.name for p in (folder / "checkpoints").iterdir()] == ["1.json"]
    header = json.loads((folder / "session.json").read_text())
    assert header["format"] == 2 and header["id"] == session.id
    assert header["title"] == "first words" and header["workspace"] == str(workdir)
    assert store.path(session.id) == folder / "events.jsonl"
    assert (folder / "lock").read_text().strip() == str(os.getpid())  # who writes it
    await session.close()
    store.set_title(session.id, "renamed")  # the header follows, and the log records it
    assert json.loads((folder / "session.json").read_text())["title"] == "renamed"
    assert log_lines(store, session.id)[-1] == {"kind": "meta", "title": "renamed"}
    assert store.info(session.id).title == "renamed" == store.load(session.id).info.title
    store.close()
    (folder / "session.json").write_text("{not json")  # a damaged header: the log's meta
    assert store.info(session.id).title == "renamed"
    (folder / "session.json").write_text(json.dumps({**header, "format": 3}))
    with pytest.raises(SessionFormatError, match="newer Synapse"):
        store.load(session.id)
    with pytest.raises(SessionFormatError):
        store.lock(session.id)
    assert store.list() == []  # listed sessions are those this Synapse can read


# ------------------------------------------------------------------ one writer

HOLDER = """
import json, sys
from pathlib import Path
from synapse_lsp.agent.store import ChatStore
store = ChatStore(Path(sys.argv[1]))
store.lock(sys.argv[2])
print("locked", flush=True)
for line in sys.stdin:
    store.append_message(sys.argv[2], json.loads(line))
    print("appended", flush=True)
"""


class Holder:
    """Another real process that holds a session open for writing."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, store: ChatStore, session_id: str) -> Holder:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLDER, str(store.root), session_id,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        holder = cls(proc)
        assert await holder.line() == "locked"
        return holder

    async def line(self) -> str:
        assert self.proc.stdout is not None
        return (await asyncio.wait_for(self.proc.stdout.readline(), 30)).decode().strip()

    async def append(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()
        assert await self.line() == "appended"

    async def kill(self) -> None:
        """SIGKILL: no cleanup runs; the kernel drops the lock."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


async def stored_session(store: ChatStore, session_id: str) -> None:
    store.create(session_id, "shared", None)
    store.append_message(session_id, user("first question"))
    store.append_message(session_id, assistant("first answer"))
    store.close(session_id)


async def test_a_session_another_process_writes_is_read_only_here_until_it_dies(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: ChatStore,
) -> None:  # fmt: skip
    await stored_session(store, "shared")
    holder = await Holder.start(store, "shared")
    try:
        with pytest.raises(SessionLockedError, match=f"pid {holder.proc.pid}") as locked:
            store.append_message("shared", user("not mine to write"))
        assert locked.value.pid == holder.proc.pid and "read-only" in locked.value.message
        assert [i.id for i in store.list()] == ["shared"]  # listing and reading stay allowed
        size = store.path("shared").stat().st_size

        session = ChatSession.resume(store, "shared", router, settings, model=model)
        assert session.read_only
        assert [m["content"][0]["text"] for m in session.messages] == [
            "first question",
            "first answer",
        ]
        finished = await run(session, "may I?")
        assert finished.stop_reason == "error" and finished.error is not None
        assert "read-only" in finished.error and "fork" in finished.error
        assert api.calls == 0  # refused before the model was asked
        assert store.path("shared").stat().st_size == size  # and nothing was written
        assert len(session.messages) == 2

        await holder.append(user("said in the other process"))
        await holder.append(assistant("answered there"))
    finally:
        await holder.kill()
    # The holder died without closing anything: its lock went with it.
    api.add("now it is mine")
    assert (await run(session, "and now?")).stop_reason == "end_turn"
    assert not session.read_only
    sent = [m["content"][0]["text"] for m in api.message_requests[-1]["messages"]]
    assert sent == [
        "first question",
        "first answer",
        "said in the other process",  # reloaded when the lock was taken
        "answered there",
        "and now?",
    ]
    reloaded = store.load("shared")
    assert [m["content"][0]["text"] for m in reloaded.messages][-2:] == [
        "and now?",
        "now it is mine",
    ]
    await session.close()
    # Closing released it: another process can write it now.
    other = await Holder.start(store, "shared")
    await other.kill()


async def test_a_closed_store_releases_its_lock_and_two_stores_exclude_each_other(
    settings: Settings,
) -> None:
    root = settings.synapse_home / "sessions"
    first, second = ChatStore(root), ChatStore(root)
    first.create("one", "t", None)
    with pytest.raises(SessionLockedError):
        second.lock("one")
    assert first.holds_lock("one") and not second.holds_lock("one")
    first.close("one")
    second.lock("one")
    second.append_message("one", user("second writes"))
    with pytest.raises(SessionLockedError):
        first.append_message("one", user("first may not"))
    second.close()
    assert [m["content"][0]["text"] for m in first.load("one").messages] == ["second writes"]


async def test_fork_continues_a_session_another_process_writes(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: ChatStore,
) -> None:  # fmt: skip
    await stored_session(store, "shared")
    store.append_event("shared", UserMessage("first question"))
    store.close()
    holder = await Holder.start(store, "shared")
    try:
        before = store.path("shared").read_bytes()
        forked = ChatSession.fork(store, "shared", router, settings, model=model)
        assert forked.id != "shared" and not forked.read_only
        assert forked.title == "shared"
        assert forked.transcript() == [UserMessage("first question")]
        api.add("answered in the fork")
        assert (await run(forked, "go on")).stop_reason == "end_turn"
        assert store.path("shared").read_bytes() == before  # the original is untouched
        header = json.loads((store.root / forked.id / "session.json").read_text())
        assert header["forked_from"] == "shared"
        texts = [m["content"][0]["text"] for m in store.load(forked.id).messages]
        assert texts == ["first question", "first answer", "go on", "answered in the fork"]
        await forked.close()
        with pytest.raises(SynapseError, match="already exists"):
            store.fork("shared", forked.id)
    finally:
        await holder.kill()


# ----------------------------------------------------------------------- repair


async def test_a_torn_last_line_is_cut_off_so_the_next_record_is_kept(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: ChatStore,
) -> None:  # fmt: skip
    await stored_session(store, "torn")
    with store.path("torn").open("a") as fh:
        fh.write('{"kind":"message","message":{"role":"us')  # the crash, mid-write
    loaded = store.load("torn")
    assert len(loaded.messages) == 2 and "torn last record" in loaded.problems[0]
    resumed = ChatSession.resume(store, "torn", router, settings, model=model)
    api.add("after the crash")
    assert (await run(resumed, "still there?")).stop_reason == "end_turn"
    await resumed.close()
    records = log_lines(store, "torn")  # every line is whole again
    assert not any('role":"us' in json.dumps(r) for r in records)
    texts = [m["content"][0]["text"] for m in store.load("torn").messages]
    assert texts == ["first question", "first answer", "still there?", "after the crash"]
    assert store.load("torn").problems == []


async def test_a_whole_last_record_that_lost_its_newline_is_kept(store: ChatStore) -> None:
    await stored_session(store, "nl")
    path = store.path("nl")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert len(store.load("nl").messages) == 2
    store.append_message("nl", user("next"))
    store.close()
    assert [m["content"][0]["text"] for m in store.load("nl").messages] == [
        "first question",
        "first answer",
        "next",
    ]


async def test_a_log_that_is_not_utf8_is_read_with_a_warning(
    store: ChatStore, caplog: pytest.LogCaptureFixture
) -> None:
    await stored_session(store, "bytes")
    with store.path("bytes").open("ab") as fh:
        fh.write(b'{"kind":"message","message":{"role":"user","content":"\xff\xfe"}}\n')
        fh.write(b"\x80 not even json\n")
    store.append_message("bytes", assistant("after the bad lines"))
    store.close()
    loaded = store.load("bytes")
    assert [[b["text"] for b in m["content"]] for m in loaded.messages] == [
        ["first question"],
        ["first answer", "after the bad lines"],  # the skipped user message left two in a row
    ]
    assert len(loaded.problems) == 2 and all("not UTF-8" in p for p in loaded.problems)
    assert "not UTF-8" in caplog.text
    assert [i.id for i in store.list()] == ["bytes"]


async def test_load_repairs_orphan_tool_results_into_a_history_the_api_accepts(
    store: ChatStore,
) -> None:
    def use(i: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": "ls"}}

    def result(i: str, text: str = "out") -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": i, "content": text, "is_error": False}

    broken = [
        {"role": "assistant", "content": [{"type": "text", "text": "I start?"}]},
        {"role": "user", "content": [result("nowhere"), {"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "  "}, use("a"), use("b")]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "also"},
                result("b", "b-out"),
                result("b", "twice"),
                result("zzz"),
            ],
        },
        {"role": "assistant", "content": [use("c")]},
        {"role": "user", "content": [result("old")]},  # nothing but an orphan
        {"role": "assistant", "content": [{"type": "text", "text": "lost my results"}]},
        {"role": "user", "content": [result("c")]},  # not after its tool_use any more
    ]
    store.create("orphans", "t", None)
    for message in broken:
        store.append_message("orphans", message)
    store.close()
    assert api_problems(broken) != []
    messages = store.load("orphans").messages
    assert api_problems(messages) == []
    assert repair_history(messages) == messages  # repairing twice changes nothing
    results = {
        b["tool_use_id"]: b["content"]
        for m in messages
        for b in m["content"]
        if b["type"] == "tool_result"
    }
    assert results["b"] == "b-out"  # the real answer kept, the second one dropped
    assert results["a"].startswith("[Interrupted]") and results["c"].startswith("[Interrupted]")
    assert set(results) == {"a", "b", "c"}
    assert messages[0]["content"][0]["text"].startswith("[The start")


# ------------------------------------------------------------------- migration


def write_v1(root: Path, session_id: str, records: list[dict[str, Any]]) -> Path:
    """A session file exactly as format 1 (`synapse_lsp/sessions.py` before the store
    became folders) wrote it: `<id>.jsonl`, one compact JSON record per line."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{session_id}.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            fh.flush()
    return path


def v1_records(session_id: str, turns: int = 2) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = [
        {
            "kind": "meta",
            "id": session_id,
            "title": "New chat",
            "created_at": "2026-01-02T03:04:05Z",
            "workspace": "/old/work",
        },
        {"kind": "meta", "title": f"old chat {session_id}"},
    ]
    for n in range(turns):
        records += [
            {"kind": "event", "event": event_to_dict(UserMessage(f"q{n}"))},
            {"kind": "message", "message": user(f"q{n}")},
            {"kind": "message", "message": assistant(f"a{n} \u00e9")},
            {"kind": "event", "event": event_to_dict(TextDelta(f"a{n} \u00e9"))},
            {"kind": "event", "event": event_to_dict(TurnFinished("end_turn", Usage(1, 2)))},
        ]
    return records


async def test_a_format_1_file_is_migrated_on_first_access_and_goes_on(
    api: FakeAnthropic, model: ModelClient, router: BashRouter, settings: Settings,
    store: ChatStore,
) -> None:  # fmt: skip
    old = write_v1(store.root, "old-1", v1_records("old-1"))
    original = old.read_bytes()
    os.utime(old, (1_000_000, 1_000_000))
    [info] = store.list()
    assert (info.id, info.title, info.workspace) == ("old-1", "old chat old-1", "/old/work")
    assert info.created_at == "2026-01-02T03:04:05Z"
    assert info.updated_at == "1970-01-12T13:46:40Z"  # the old file's time, kept
    assert not old.exists()
    folder = store.root / "old-1"
    assert store.path("old-1").read_bytes() == original  # the records, byte for byte
    header = json.loads((folder / "session.json").read_text())
    assert header["format"] == 2 and header["migrated_from"] == "v1"
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp-")]

    resumed = ChatSession.resume(store, "old-1", router, settings, model=model)
    assert resumed.title == "old chat old-1"
    assert [m["content"][0]["text"] for m in resumed.messages] == ["q0", "a0 é", "q1", "a1 é"]
    assert resumed.transcript()[0] == UserMessage("q0")
    assert resumed.usage == Usage(2, 4)
    api.add("new answer")
    assert (await run(resumed, "new question")).stop_reason == "end_turn"
    await resumed.close()
    texts = [m["content"][0]["text"] for m in store.load("old-1").messages]
    assert texts[-2:] == ["new question", "new answer"]

    # A crash after the rename, before the old file was removed: it is only removed.
    old.write_bytes(original)
    before = store.path("old-1").read_bytes()
    assert [i.id for i in store.list()] == ["old-1"]
    assert not old.exists() and store.path("old-1").read_bytes() == before
    # Migration also happens on load / info / resume of that id, not only list.
    write_v1(store.root, "old-2", v1_records("old-2", 1))
    assert store.info("old-2").title == "old chat old-2"
    write_v1(store.root, "old-3", v1_records("old-3", 1))
    assert len(store.load("old-3").messages) == 2
    # An old file whose records the folder does not hold is never thrown away.
    write_v1(store.root, "old-3", [{"kind": "meta", "title": "another"}])
    store.list()
    kept = list(store.root.glob("old-3.jsonl.unmigrated-*"))
    assert len(kept) == 1 and b"another" in kept[0].read_bytes()


MIGRATOR = """
import json, sys
from pathlib import Path
from synapse_lsp.agent.store import ChatStore
store = ChatStore(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()  # the starting gun
seen = {info.id: len(store.load(info.id).messages) for info in store.list()}
print(json.dumps(seen), flush=True)
"""


async def test_two_processes_migrating_at_once_lose_nothing(store: ChatStore) -> None:
    originals = {}
    for n in range(40):
        sid = f"old-{n:02d}"
        originals[sid] = write_v1(store.root, sid, v1_records(sid, 20)).read_bytes()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            MIGRATOR,
            str(store.root),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        for _ in range(2)
    ]
    for proc in procs:  # both are started (imports done) before either migrates
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
    outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 60)
    assert [p.returncode for p in procs] == [0, 0]
    for out, _ in outputs:
        assert json.loads(out) == dict.fromkeys(originals, 40)
    for sid, data in originals.items():
        assert store.path(sid).read_bytes() == data
    assert sorted(p.name for p in store.root.iterdir() if not p.is_dir()) == [".migrate.lock"]
    assert sorted(p.name for p in store.root.iterdir() if p.is_dir()) == sorted(originals)


async def test_ids_cannot_leave_the_sessions_folder(store: ChatStore) -> None:
    await stored_session(store, "fine")
    for bad in ("../../etc/passwd", "..", ".tmp-x", "a/b", "", "x" * 129):
        for call in (store.load, store.info, store.path, store.lock, store.delete, store.fork):
            with pytest.raises(SessionNotFoundError, match="invalid session id"):
                call(bad)
        with pytest.raises(SessionNotFoundError, match="invalid session id"):
            store.fork("fine", bad)
    assert [i.id for i in store.list()] == ["fine"]
