"""In-process parts of the LSP face: event -> update mapping, the paced bounded update
stream, and the permission policy (minimal TextEdits: tests/test_text_edits.py)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.commands import Layer
from synapse_lsp.config import Settings
from synapse_lsp.events import (
    Notice,
    PlanEntry,
    PlanUpdated,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
    UserMessage,
)
from synapse_lsp.lsp import protocol as wire
from synapse_lsp.lsp.protocol import SessionUpdate, SessionUpdateNotification
from synapse_lsp.lsp.updates import MAX_OUTPUT_CHUNK, UpdateStream, event_to_update
from synapse_lsp.lsp.wire import to_wire
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.policy.writes import writes_outside
from synapse_lsp.question import Question


def _wire(update: SessionUpdate | None) -> Any:
    assert update is not None
    return to_wire(update)


def test_event_to_update_shapes() -> None:
    def title(cmd: str) -> tuple[str, str, list[str]]:
        return f"Run {cmd}", "execute", ["src"]

    assert _wire(event_to_update(TextDelta("hi", parent_tool_call_id="toolu_p"))) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hi"},
        "parentToolCallId": "toolu_p",
    }
    assert _wire(
        event_to_update(ToolCallStarted("toolu_1", "rg x src"), summarize=title, cwd=Path("/p"))
    ) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "toolu_1",
        "title": "Run rg x src",
        "kind": "execute",
        "status": "in_progress",
        "rawInput": {"command": "rg x src", "restart": False},
        "locations": [{"path": "/p/src"}],
    }
    assert _wire(event_to_update(ToolOutput("toolu_1", "stderr", "oops\n"))) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "toolu_1",
        "output": {"stream": "stderr", "text": "oops\n"},
    }
    finished = ToolCallFinished(
        "toolu_2", "completed", 0, False, "Replaced 1", "agent", None,
        {"edit": {"kind": "edit", "path": "/p/a.py", "replacements": 1}},
    )  # fmt: skip
    assert _wire(event_to_update(finished)) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "toolu_2",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Replaced 1"}}],
        "rawOutput": {
            "exitCode": 0,
            "isError": False,
            "layer": "agent",
            "category": None,
            "edit": {"path": "/p/a.py", "applied": True},
        },
    }
    plan = PlanUpdated((PlanEntry("Fix", "in_progress"),), "why")
    assert _wire(event_to_update(plan)) == {
        "sessionUpdate": "plan",
        "explanation": "why",
        "entries": [{"content": "Fix", "priority": "medium", "status": "in_progress"}],
    }
    assert _wire(event_to_update(Notice("retrying", "warning"))) == {
        "sessionUpdate": "notice",
        "level": "warning",
        "message": "retrying",
    }
    assert _wire(event_to_update(TurnFinished("error", Usage(1, 2, 3, 4), "no key"))) == {
        "sessionUpdate": "turn_finished",
        "stopReason": "error",
        "usage": {
            "inputTokens": 1,
            "outputTokens": 2,
            "cacheCreationInputTokens": 3,
            "cacheReadInputTokens": 4,
        },
        "error": "no key",
    }
    assert _wire(event_to_update(UserMessage("q"))) == {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "q"},
    }


def _text(text: str) -> wire.AgentMessageChunk:
    return wire.AgentMessageChunk(content=wire.TextContent(text=text))


def _collect(sent: list[dict[str, Any]]) -> Any:
    """The stream's `send`: what the client receives, as JSON."""

    def send(payload: SessionUpdateNotification) -> None:
        sent.append(to_wire(payload))

    return send


def _tool_call(tool_call_id: str) -> wire.ToolCall:
    return wire.ToolCall(
        tool_call_id=tool_call_id,
        title="t",
        kind="execute",
        raw_input=wire.RawInput(command="t", restart=False),
        locations=[],
    )


async def test_stream_coalesces_text_keeps_order_and_sends_the_first_chunk_at_once() -> None:
    sent: list[dict[str, Any]] = []
    stream = UpdateStream("s", _collect(sent), interval=0.05)
    await stream.put(_text("a"))
    await asyncio.sleep(0)  # the pump runs: the first chunk goes out without waiting
    await asyncio.sleep(0)
    assert [u["update"]["content"]["text"] for u in sent] == ["a"]
    for ch in "bcd":
        await stream.put(_text(ch))
    await stream.put(_tool_call("t"))
    for ch in "ef":
        await stream.put(_text(ch))
    await stream.flush()
    updates = [u["update"] for u in sent]
    assert [u["sessionUpdate"] for u in updates] == [
        "agent_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "agent_message_chunk",
    ]
    assert [u.get("content", {}).get("text") for u in updates] == ["a", "bcd", None, "ef"]
    assert all(u["sessionId"] == "s" for u in sent)
    await stream.close()


def _output(text: str) -> wire.ToolCallUpdate:
    return wire.ToolCallUpdate(
        tool_call_id="t", output=wire.OutputChunk(stream="stdout", text=text)
    )


async def test_stream_output_chunks_are_bounded_and_complete() -> None:
    sent: list[dict[str, Any]] = []
    stream = UpdateStream("s", _collect(sent))
    big = "".join(f"line {i} ünïcode\n" for i in range(5000))
    await stream.put(_output(big))
    for i in range(100):
        await stream.put(_output(f"{i}\n"))
    await stream.flush()
    texts = [u["update"]["output"]["text"] for u in sent]
    assert "".join(texts) == big + "".join(f"{i}\n" for i in range(100))
    assert all(len(t.encode("utf-8")) <= MAX_OUTPUT_CHUNK for t in texts)
    assert len(texts) < 20  # small chunks were merged
    await stream.close()


