"""The model client against the fake Messages API, over real HTTP with the real SDK."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import (
    ModelClient,
    StreamDone,
    StreamItem,
    StreamRetry,
    StreamText,
    StreamThinking,
    StreamToolUse,
)
from synapse_lsp.agent.scripted_api import FakeAnthropic, Script, ScriptError, demo_script
from synapse_lsp.config import Settings
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Usage

KEY = "sk-ant-test-SECRET-0123456789"


def client(api: FakeAnthropic, **kw: Any) -> ModelClient:
    kw.setdefault("model", "fake-model")
    return ModelClient(api_key=KEY, base_url=api.base_url, retry_base_delay=0.001, **kw)


WARM_UP = "warm-up answer"


@pytest.fixture(params=["first request", "later request"])
def later(request: pytest.FixtureRequest) -> bool:
    """Whether the request under test follows one that went well: the first goes through
    the SDK's `post`, later ones reuse the request it built (`agent/sdk_post.py`). With
    it, a script starts with WARM_UP and `collect` takes that answer first."""
    return bool(request.param == "later request")


def warm(script: list[Any], later: bool) -> list[Any]:
    return [WARM_UP, *script] if later else script


async def collect(model: ModelClient, text: str = "hi", *, later: bool = False) -> list[StreamItem]:
    items: list[StreamItem] = []
    try:
        if later:
            first = [
                i
                async for i in model.stream(system="s", messages=[{"role": "user", "content": "w"}])
            ]
            assert isinstance(first[-1], StreamDone)
            assert first[-1].content == [{"type": "text", "text": WARM_UP}]
        async for item in model.stream(
            system="You are a test.", messages=[{"role": "user", "content": text}]
        ):
            items.append(item)
    finally:
        await model.close()
    return items


async def test_streams_text_then_the_finished_message() -> None:
    async with FakeAnthropic([{"text": "Hello, streaming world!", "chunk_size": 5}]) as api:
        items = await collect(client(api))
    texts = [i.text for i in items if isinstance(i, StreamText)]
    assert texts == ["Hello", ", str", "eamin", "g wor", "ld!"]
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert done.content == [{"type": "text", "text": "Hello, streaming world!"}]
    assert done.stop_reason == "end_turn"
    assert done.usage.output_tokens > 0
    assert api.message_requests[0]["stream"] is True
    assert api.message_requests[0]["system"] == "You are a test."


async def test_tool_use_blocks_and_thinking_are_assembled_in_order() -> None:
    script = [
        {
            "thinking": "let me see",
            "text": "Running two commands.",
            "commands": ["ls -la", {"command": "pwd", "restart": True, "id": "toolu_x"}],
            "chunk_size": 3,
        }
    ]
    async with FakeAnthropic(script) as api:
        items = await collect(client(api))
    assert [i.text for i in items if isinstance(i, StreamThinking)] == ["let", " me", " se", "e"]
    starts = [i for i in items if isinstance(i, StreamToolUse)]
    assert [s.name for s in starts] == ["Bash", "Bash"]
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "tool_use"
    assert done.content == [
        {"type": "thinking", "thinking": "let me see", "signature": "fake-signature"},
        {"type": "text", "text": "Running two commands."},
        {"type": "tool_use", "id": starts[0].id, "name": "Bash", "input": {"command": "ls -la"}},
        {
            "type": "tool_use",
            "id": "toolu_x",
            "name": "Bash",
            "input": {"command": "pwd", "restart": True},
        },
    ]


async def test_retries_each_transient_failure_then_succeeds(later: bool) -> None:
    script = [
        {
            "error": {
                "status": 429,
                "type": "rate_limit_error",
                "message": "slow",
                "retry_after": 0.05,
            }
        },  # noqa: E501
        {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}},
        {"text": "partial answer that is cut", "chunk_size": 4, "drop_after": 5},
        {"text": "x", "stream_error": {"type": "overloaded_error", "after": 3}},
        {"text": "finally"},
    ]
    async with FakeAnthropic(warm(script, later)) as api:
        items = await collect(client(api, max_attempts=5), later=later)
        assert api.calls == 5 + later
    retries = [i for i in items if isinstance(i, StreamRetry)]
    assert [r.attempt for r in retries] == [1, 2, 3, 4]
    assert retries[0].delay == pytest.approx(0.05)  # retry-after honoured
    assert "429" in retries[0].cause and "rate_limit_error" in retries[0].cause
    assert "overloaded_error" in retries[1].cause
    assert "stream dropped" in retries[2].cause
    assert "overloaded_error" in retries[3].cause and "stream error" in retries[3].cause
    # the partial text of the dropped attempt came before its StreamRetry
    cut = items.index(retries[2])
    assert any(isinstance(i, StreamText) for i in items[:cut])
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert done.content == [{"type": "text", "text": "finally"}]


async def test_retry_after_ms_header_wins_and_is_capped() -> None:
    script = [
        {
            "error": {
                "status": 429,
                "type": "rate_limit_error",
                "message": "s",
                "retry_after_ms": 20,
            }
        },  # noqa: E501
        {"error": {"status": 503, "type": "api_error", "message": "s", "retry_after": 999}},
        "ok",
    ]
    async with FakeAnthropic(script) as api:
        items = await collect(client(api, retry_max_delay=0.03))
    delays = [i.delay for i in items if isinstance(i, StreamRetry)]
    assert delays == [pytest.approx(0.02), pytest.approx(0.03)]


async def test_retries_exhausted_give_a_clear_error_naming_the_cause(later: bool) -> None:
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    async with FakeAnthropic(warm([overloaded] * 3, later)) as api:
        with pytest.raises(ModelError) as info:
            await collect(client(api, max_attempts=3), later=later)
        assert api.calls == 3 + later
    assert "after 3 attempts" in info.value.message
    assert "overloaded_error" in info.value.message
    assert info.value.cause is not None and "529" in info.value.cause


async def test_a_request_error_is_not_retried(later: bool) -> None:
    bad = {"error": {"status": 400, "type": "invalid_request_error", "message": "bad field x"}}
    async with FakeAnthropic(warm([bad, "never"], later)) as api:
        with pytest.raises(ModelError) as info:
            await collect(client(api), later=later)
        assert api.calls == 1 + later
    assert "bad field x" in info.value.message
    assert info.value.cause == "invalid_request_error"


async def test_a_rejected_key_says_so_without_the_key(
    caplog: pytest.LogCaptureFixture, later: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    denied = {
        "error": {"status": 401, "type": "authentication_error", "message": "invalid x-api-key"}
    }
    async with FakeAnthropic(warm([denied], later)) as api:
        with pytest.raises(ModelError) as info:
            await collect(client(api), later=later)
        assert api.requests[-1]["authenticated"] is True
        assert KEY not in json.dumps(api.requests)
    assert "rejected" in info.value.message
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert KEY not in caplog.text


async def test_the_key_never_reaches_logs_or_errors(
    caplog: pytest.LogCaptureFixture, later: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    script = [
        {"error": {"status": 500, "type": "api_error", "message": "boom"}},
        {"text": "t", "drop_after": 3},
        {"error": {"status": 500, "type": "api_error", "message": "boom"}},
    ]
    async with FakeAnthropic(warm(script, later)) as api:
        model = client(api, max_attempts=3)
        assert KEY not in repr(model)
        with pytest.raises(ModelError) as info:
            await collect(model, later=later)
    assert caplog.records  # the SDK and we did log at debug level…
    assert KEY not in caplog.text  # …but never the key
    assert KEY not in str(info.value)


async def test_a_request_that_times_out_is_retried(later: bool) -> None:
    """The client's timeout holds for later requests as for the first."""
    script = [{"text": "too late", "delay": 10}, "in time"]
    async with FakeAnthropic(warm(script, later)) as api:
        items = await asyncio.wait_for(
            collect(client(api, timeout=0.5, max_attempts=2), later=later), 8
        )
    retries = [i for i in items if isinstance(i, StreamRetry)]
    assert [r.cause for r in retries] == ["timed out (no answer in 0.5 s)"]
    done = items[-1]
    assert isinstance(done, StreamDone) and done.content == [{"type": "text", "text": "in time"}]


