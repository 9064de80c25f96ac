"""A scripted fake of the Anthropic Messages API: real HTTP/1.1 + SSE on 127.0.0.1.

Tests, benchmarks and the offline demo point the real `anthropic` SDK at it
(`base_url`/`ANTHROPIC_BASE_URL`). Each `POST /v1/messages` takes the next
scripted response and replays it as the SSE stream the API would send (text,
thinking and `tool_use` blocks with `input_json_delta`), or as an HTTP error
(429 with `retry-after`, 529 `overloaded_error`…), an `event: error` inside the
stream, a connection cut mid-message, a stream that hangs, or malformed SSE (a
`data:` line that is not JSON, an event missing a field, a stream cut mid-event). Every request is
recorded (`api.requests`; `GET /_requests` from another process). The script
format is documented in docs/agent.md.

`POST /v1/messages/count_tokens` answers like the API, `{"input_tokens": N}`, with a
deterministic count (`fake_token_count`: a quarter of the characters of the compact
JSON of `system`, `tools` and `messages`, rounded up) and takes nothing from the
script; `count_tokens=False` makes it a 404, as on an endpoint without it.

Stdlib only (asyncio streams): no web framework, so it starts in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from synapse_lsp import __version__

JSON = dict[str, Any]

_RESPONSE_KEYS = {
    "text", "thinking", "commands", "content", "stop_reason", "usage", "delay", "chunk_delay",
    "chunk_size", "drop_after", "hang_after", "end_delay", "stream_error", "malformed", "error",
    "template", "stream", "set_cookie",
}  # fmt: skip


class ScriptError(ValueError):
    """The script is malformed; the message names the response and the problem."""


@dataclass
class Script:
    """A queue of responses; `loop` replays them forever; `fallback` answers when empty;
    `restart_on_prompt` starts the list over at each new prompt (a request whose last user
    message carries text, not only tool results), so a turn cut short (Ctrl-C) leaves
    no step of its script behind for the next prompt (the offline demo's use)."""

    responses: list[JSON] = field(default_factory=list)
    loop: bool = False
    fallback: JSON | None = None
    restart_on_prompt: bool = False

    @classmethod
    def parse(cls, raw: Any) -> Script:
        if isinstance(raw, Script):
            return raw
        if raw is None:
            return cls()
        if isinstance(raw, list):
            raw = {"responses": raw}
        if not isinstance(raw, dict):
            raise ScriptError("a script is a JSON list of responses or an object with 'responses'")
        unknown = set(raw) - {"responses", "loop", "fallback", "restart_on_prompt"}
        if unknown:
            raise ScriptError(f"unknown script keys: {sorted(unknown)}")
        items = raw.get("responses", [])
        if not isinstance(items, list):
            raise ScriptError("'responses' must be a list")
        responses = [normalize_response(item, f"responses[{i}]") for i, item in enumerate(items)]
        fallback = raw.get("fallback")
        return cls(
            responses=responses,
            loop=bool(raw.get("loop", False)),
            restart_on_prompt=bool(raw.get("restart_on_prompt", False)),
            fallback=normalize_response(fallback, "fallback") if fallback is not None else None,
        )


def normalize_response(item: Any, where: str = "response") -> JSON:
    """Check one scripted response and expand shorthands into `content` blocks."""
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict):
        raise ScriptError(f"{where}: expected an object or a string, got {type(item).__name__}")
    unknown = set(item) - _RESPONSE_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    out = dict(item)
    if "error" in out:
        err = out["error"]
        if not isinstance(err, dict) or not isinstance(err.get("status"), int):
            raise ScriptError(f"{where}: 'error' needs an integer 'status'")
        return out
    malformed = out.get("malformed")
    if malformed is not None:
        kind = malformed.get("kind") if isinstance(malformed, dict) else None
        if kind not in MALFORMED_KINDS:
            raise ScriptError(
                f"{where}: 'malformed' is {{\"kind\": one of {sorted(MALFORMED_KINDS)}, "
                '"after": N}'
            )
    if "content" in out:
        if not isinstance(out["content"], list):
            raise ScriptError(f"{where}: 'content' must be a list of blocks")
        blocks = [_block(b, f"{where}.content[{i}]") for i, b in enumerate(out["content"])]
    else:
        blocks = []
        if "thinking" in out:
            blocks.append(_block({"type": "thinking", "thinking": out["thinking"]}, where))
        if "text" in out:
            blocks.append({"type": "text", "text": str(out["text"])})
        commands = out.get("commands", [])
        if not isinstance(commands, list):
            raise ScriptError(f"{where}: 'commands' must be a list")
        for i, cmd in enumerate(commands):
            spec = {"command": cmd} if isinstance(cmd, str) else cmd
            blocks.append(_block({"type": "tool_use", **spec}, f"{where}.commands[{i}]"))
    out["content"] = blocks
    stop = out.get("stop_reason")
    if stop is None:
        out["stop_reason"] = (
            "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        )
    elif stop not in ("end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence"):
        raise ScriptError(f"{where}: unknown stop_reason {stop!r}")
    return out


MALFORMED_KINDS = frozenset({"invalid_json", "missing_field", "truncated"})


def _block(block: Any, where: str) -> JSON:
    if not isinstance(block, dict) or "type" not in block:
        raise ScriptError(f"{where}: a block is an object with a 'type'")
    kind = block["type"]
    if kind == "raw":  # sent verbatim in content_block_start (redacted_thinking, new types)
        inner = block.get("block")
        if not isinstance(inner, dict) or not isinstance(inner.get("type"), str):
            raise ScriptError(f"{where}: a raw block needs 'block', an object with a 'type'")
        return {"type": "raw", "block": inner}
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "thinking":
        return {
            "type": "thinking",
            "thinking": str(block.get("thinking", "")),
            "signature": str(block.get("signature", "fake-signature")),
        }
    if kind == "tool_use":
        if "input_json" in block:  # raw JSON text as streamed, e.g. cut by max_tokens
            tool_input = None
        elif "input" in block:
            tool_input = block["input"]
        elif "command" in block:
            tool_input = {"command": block["command"]}
            if block.get("restart"):
                tool_input["restart"] = True
        else:
            raise ScriptError(f"{where}: a tool_use needs 'command' or 'input'")
        out: JSON = {"type": "tool_use", "name": block.get("name", "Bash"), "input": tool_input}
        if tool_input is None:
            out["input_json"] = str(block["input_json"])
        if "id" in block:
            out["id"] = str(block["id"])
        return out
    raise ScriptError(f"{where}: unknown block type {kind!r}")


def demo_script() -> JSON:
    """The offline demo model: runs `ls`, then shows what it saw. Loops forever."""
    return {
        "loop": True,
        "restart_on_prompt": True,  # a cancelled turn must not leave the demo a step behind
        "responses": [
            {
                "template": True,
                "text": "(offline demo model) You said: \u201c{last_user_text}\u201d. I can't "
                "think without a real model, but I can show you the loop: I'll run `ls` "
                "through the one Bash tool.",
                "commands": ["ls"],
                "chunk_size": 6,
                "chunk_delay": 0.01,
            },
            {
                "template": True,
                "text": "The tool came back with:\n\n{last_tool_result}\n\nThat was the whole "
                "loop: model -> Bash tool -> router -> shell -> result -> model. Set "
                "ANTHROPIC_API_KEY to talk to Claude for real.",
                "chunk_size": 6,
                "chunk_delay": 0.01,
            },
        ],
    }


def _sse(event: str, data: JSON) -> bytes:
    payload = f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _chunks(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


def _last_texts(body: JSON) -> tuple[str, str]:
    """(last user text, last tool_result text) of a request, for templates."""
    user_text, tool_text = "", ""
    for msg in body.get("messages", []):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            user_text = content
            continue
        for block in content or []:
            if block.get("type") == "text":
                user_text = block.get("text", "")
            elif block.get("type") == "tool_result":
                inner = block.get("content", "")
                if isinstance(inner, list):
                    inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                tool_text = str(inner)
    return user_text, tool_text


def _new_prompt(body: JSON) -> bool:
    """The request's last user message carries the user's text (a new prompt), not only
    the tool results of the previous answer."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return False
    content = users[-1].get("content")
    if isinstance(content, str):
        return True
    return any(isinstance(b, dict) and b.get("type") == "text" for b in content or [])


def fake_token_count(body: JSON) -> int:
    """The fake API's token count of a request: ceil(characters / 4) of the compact JSON
    of its `system`, `tools` and `messages` (what is absent counts nothing)."""
    chars = sum(
        len(json.dumps(body[key], separators=(",", ":"), ensure_ascii=False))
        for key in ("system", "tools", "messages")
        if key in body
    )
    return -(-chars // 4)


class _Template(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class FakeAnthropic:
    """`async with FakeAnthropic(script) as api:` -> `api.base_url`, `api.requests`."""

    def __init__(
        self,
        script: Any = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        keep_requests: int | None = None,
        count_tokens: bool = True,
    ) -> None:
        """`keep_requests`: remember only the last N requests (long benchmarks); None = all.
        `count_tokens`: serve `POST /v1/messages/count_tokens` (else it is a 404)."""
        parsed = Script.parse(script)
        self.keep_requests = keep_requests
        self.count_tokens = count_tokens
        self._queue: deque[JSON] = deque(parsed.responses)
        self._all = list(parsed.responses)
        self.loop = parsed.loop
        self.restart_on_prompt = parsed.restart_on_prompt
        self.fallback = parsed.fallback
        self.host = host
        self.port = port
        self.requests: list[JSON] = []
        self._server: asyncio.Server | None = None
        self._tool_ids = 0
        self._connections: set[asyncio.Task[None]] = set()
        self.connections = 0  # accepted, in all
        self.bodies_ended = 0  # streamed bodies sent to their end

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> FakeAnthropic:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            for task in list(self._connections):
                with contextlib.suppress(BaseException):
                    await task
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeAnthropic:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def message_requests(self) -> list[JSON]:
        """Bodies of the `POST /v1/messages` requests, in order."""
        return [
            r["body"]
            for r in self.requests
            if r["path"].split("?", 1)[0] == "/v1/messages" and r["method"] == "POST"
        ]

    @property
    def count_requests(self) -> list[JSON]:
        """Bodies of the `POST /v1/messages/count_tokens` requests, in order."""
        return [
            r["body"]
            for r in self.requests
            if r["path"].split("?", 1)[0] == "/v1/messages/count_tokens" and r["method"] == "POST"
        ]

    @property
    def calls(self) -> int:
        return len(self.message_requests)

    def add(self, *responses: Any) -> None:
        for i, item in enumerate(responses):
            norm = normalize_response(item, f"added[{i}]")
            self._queue.append(norm)
            self._all.append(norm)

    def _next(self, body: JSON | None = None) -> JSON:
        if self.restart_on_prompt and body is not None and _new_prompt(body):
            self._queue = deque(self._all)
        if not self._queue and self.loop and self._all:
            self._queue.extend(self._all)
        if self._queue:
            return self._queue.popleft()
        if self.fallback is not None:
            return self.fallback
        return {
            "error": {
                "status": 400,
                "type": "invalid_request_error",
                "message": "fake API: the script has no response left for this request",
            }
        }

    # ----------------------------------------------------------------- HTTP

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        headers[key.strip().lower()] = value.strip()
                body = await _read_body(reader, headers)
                try:
                    keep = await self._dispatch(method, path, headers, body, reader, writer)
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as exc:  # a bug here must show, not hang the client
                    print(f"fake-api: internal error: {exc!r}", file=sys.stderr)
                    await _error(writer, 500, "fake_internal_error", repr(exc))
                    return
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # closing the server: end quietly (the connection task is top-level)
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _dispatch(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        route = path.split("?", 1)[0]
        if route == "/_requests" and method == "GET":
            return await _respond(writer, 200, self.requests)
        if route == "/_requests" and method == "DELETE":
            self.requests.clear()
            return await _respond(writer, 200, {"ok": True})
        if route == "/_health":
            return await _respond(writer, 200, {"ok": True, "queued": len(self._queue)})
        if route == "/_script" and method == "POST":
            try:
                data = json.loads(raw or b"[]")
                self.add(*(data if isinstance(data, list) else [data]))
            except (ValueError, ScriptError) as exc:
                return await _respond(writer, 400, {"error": str(exc)})
            return await _respond(writer, 200, {"ok": True, "queued": len(self._queue)})
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        self.requests.append(
            {
                "method": method,
                "path": path,
                # Credentials are never recorded: only whether some were sent.
                "headers": {
                    k: v for k, v in headers.items() if k not in ("authorization", "x-api-key")
                },
                "authenticated": "authorization" in headers or "x-api-key" in headers,
                "body": body,
            }
        )
        if self.keep_requests is not None and len(self.requests) > self.keep_requests:
            del self.requests[: len(self.requests) - self.keep_requests]
        if route == "/v1/messages/count_tokens" and method == "POST" and self.count_tokens:
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return await _error(
                    writer, 400, "invalid_request_error", "messages: Field required"
                )
            return await _respond(writer, 200, {"input_tokens": fake_token_count(body)})
        if route != "/v1/messages" or method != "POST":
            return await _error(writer, 404, "not_found_error", f"no route {method} {path}")
        response = self._next(body if isinstance(body, dict) else None)
        if response.get("delay"):
            await asyncio.sleep(float(response["delay"]))
        if "error" in response:
            err = response["error"]
            names = {"retry_after": "retry-after", "retry_after_ms": "retry-after-ms"}
            extra = {names[key]: str(value) for key, value in err.items() if key in names}
            kind = str(err.get("type", "api_error"))
            said = str(err.get("message", "scripted error"))
            return await _error(writer, int(err["status"]), kind, said, extra)
        if body.get("stream") is False or response.get("stream") is False:
            return await _respond(writer, 200, self._message_json(response, body, raw))
        return await self._stream(response, body, raw, reader, writer)

    def _blocks(self, response: JSON, body: JSON) -> list[JSON]:
        blocks: list[JSON] = []
        values: _Template | None = None
        if response.get("template"):
            user_text, tool_text = _last_texts(body)
            values = _Template(last_user_text=user_text, last_tool_result=tool_text)
        for block in response["content"]:
            block = dict(block)
            if values is not None and block["type"] == "text":
                block["text"] = block["text"].format_map(values)
            if block["type"] == "raw":
                blocks.append(block["block"])
                continue
            if block["type"] == "tool_use" and "id" not in block:
                self._tool_ids += 1
                block["id"] = f"toolu_fake_{self._tool_ids:04d}"
            blocks.append(block)
        return blocks

    def _usage(self, response: JSON, raw: bytes, blocks: list[JSON]) -> JSON:
        chars = sum(len(json.dumps(b)) for b in blocks)
        usage = {
            "input_tokens": len(raw) // 4,
            "output_tokens": chars // 4 + 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        usage.update(response.get("usage") or {})
        return usage

    def _message_json(self, response: JSON, body: JSON, raw: bytes) -> JSON:
        blocks = self._blocks(response, body)
        return {
            "id": f"msg_fake_{len(self.requests):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake-model"),
            "content": blocks,
            "stop_reason": response["stop_reason"],
            "stop_sequence": None,
            "usage": self._usage(response, raw, blocks),
        }

    def _events(self, response: JSON, body: JSON, raw: bytes) -> list[tuple[str, JSON]]:
        blocks = self._blocks(response, body)
        usage = self._usage(response, raw, blocks)
        size = int(response.get("chunk_size", 24))
        events: list[tuple[str, JSON]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": f"msg_fake_{len(self.requests):04d}",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", "fake-model"),
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            ),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(blocks):
            kind = block["type"]
            if kind == "text":
                start: JSON = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], size)]
            elif kind not in ("thinking", "tool_use"):  # a raw block: all in its start
                start, deltas = block, []
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": c}
                    for c in _chunks(block["thinking"], size)
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": c}
                    for c in _chunks(block.get("input_json") or json.dumps(block["input"]), size)
                ]
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            events += [
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in deltas
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": response["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    async def _stream(
        self,
        response: JSON,
        body: JSON,
        raw: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        events = self._events(response, body, raw)
        cookie = f"set-cookie: {response['set_cookie']}\r\n" if "set_cookie" in response else ""
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nrequest-id: req_fake\r\n"
            + cookie.encode()
            + b"\r\n"
        )
        drop_after = response.get("drop_after")
        hang_after = response.get("hang_after")
        stream_error = response.get("stream_error")
        error_after = int(stream_error.get("after", 2)) if isinstance(stream_error, dict) else None
        chunk_delay = float(response.get("chunk_delay", 0) or 0)
        malformed = response.get("malformed")
        bad_kind = malformed["kind"] if isinstance(malformed, dict) else None
        bad_at = int(malformed.get("after", 2)) if isinstance(malformed, dict) else None
        for sent, (name, data) in enumerate(events):
            if bad_at is not None and sent == bad_at:
                if bad_kind == "truncated":  # the body ends cleanly, mid-event
                    payload = _sse(name, data).split(b"\r\n", 1)[1][:-2]
                    half = payload[: max(1, len(payload) // 2)]
                    writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(half), half))
                    await writer.drain()
                    return True
                if bad_kind == "invalid_json":
                    garbage = f'event: {name}\ndata: {{"type": "{name}", "ind\n\n'.encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(garbage), garbage))
                else:  # missing_field: the field the event's type needs most
                    gone = next(
                        (k for k in ("delta", "content_block", "message") if k in data), "type"
                    )
                    writer.write(_sse(name, {k: v for k, v in data.items() if k != gone}))
                continue
            if drop_after is not None and sent >= int(drop_after):
                await writer.drain()
                writer.transport.abort()  # cut the connection mid-message
                return False
            if hang_after is not None and sent >= int(hang_after):
                await writer.drain()
                await reader.read()  # until the client goes away
                return False
            if error_after is not None and sent >= error_after:
                assert isinstance(stream_error, dict)
                writer.write(
                    _sse(
                        "error",
                        {
                            "type": "error",
                            "error": {
                                "type": stream_error.get("type", "overloaded_error"),
                                "message": stream_error.get("message", "Overloaded"),
                            },
                        },
                    )
                )
                break
            writer.write(_sse(name, data))
            if chunk_delay:
                await writer.drain()
                await asyncio.sleep(chunk_delay)
        end_delay = float(response.get("end_delay", 0) or 0)
        if end_delay:  # the message is whole; the body's end comes late
            await writer.drain()
            await asyncio.sleep(end_delay)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.bodies_ended += 1
        return True


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length else b""


async def _respond(
    writer: asyncio.StreamWriter, status: int, data: Any, headers: dict[str, str] | None = None
) -> bool:
    payload = json.dumps(data).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    writer.write(
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\ncontent-type: application/json"
        f"\r\ncontent-length: {len(payload)}\r\nrequest-id: req_fake\r\n{extra}\r\n".encode()
        + payload
    )
    await writer.drain()
    return True


async def _error(
    writer: asyncio.StreamWriter,
    status: int,
    err_type: str,
    message: str,
    headers: dict[str, str] | None = None,
) -> bool:
    error = {"type": "error", "error": {"type": err_type, "message": message}}
    return await _respond(writer, status, error, {"x-should-retry": "false", **(headers or {})})


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


# --------------------------------------------------------------------- CLI


def load_script(path: Path) -> Script:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ScriptError(f"{path} is not valid JSON: {exc}") from None
    return Script.parse(raw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse fake-api",
        description="Serve a scripted fake Anthropic Messages API on loopback (for tests, "
        "editor trials and the offline demo). Point ANTHROPIC_BASE_URL at the printed URL.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", type=Path, help="JSON script (format: docs/agent.md)")
    source.add_argument("--demo", action="store_true", help="serve the offline demo model")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=0, help="0 = any free port (default)")
    parser.add_argument("--port-file", type=Path, help="write the chosen port to this file")
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


async def _serve_forever(api: FakeAnthropic, port_file: Path | None) -> None:
    await api.start()
    print(f"ANTHROPIC_BASE_URL={api.base_url}", flush=True)
    if port_file is not None:
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(str(api.port), encoding="utf-8")
        tmp.replace(port_file)  # readers never see a half-written file
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await api.close()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        script = Script.parse(demo_script()) if args.demo else load_script(args.script)
    except ScriptError as exc:
        print(f"synapse fake-api: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(
            _serve_forever(FakeAnthropic(script, host=args.host, port=args.port), args.port_file)
        )
    except OSError as exc:
        print(f"synapse fake-api: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0
