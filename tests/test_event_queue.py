"""The turn's event queue: merges while the consumer lags, bounded live output."""

from __future__ import annotations

from synapse_lsp.agent.event_queue import EventQueue
from synapse_lsp.events import (
    Event,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
)


async def _drain(queue: EventQueue) -> list[Event]:
    out: list[Event] = []
    while (event := await queue.get()) is not None:
        out.append(event)
    return out


async def test_a_consumer_that_keeps_up_sees_every_event_as_sent() -> None:
    queue = EventQueue()
    sent = [TextDelta("a"), TextDelta("b")]
    got = []
    for event in sent:
        queue.put_nowait(event)
        got.append(await queue.get())
    assert got == sent


async def test_a_backlog_merges_text_and_output_keeping_order_and_content() -> None:
    queue = EventQueue()
    events: list[Event] = [
        TextDelta("Let me "),
        TextDelta("look"),
        TextDelta("."),
        ToolCallStarted("t1", "ls"),
        ToolOutput("t1", "stdout", "a\n"),
        ToolOutput("t1", "stdout", "b\n"),
        ToolOutput("t1", "stderr", "warn\n"),
        ToolOutput("t1", "stdout", "c\n"),
        ToolCallFinished("t1", "completed", 0, False, "a\nb\nc\n"),
        TextDelta("Done", parent_tool_call_id="t9"),
        TextDelta("!"),
    ]
    for event in events:
        queue.put_nowait(event)
    queue.put_nowait(None)
    got = await _drain(queue)
    assert len(got) < len(events)
    text = "".join(e.text for e in got if isinstance(e, TextDelta))
    assert text == "Let me look.Done!"
    stdout = "".join(e.chunk for e in got if isinstance(e, ToolOutput) and e.stream == "stdout")
    assert stdout == "a\nb\nc\n"
    kinds = [type(e).__name__ for e in got]
    assert kinds.index("ToolCallStarted") < kinds.index("ToolOutput")
    assert kinds.index("ToolCallFinished") > max(
        i for i, k in enumerate(kinds) if k == "ToolOutput"
    )
    # a sub-agent's text never merges into the parent's
    assert TextDelta("Done", parent_tool_call_id="t9") in got


async def test_live_output_past_the_cap_is_dropped_and_said() -> None:
    queue = EventQueue(max_output_bytes=1000)
    queue.put_nowait(ToolCallStarted("t1", "yes"))
    for _ in range(500):
        queue.put_nowait(ToolOutput("t1", "stdout", "y\n" * 50))
        assert queue.pending_output_bytes <= 1000
    queue.put_nowait(ToolCallFinished("t1", "completed", 0, False, "y\n"))
    queue.put_nowait(None)
    got = await _drain(queue)
    delivered = sum(len(e.chunk) for e in got if isinstance(e, ToolOutput))
    assert delivered == 1000
    notices = [e for e in got if isinstance(e, Notice)]
    assert len(notices) == 1
    assert f"{500 * 100 - 1000} bytes of live output of t1" in notices[0].message
    assert isinstance(got[-1], ToolCallFinished)


async def test_dropped_output_is_reported_even_when_the_turn_ends() -> None:
    queue = EventQueue(max_output_bytes=10)
    queue.put_nowait(ToolOutput("t1", "stdout", "0123456789"))
    queue.put_nowait(ToolOutput("t1", "stdout", "more"))
    queue.put_nowait(None)
    got = await _drain(queue)
    assert [type(e).__name__ for e in got] == ["ToolOutput", "Notice"]