async def test_an_api_that_went_away_is_a_connection_failure(later: bool) -> None:
    async with FakeAnthropic([WARM_UP]) as api:
        model = client(api, max_attempts=2)
        if later:  # a request that went well, the client kept open
            async for _ in model.stream(system="s", messages=[{"role": "user", "content": "w"}]):
                pass
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(collect(model), 30)  # `collect` closes the client
    assert "failed after 2 attempts" in info.value.message
    assert "connection failed" in info.value.message
    assert KEY not in str(info.value)


async def test_each_request_is_sent_as_the_sdk_sends_the_first() -> None:
    """Later requests reuse the request the SDK built for the first: same path, same
    headers (the key and the SDK's own), each with its own body and length, and the
    cookie the API set last (as a gateway's affinity cookie)."""
    script = [{"text": t, "set_cookie": f"fake-affinity={i}; Path=/"} for i, t in enumerate("ab")]
    async with FakeAnthropic([*script, "three"]) as api:
        model = client(api)
        for text in ("a", "bb", "ccc"):
            async for _ in model.stream(system="s", messages=[{"role": "user", "content": text}]):
                pass
        await model.close()
        requests = api.requests
    assert [r["path"] for r in requests] == ["/v1/messages"] * 3
    assert all(r["authenticated"] for r in requests)
    assert [r["body"]["messages"][0]["content"] for r in requests] == ["a", "bb", "ccc"]
    assert [r["headers"].get("cookie") for r in requests] == [
        None, "fake-affinity=0", "fake-affinity=1"
    ]  # fmt: skip
    first = {k: v for k, v in requests[0]["headers"].items() if k != "content-length"}
    assert "anthropic-version" in first and "x-stainless-retry-count" in first
    for later_one in requests[1:]:
        headers = dict(later_one["headers"])
        del headers["cookie"]
        assert int(headers.pop("content-length")) == len(
            json.dumps(later_one["body"], separators=(",", ":"), ensure_ascii=False).encode()
        )
        assert headers == first