async def test_stream_is_bounded_when_the_client_stops_reading() -> None:
    sent: list[dict[str, Any]] = []
    reading = asyncio.Event()  # the transport never drains until we say so

    async def drained() -> None:
        await reading.wait()

    stream = UpdateStream("s", _collect(sent), drained=drained, max_pending=8)

    async def produce() -> None:
        for i in range(100):
            await stream.put(_tool_call(str(i)))

    producer = asyncio.create_task(produce())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not producer.done()  # back-pressure: the producer waits
    assert stream.pending <= 8 and sent == []
    reading.set()
    await asyncio.wait_for(producer, 5)
    await stream.flush()
    assert [u["update"]["toolCallId"] for u in sent] == [str(i) for i in range(100)]
    await stream.close()


@pytest.mark.parametrize(
    ("line", "layer", "outside"),
    [
        ("echo hi > out.txt", Layer.NATIVE, []),
        ("echo hi > /tmp/x", Layer.NATIVE, ["/tmp/x"]),
        ("echo hi 2>/dev/null", Layer.NATIVE, []),
        ("rm -rf ../other", Layer.NATIVE, ["/ws/../other"]),
        ("cd sub && cp a /etc/b", Layer.NATIVE, ["/etc/b"]),
        ("sed -i s/a/b/ /etc/hosts", Layer.NATIVE, ["/etc/hosts"]),
        ("cat /etc/hosts", Layer.NATIVE, []),
        ("write /tmp/n.txt hi", Layer.AGENT, ["/tmp/n.txt"]),
        ("edit a.py x y", Layer.AGENT, []),
        # `cd` within the line is followed
        ("cd .. && rm -rf other", Layer.NATIVE, ["/ws/../other"]),
        ("cd sub && rm x && cd /tmp && touch y", Layer.NATIVE, ["/tmp/y"]),
        ("cd - && rm x", Layer.NATIVE, ["x"]),  # unknown directory: asked, not guessed
        ("pushd /etc; touch hosts", Layer.NATIVE, ["/etc/hosts"]),
        # the script of bash -c / sh -lc
        ("bash -c 'rm -rf /opt/x'", Layer.NATIVE, ["/opt/x"]),
        ('sh -lc "cd /tmp && echo hi > f"', Layer.NATIVE, ["/tmp/f"]),
        ("bash -c 'echo hi > ok.txt'", Layer.NATIVE, []),
        # variables: known ones expanded, unknown ones asked
        ("rm -f $SYNAPSE_TEST_UNSET_VAR/x", Layer.NATIVE, ["$SYNAPSE_TEST_UNSET_VAR/x"]),
        ("touch $HOME/.bashrc", Layer.NATIVE, [f"{Path.home()}/.bashrc"]),
        ("sudo env X=1 rm /etc/passwd", Layer.NATIVE, ["/etc/passwd"]),
        # issue 28 item 7: quotes are read as bash reads them
        ("echo 'hello > /etc/passwd'", Layer.NATIVE, []),
        ('echo "a >> /etc/x" | cat', Layer.NATIVE, []),
        ("cat <<< 'x > /etc/y'", Layer.NATIVE, []),
        ("touch '$(touch PWNED).txt'", Layer.NATIVE, []),
        ("echo x > '$(touch PWNED).txt'", Layer.NATIVE, []),
        ("write '$(touch PWNED).txt' hi", Layer.AGENT, []),
        ('echo x >"/etc/q"', Layer.NATIVE, ["/etc/q"]),
        ('echo "$(echo hi > /etc/z)"', Layer.NATIVE, ["/etc/z"]),
        ('touch "$(echo x)"', Layer.NATIVE, ["$(echo x)"]),
    ],
)
def test_writes_outside(line: str, layer: Layer, outside: list[str]) -> None:
    found = writes_outside(line, layer, Path("/ws"), Path("/ws"))
    assert [re.sub(r"^/ws/\.\./", "/ws/../", f) for f in found] == outside


async def test_allow_globs_never_cover_chained_commands() -> None:
    asked: list[str] = []

    async def ask(question: Question) -> str | None:
        asked.append(question.message)
        return "Deny"

    settings = Settings(permission="ask-all-native", allow=("git status*",), deny=("rm -rf /*",))
    gate = AskingGate(lambda: settings, Path("/ws"), ask)
    assert await gate.check("git status --short", Layer.NATIVE, Path("/ws")) is None
    assert asked == []
    denied = await gate.check("git status && rm -rf /", Layer.NATIVE, Path("/ws"))
    assert denied is not None and "deny" in denied  # the deny glob matched a segment
    assert await gate.check("git status; curl x | sh", Layer.NATIVE, Path("/ws")) == (
        "denied by the user"
    )
    assert await gate.check("git status $(touch x)", Layer.NATIVE, Path("/ws")) == (
        "denied by the user"
    )
    assert len(asked) == 2


def test_a_copy_writes_its_destination_not_its_sources(tmp_path: Path) -> None:
    """Issue 28 item 5: `cp /etc/hostname x` was asked about as a write of /etc/hostname."""
    root = tmp_path
    assert writes_outside("cp /etc/hostname x", Layer.NATIVE, root, root) == []
    assert writes_outside("cp -p /etc/a /etc/b x/", Layer.NATIVE, root, root) == []
    assert writes_outside("cp x /etc/y", Layer.NATIVE, root, root) == ["/etc/y"]
    assert writes_outside("cp -t /etc a b", Layer.NATIVE, root, root) == ["/etc"]
    assert writes_outside("ln -s /usr/bin/python3 py", Layer.NATIVE, root, root) == []
    assert writes_outside("mv /etc/a x", Layer.NATIVE, root, root) == ["/etc/a"]  # moved away
