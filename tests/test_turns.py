"""The one turn driver (agent/turns.py): a toy face that supplies only `render` drives
real turns (fake Messages API over HTTP, real bash); the busy check; a cancel before
the turn's first event; the output throttle (coalescing per call, flushed before the
call's finish and the turn's end, on a timer otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.turns import LiveChat, OutputThrottle, ThrottlePolicy
from synapse_lsp.config import Settings
from synapse_lsp.errors import SessionBusyError
from synapse_lsp.events import (
    Event,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
)
from synapse_lsp.router import BashRouter

MakeChat = Callable[..., ChatSession]


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> AsyncIterator[MakeChat]:
    models: list[ModelClient] = []

    def factory(*script: Any) -> ChatSession:
        api.add(*script)
        model = ModelClient(
            api_key="sk-ant-turns-test-key",
            base_url=api.base_url,
            model="fake-model",
            retry_base_delay=0.001,
        )
        models.append(model)
        return ChatSession(router, settings, model=model)

    yield factory
    for model in models:
        await model.close()


class ToyFace:
    """A face that is nothing but its `render`: it records what it is shown."""

    def __init__(self) -> None:
        self.shown: list[Event] = []

    async def render(self, event: Event) -> None:
        self.shown.append(event)

    def output(self) -> str:
        return "".join(e.chunk for e in self.shown if isinstance(e, ToolOutput))


async def _until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------ the toy face


async def test_a_toy_face_drives_a_turn_with_only_a_render_function(
    api: FakeAnthropic, make: MakeChat
) -> None:
    chat = make(
        {"commands": ["for i in 1 2 3; do echo line $i; done"]},
        {"text": "Three lines.", "chunk_size": 3},
    )
    face = ToyFace()
    live = LiveChat(chat, None)
    finished = await live.run("count", None, face.render)

    assert finished.stop_reason == "end_turn"
    assert face.shown[-1] is finished  # the one TurnFinished, rendered last
    assert sum(isinstance(e, TurnFinished) for e in face.shown) == 1
    kinds = [type(e).__name__ for e in face.shown]
    started = kinds.index("ToolCallStarted")
    ended = kinds.index("ToolCallFinished")
    assert started < kinds.index("ToolOutput") < ended  # output before its call's finish
    assert face.output() == "line 1\nline 2\nline 3\n"
    assert "".join(e.text for e in face.shown if isinstance(e, TextDelta)) == "Three lines."
    assert not live.running and not live.busy and live.turn is None
    assert live.cancel() is False  # nothing runs
    # The same record runs the next turn.
    api.add({"text": "Again."})
    again = await live.run("again", None, face.render)
    assert again.stop_reason == "end_turn"


async def test_a_second_turn_is_refused_while_one_runs_and_a_cancel_ends_it(
    api: FakeAnthropic, make: MakeChat
) -> None:
    chat = make({"commands": ["echo started; sleep 30; touch never"]}, {"text": "after"})
    face = ToyFace()
    live = LiveChat(chat, None)
    turn = asyncio.create_task(live.run("wait", None, face.render, request_id="req-1"))
    await _until(lambda: "started" in face.output())
    assert live.running and live.busy and live.request_id == "req-1"
    with pytest.raises(SessionBusyError):
        live.check_idle()
    other = ToyFace()
    with pytest.raises(SessionBusyError):
        await live.run("me too", None, other.render)
    assert other.shown == []  # refused before anything was rendered
    assert live.turn is turn  # the refusal left the running turn alone

    assert live.cancel_request("req-2") is False  # another request's cancel
    assert live.cancel_request("req-1") is True
    finished = await asyncio.wait_for(turn, 20)
    assert finished.stop_reason == "cancelled"
    ended = [e for e in face.shown if isinstance(e, ToolCallFinished)]
    assert [e.status for e in ended] == ["cancelled"]
    assert live.request_id is None and not live.running
    again = await live.run("go on", None, face.render)
    assert again.stop_reason == "end_turn"


# ------------------------------------------------------------- cancel wins early


async def test_a_cancel_while_the_face_prepares_ends_the_turn_before_it_starts(
    api: FakeAnthropic, make: MakeChat
) -> None:
    chat = make({"commands": ["touch never"]}, {"text": "resumed"})
    face = ToyFace()
    live = LiveChat(chat, None)
    ready = asyncio.Event()
    waiting = asyncio.Event()

    async def prepare() -> None:  # the LSP face waits here for the model SDK
        waiting.set()
        await ready.wait()

    turn = asyncio.create_task(live.run("go", None, face.render, prepare=prepare))
    await waiting.wait()
    assert live.running  # marked before the face's first await
    assert live.cancel() is True
    ready.set()
    finished = await asyncio.wait_for(turn, 10)
    assert finished.stop_reason == "cancelled"
    assert face.shown == [finished]
    assert api.message_requests == []  # the model was never asked
    assert not chat.busy and chat.messages == []
    # The session goes on as if the cancelled prompt had never been sent.
    resumed = await live.run("go", None, face.render)
    assert resumed.stop_reason == "end_turn"


async def test_a_cancel_before_the_first_event_ends_the_turn_at_once(
    api: FakeAnthropic, make: MakeChat, workdir: Any
) -> None:
    chat = make({"commands": ["touch never"]}, {"text": "resumed"})
    face = ToyFace()
    live = LiveChat(chat, None)
    turn = asyncio.create_task(live.run("go", None, face.render))
    await asyncio.sleep(0)  # the driver started the chat's turn; its worker has not run
    assert live.running and chat.busy and face.shown == []
    assert live.cancel() is True
    finished = await asyncio.wait_for(turn, 10)
    assert finished.stop_reason == "cancelled"
    assert [type(e) for e in face.shown] == [TurnFinished]
    assert api.message_requests == []
    assert not (workdir / "never").exists()
    assert not chat.busy
    resumed = await live.run("go", None, face.render)
    assert resumed.stop_reason == "end_turn"


async def test_a_cancelled_face_task_cancels_the_chat_and_close_releases_the_face(
    api: FakeAnthropic, make: MakeChat
) -> None:
    chat = make({"commands": ["echo started; sleep 30"]})
    face = ToyFace()
    released: list[str] = []

    class Resources:
        def closing(self) -> None:
            released.append("closing")

        async def close(self) -> None:
            released.append("face")

    live = LiveChat(chat, Resources())
    turn = asyncio.create_task(live.run("wait", None, face.render))
    await _until(lambda: "started" in face.output())
    turn.cancel()  # shutdown, LSP `$/cancelRequest`
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert not live.running
    await _until(lambda: not chat.busy, 10)
    await live.close()
    assert released == ["closing", "face"]


# ------------------------------------------------------------------ the throttle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _out(chunk: str, call: str = "t", stream: str = "stdout") -> ToolOutput:
    return ToolOutput(call, stream, chunk)  # type: ignore[arg-type]


def _shown(face: ToyFace) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for e in face.shown:
        if isinstance(e, ToolOutput):
            rows.append((e.tool_call_id, e.stream, e.chunk))
        else:
            rows.append((type(e).__name__,))
    return rows


async def test_the_throttle_coalesces_a_calls_output_and_flushes_it_before_the_finish() -> None:
    face, clock = ToyFace(), Clock()
    throttle = OutputThrottle(face.render, ThrottlePolicy(interval=10.0), clock=clock)
    await throttle.render(ToolCallStarted("t", "make"))
    for chunk in ("a", "b", "c"):
        await throttle.render(_out(chunk))
    await throttle.render(_out("e", stream="stderr"))
    await throttle.render(_out("d"))
    assert _shown(face) == [("ToolCallStarted",), ("t", "stdout", "a")]  # the first at once
    assert throttle.held == 4
    clock.now += 10.0  # the interval is over: the next chunk takes what is held along
    await throttle.render(_out("f"))
    assert _shown(face)[2:] == [
        ("t", "stdout", "bc"),
        ("t", "stderr", "e"),
        ("t", "stdout", "df"),
    ]
    await throttle.render(_out("g"))
    await throttle.render(ToolCallFinished("t", "completed", 0, False, "g"))
    assert _shown(face)[5:] == [("t", "stdout", "g"), ("ToolCallFinished",)]
    assert throttle.held == 0
    await throttle.close()


async def test_the_throttle_sends_at_the_size_bound_and_everything_before_the_turn_ends() -> None:
    face, clock = ToyFace(), Clock()
    throttle = OutputThrottle(face.render, ThrottlePolicy(interval=10.0, max_bytes=8), clock=clock)
    for chunk in ("1234", "5678", "9abc", "def"):
        await throttle.render(_out(chunk))
    await throttle.render(_out("x", call="u"))
    await throttle.render(_out("y", call="u"))
    await throttle.render(TextDelta("meanwhile"))  # other events pass straight through
    assert _shown(face) == [
        ("t", "stdout", "1234"),
        ("t", "stdout", "56789abc"),  # 8 characters waiting: out without the interval
        ("u", "stdout", "x"),
        ("TextDelta",),
    ]
    await throttle.render(TurnFinished("end_turn", Usage()))
    assert _shown(face)[4:] == [("t", "stdout", "def"), ("u", "stdout", "y"), ("TurnFinished",)]
    await throttle.close()


async def test_held_output_goes_out_when_the_interval_ends_without_another_event() -> None:
    face = ToyFace()
    throttle = OutputThrottle(face.render, ThrottlePolicy(interval=0.05))
    await throttle.render(_out("first\n"))
    await throttle.render(_out("second\n"))
    assert face.output() == "first\n"
    await _until(lambda: face.output() == "first\nsecond\n", 5)
    await throttle.close()


async def test_a_turn_through_the_throttle_loses_no_output(
    api: FakeAnthropic, make: MakeChat
) -> None:
    script = "for i in $(seq 2000); do echo line $i; done; sleep 0.2; echo tail"
    chat = make({"commands": [script]}, {"text": "done"})
    face = ToyFace()
    live = LiveChat(chat, None, throttle=ThrottlePolicy(interval=0.1, max_bytes=4096))
    finished = await live.run("print", None, face.render)
    assert finished.stop_reason == "end_turn"
    expected = "".join(f"line {i}\n" for i in range(1, 2001)) + "tail\n"
    assert face.output() == expected
    last_output = max(i for i, e in enumerate(face.shown) if isinstance(e, ToolOutput))
    finish = next(i for i, e in enumerate(face.shown) if isinstance(e, ToolCallFinished))
    assert last_output < finish