async def test_a_redirected_api_is_asked_at_its_own_url_each_time() -> None:
    """A base URL that redirects (307, as a gateway moving the API) is asked each time,
    as the SDK does: a later request is not sent straight to where the first went."""
    hits: list[str] = []

    async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        hits.append(head.split(b" ", 2)[1].decode())
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        writer.write(
            f"HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}/v1/messages\r\n"
            "content-length: 0\r\nconnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        writer.close()

    async with FakeAnthropic(["one", "two", "three"]) as api:
        target = api.base_url
        gateway = await asyncio.start_server(redirect, "127.0.0.1", 0)
        port = gateway.sockets[0].getsockname()[1]
        model = ModelClient(api_key=KEY, base_url=f"http://127.0.0.1:{port}", model="m")
        answers = []
        for _ in range(3):
            async for item in model.stream(system="s", messages=[{"role": "user", "content": "x"}]):
                if isinstance(item, StreamDone):
                    answers.append(item.content[0]["text"])
        await model.close()
        gateway.close()
        await gateway.wait_closed()
    assert answers == ["one", "two", "three"]
    assert hits == ["/v1/messages"] * 3


def test_no_key_is_a_how_to_message_not_a_traceback(tmp_path: Path) -> None:
    settings = Settings(synapse_home=tmp_path)
    with pytest.raises(ModelError) as info:
        ModelClient.from_settings(settings, env={})
    assert "ANTHROPIC_API_KEY" in info.value.message
    assert "export ANTHROPIC_API_KEY=" in info.value.message
    assert info.value.cause == "no_api_key"
    custom = Settings(synapse_home=tmp_path, api_key_env="MY_KEY")
    with pytest.raises(ModelError, match="MY_KEY"):
        ModelClient.from_settings(custom, env={"ANTHROPIC_API_KEY": "ignored"})


async def test_from_settings_reads_key_and_base_url_from_the_environment(tmp_path: Path) -> None:
    settings = Settings(synapse_home=tmp_path, model="claude-test-model", max_tokens=123)
    async with FakeAnthropic(["hi"]) as api:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
        model = ModelClient.from_settings(settings, env=env)
        items = await collect(model)
        body = api.message_requests[0]
    assert isinstance(items[-1], StreamDone)
    assert body["model"] == "claude-test-model"
    assert body["max_tokens"] == 123


async def test_max_tokens_and_refusal_stop_reasons_pass_through() -> None:
    script = [
        {"text": "cut he", "stop_reason": "max_tokens"},
        {"text": "", "stop_reason": "refusal"},
    ]
    async with FakeAnthropic(script) as api:
        first = await collect(client(api))
        second = await collect(client(api))
    assert isinstance(first[-1], StreamDone) and first[-1].stop_reason == "max_tokens"
    assert isinstance(second[-1], StreamDone) and second[-1].stop_reason == "refusal"


async def test_usage_is_reported_from_the_stream() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 42, "cache_read_input_tokens": 900}
    async with FakeAnthropic([{"text": "hi", "usage": usage}]) as api:
        items = await collect(client(api))
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert done.usage == Usage(1000, 42, 0, 900)


