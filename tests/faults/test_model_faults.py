"""Fault drill, the model API: a refused request is final, whatever its body says;
malformed SSE is retried like a dropped stream and ends in one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient, StreamDone, StreamRetry
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.errors import ModelError
from synapse_lsp.events import TurnFinished
from synapse_lsp.router import BashRouter
from tests.fake_api import FakeApiProcess


async def _call(api: FakeAnthropic) -> list[Any]:
    model = ModelClient(
        api_key="sk-ant-fault", base_url=api.base_url, model="m", max_attempts=5,
        retry_base_delay=0.001,
    )  # fmt: skip
    items: list[Any] = []
    try:
        async for item in model.stream(system="s", messages=[{"role": "user", "content": "hi"}]):
            items.append(item)
    finally:
        await model.close()
    return items


async def test_a_400_with_api_error_in_its_body_is_not_retried() -> None:
    refused = {"error": {"status": 400, "type": "api_error", "message": "bad request"}}
    async with FakeAnthropic([refused, "never reached"]) as api:
        with pytest.raises(ModelError, match="refused the request.*bad request"):
            await _call(api)
        assert len(api.message_requests) == 1


async def test_a_529_overloaded_is_still_retried() -> None:
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}
    async with FakeAnthropic([overloaded, "fine"]) as api:
        items = await _call(api)
        assert any(isinstance(i, StreamRetry) for i in items)
        assert len(api.message_requests) == 2


@pytest.mark.parametrize("kind", ["invalid_json", "missing_field", "truncated"])
@pytest.mark.parametrize("after", [0, 4])
async def test_malformed_sse_is_retried_like_a_dropped_stream(kind: str, after: int) -> None:
    bad = {"text": "a cut answer", "chunk_size": 3, "malformed": {"kind": kind, "after": after}}
    async with FakeAnthropic([bad, "fine"]) as api:
        items = await _call(api)
        retries = [i for i in items if isinstance(i, StreamRetry)]
        assert len(retries) == 1, items
        assert "malformed stream" in retries[0].cause or (
            kind == "truncated" and "ended before message_stop" in retries[0].cause
        ), retries[0].cause
        done = items[-1]
        assert isinstance(done, StreamDone) and done.content == [{"type": "text", "text": "fine"}]
        assert len(api.message_requests) == 2


async def test_malformed_sse_that_keeps_coming_ends_in_one_model_error() -> None:
    bad = {"text": "x", "malformed": {"kind": "invalid_json", "after": 3}}
    async with FakeAnthropic({"responses": [bad], "loop": True}) as api:
        with pytest.raises(ModelError, match="failed after 5 attempts: malformed stream"):
            await _call(api)
        assert len(api.message_requests) == 5


def test_chat_p_with_malformed_sse_ends_with_one_error_line_and_no_traceback(
    tmp_path: Path,
) -> None:
    bad = {"text": "x", "malformed": {"kind": "missing_field", "after": 4}}
    with FakeApiProcess({"responses": [bad], "loop": True}, tmp_path / "api") as api:
        env = {**os.environ, **api.env(), "SYNAPSE_HOME": str(tmp_path / "home")}
        proc = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", "q"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        calls = len(api.message_bodies())
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "malformed stream" in errors[0], proc.stderr
    assert proc.stdout == ""
    assert calls == 5


async def test_unknown_content_blocks_are_not_stored_or_sent_back(
    router: BashRouter, settings: Settings
) -> None:
    """A block type this client does not know (a future type, a server tool's block) is
    left out of the history; thinking and redacted_thinking go back exactly as they came."""
    first = {
        "content": [
            {"type": "thinking", "thinking": "let me see", "signature": "sig-1"},
            {"type": "raw", "block": {"type": "redacted_thinking", "data": "opaque-data"}},
            {"type": "raw", "block": {"type": "mystery_block", "payload": "from the future"}},
            {"type": "text", "text": "Looking."},
            {
                "type": "raw",
                "block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "x"},
                },
            },
            {"type": "tool_use", "command": "echo hi"},
        ]
    }
    async with FakeAnthropic([first, "Done.", "Second turn."]) as api:
        model = ModelClient(
            api_key="sk-ant-fault", base_url=api.base_url, model="m", retry_base_delay=0.001
        )
        session = ChatSession(router, settings, model=model)
        try:
            for prompt in ("go", "again"):
                events = [e async for e in session.run_turn(prompt)]
                assert isinstance(events[-1], TurnFinished), events[-1]
                assert events[-1].stop_reason == "end_turn", events[-1]
        finally:
            await model.close()
        bodies = api.message_requests
    assert len(bodies) == 3
    for body in bodies[1:]:
        sent = json.dumps(body["messages"])
        assert "mystery_block" not in sent and "server_tool_use" not in sent
        assistant = body["messages"][1]
        assert assistant["role"] == "assistant"
        kinds = [b["type"] for b in assistant["content"]]
        assert kinds == ["thinking", "redacted_thinking", "text", "tool_use"], kinds
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "let me see",
            "signature": "sig-1",
        }
        assert assistant["content"][1] == {"type": "redacted_thinking", "data": "opaque-data"}