# ------------------------------------------------------------------ fake API


def test_script_shorthands_and_errors() -> None:
    script = Script.parse(["plain text", {"commands": ["ls"]}])
    assert script.responses[0]["content"] == [{"type": "text", "text": "plain text"}]
    assert script.responses[1]["stop_reason"] == "tool_use"
    with pytest.raises(ScriptError, match=r"responses\[0\]: unknown keys \['txt'\]"):
        Script.parse([{"txt": "typo"}])
    with pytest.raises(ScriptError, match="needs 'command' or 'input'"):
        Script.parse([{"content": [{"type": "tool_use"}]}])
    with pytest.raises(ScriptError, match="integer 'status'"):
        Script.parse([{"error": {"type": "x"}}])


async def test_an_exhausted_script_answers_a_clear_non_retried_error() -> None:
    async with FakeAnthropic([]) as api:
        with pytest.raises(ModelError, match="no response left"):
            await collect(client(api))
        assert api.calls == 1


async def test_demo_script_fills_its_templates_from_the_request() -> None:
    async with FakeAnthropic(demo_script()) as api:
        model = client(api)
        first = [
            i
            async for i in model.stream(
                system="s", messages=[{"role": "user", "content": "hello demo"}]
            )
        ]
        done = first[-1]
        assert isinstance(done, StreamDone)
        tool = done.content[-1]
        assert tool["input"] == {"command": "ls"}
        assert "hello demo" in done.content[0]["text"]
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "hello demo"},
            {"role": "assistant", "content": done.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": "a.txt"}],
            },
        ]
        second = [i async for i in model.stream(system="s", messages=messages)]
        await model.close()
    final = second[-1]
    assert isinstance(final, StreamDone)
    assert "a.txt" in final.content[0]["text"]


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists():
            return int(path.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"fake-api exited: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.02)
    raise AssertionError("fake-api did not write its port file")


async def test_fake_api_as_a_subprocess_records_requests(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the subprocess"}]))
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "fake-api", "--script", str(script)]
        + ["--port-file", str(port_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        port = await asyncio.to_thread(_wait_for, port_file, proc)
        model = ModelClient(api_key=KEY, base_url=f"http://127.0.0.1:{port}")
        items = await collect(model, "recorded?")
        assert isinstance(items[-1], StreamDone)
        assert items[-1].content == [{"type": "text", "text": "from the subprocess"}]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_requests", timeout=5) as resp:
            recorded = json.loads(resp.read())
        assert [r["body"]["messages"] for r in recorded] == [
            [{"role": "user", "content": "recorded?"}]
        ]
        assert KEY not in json.dumps(recorded)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}" in out


def test_fake_api_cli_rejects_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('[{"txt": 1}]')
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "fake-api", "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "unknown keys ['txt']" in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_a_whole_message_is_answered_before_its_body_ends() -> None:
    """`message_stop` makes the message whole: `StreamDone` comes then, while the body's
    end (late here) is read in the background; closing the client ends that read."""
    async with FakeAnthropic([{"text": "whole", "end_delay": 60}]) as api:
        model = client(api)
        ended_at_done: list[int] = []
        async for item in model.stream(system="s", messages=[{"role": "user", "content": "x"}]):
            if isinstance(item, StreamDone):
                ended_at_done.append(api.bodies_ended)
                assert item.content == [{"type": "text", "text": "whole"}]
        await asyncio.wait_for(model.close(), 10)  # not the 60 s of the body's end
    assert ended_at_done == [0]


async def test_calls_after_a_whole_message_keep_the_connection() -> None:
    """The body read to its end in the background leaves its connection to the next
    request: three calls, one connection."""
    async with FakeAnthropic([{"text": "one"}, {"text": "two"}, {"text": "three"}]) as api:
        model = client(api)
        answers = []
        for _ in range(3):
            async for item in model.stream(system="s", messages=[{"role": "user", "content": "x"}]):
                if isinstance(item, StreamDone):
                    answers.append(item.content[0]["text"])
            for _ in range(1000):  # the body's end, read in the background (bounded)
                if not model._draining:
                    break
                await asyncio.sleep(0.01)
        await model.close()
    assert answers == ["one", "two", "three"]
    assert api.connections == 1


def test_the_request_body_follows_messages_edited_in_place_and_other_conversations() -> None:
    """Each message's JSON is kept between calls: the body is still exactly the params'
    JSON after an earlier message is edited in place, the history is cut (a rewind),
    and while other conversations (subagents) send theirs in between."""
    from synapse_lsp.agent.request_body import KEPT_CONVERSATIONS, encode_body

    def conversation(first: str) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": first}], "stream": True}

    def plain(params: dict[str, Any]) -> bytes:
        return json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()

    main = conversation("go ✓")
    others = [conversation(f"sub {i}") for i in range(KEPT_CONVERSATIONS + 1)]
    for i in range(6):
        for params in (main, *others):
            params["messages"] += [
                {"role": "assistant", "content": [{"type": "text", "text": f"call {i}"}]},
                {"role": "user", "content": [{"type": "tool_result", "content": f"r{i}"}]},
            ]
            assert encode_body(params) == plain(params)
    main["messages"][2]["content"][0]["content"] = "edited in place"
    assert encode_body(main) == plain(main)
    main["messages"][-2]["content"][0]["cache_control"] = {"type": "ephemeral"}  # near the end
    assert encode_body(main) == plain(main)
    del main["messages"][-2]["content"][0]["cache_control"]
    main["messages"][-1]["content"][0]["content"] = "the end edited"
    main["messages"][3]["content"][0]["content"] = "and earlier"  # both: the first counts
    assert encode_body(main) == plain(main)
    main["messages"][1]["content"].append({"type": "text", "text": "one more block"})
    assert encode_body(main) == plain(main)
    del main["messages"][4:]
    assert encode_body(main) == plain(main)
    main["messages"].append({"role": "assistant", "content": "after the cut"})
    assert encode_body(main) == plain(main)


def test_the_request_body_follows_a_system_prompt_edited_in_place() -> None:
    """The system prompt's and the tools' JSON is kept between calls: the body is still
    exactly the params' JSON, after an edit in place of either too."""
    from synapse_lsp.agent.request_body import encode_body

    system = [{"type": "text", "text": "You are a test. ✓", "cache_control": {"type": "x"}}]
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    params: dict[str, Any] = {"model": "m", "system": system, "messages": [], "tools": tools}

    def plain() -> bytes:
        return json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()

    assert encode_body(params) == plain()
    system[0]["text"] = "Now something else."
    assert encode_body(params) == plain()
    tools[0]["name"] = "Other"
    del system[0]["cache_control"]
    assert encode_body(params) == plain()


def test_a_message_that_cannot_be_encoded_leaves_the_kept_ones_right() -> None:
    """A message the encoder refuses (a set) raises, and keeps nothing of itself: the
    next call with it still there raises again (no body silently without it), and
    once it is mended the body is exactly the params' JSON."""
    from synapse_lsp.agent.request_body import encode_body

    params: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "start of a conversation of its own"}],
    }

    def plain() -> bytes:
        return json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()

    assert encode_body(params) == plain()
    params["messages"].append({"role": "assistant", "content": [{"type": "x", "v": {1}}]})
    with pytest.raises(TypeError):
        encode_body(params)
    params["messages"].append({"role": "user", "content": "after"})
    with pytest.raises(TypeError):
        encode_body(params)
    params["messages"][1]["content"][0]["v"] = [1]
    assert encode_body(params) == plain()
