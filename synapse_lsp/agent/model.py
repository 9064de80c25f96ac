"""The model client: one streamed Messages API call, retried on transient failures.

Built on the official `anthropic` SDK (imported lazily: it costs seconds). The SDK's
own retries are switched off so that this module owns the policy: 408/409/429/5xx,
`overloaded_error`/`rate_limit_error`/`api_error` events, a stream that ends
without `message_stop` and a malformed stream (a `data:` line that is not JSON, an
event missing a field its type needs) are retried with exponential backoff, honouring
`retry-after-ms`/`retry-after`. After the last attempt a `ModelError` names the
cause. The API key is never put into a message, a log record or an exception.

The body is encoded once per call and sent as the SDK sent the first (`sdk_post.py`):
`messages.create` would deep-copy every block of the history on every call first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import threading
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import request_body
from synapse_lsp.agent.api_failures import (
    asked_delay,
    cannot_succeed,
    error_fields,
    root_cause,
    short,
    without_secrets,
)
from synapse_lsp.agent.sdk_post import Poster
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Usage

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from synapse_lsp.config import Settings

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's, when no base URL is given
NO_KEY_HELP = (
    "No Anthropic API key: set {env} in the environment (export {env}=sk-ant-...), "
    "or point ANTHROPIC_BASE_URL at a compatible endpoint and give its key in {env}. "
    "To try Synapse without a key, run `synapse chat --demo` (an offline demo model)."
)
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout"})
# Assistant blocks this client understands; any other type is left out of the history.
KNOWN_BLOCK_TYPES = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


# --------------------------------------------------------------- stream items


@dataclass(frozen=True)
class StreamText:
    text: str


@dataclass(frozen=True)
class StreamThinking:
    text: str


@dataclass(frozen=True)
class StreamToolUse:
    """A tool_use block started (its input arrives with the finished message)."""

    id: str
    name: str


@dataclass(frozen=True)
class StreamRetry:
    """The attempt failed and will be retried: anything streamed since the last
    `StreamRetry`/start belongs to the failed attempt and must be discarded."""

    attempt: int  # the attempt that failed, 1-based
    max_attempts: int
    delay: float
    cause: str


@dataclass(frozen=True)
class StreamDone:
    """The finished assistant message: content blocks in API form, ready for history."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str = ""


StreamItem = StreamText | StreamThinking | StreamToolUse | StreamRetry | StreamDone


@dataclass
class _Attempt:
    """Accumulates one streamed message."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    json_parts: dict[int, list[str]] = field(default_factory=dict)
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stopped: bool = False
    dropped: list[str] = field(default_factory=list)

    def feed(self, event: object) -> tuple[StreamItem, ...]:
        """Take one stream event (the API's JSON object); return what to yield for it.

        An event that lacks what its type needs (a delta without its `delta` or
        `index`, a block start without its block, text that is not a string…) raises
        `_MalformedStreamError`: the message it belongs to cannot be trusted, so the attempt
        is retried like a dropped stream."""
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise _MalformedStreamError(
                f"an event that is not an object with a type: {_peek(event)}"
            )
        kind = event["type"]
        if kind == "content_block_delta":
            delta = _field(event, "delta", dict)
            index = _field(event, "index", int)
            dtype = _field(delta, "type", str, kind)
            if dtype == "text_delta":
                text = _field(delta, "text", str, dtype)
                block = self.blocks.setdefault(index, {"type": "text", "text": ""})
                block["text"] = block.get("text", "") + text
                return (StreamText(text),)
            if dtype == "input_json_delta":
                self.json_parts.setdefault(index, []).append(
                    _field(delta, "partial_json", str, dtype)
                )
            elif dtype == "thinking_delta":
                thought = _field(delta, "thinking", str, dtype)
                block = self.blocks.setdefault(index, {"type": "thinking", "thinking": ""})
                block["thinking"] = block.get("thinking", "") + thought
                return (StreamThinking(thought),)
            elif dtype == "signature_delta":
                self.blocks.setdefault(index, {"type": "thinking"})["signature"] = delta.get(
                    "signature", ""
                )
            elif dtype == "citations_delta":
                citation = _without_nones(delta.get("citation") or {})
                self.blocks.setdefault(index, {"type": "text"}).setdefault("citations", []).append(
                    citation
                )
            return ()
        if kind == "content_block_start":
            block = _without_nones(_field(event, "content_block", dict))
            index = _field(event, "index", int)
            _field(block, "type", str, "content_block")
            if block.get("type") == "tool_use":
                block = {
                    "type": "tool_use",
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "input": {},
                }
                self.blocks[index] = block
                return (StreamToolUse(block["id"], block["name"]),)
            if block.get("type") == "text":
                block.setdefault("text", "")
            self.blocks[index] = block
            return ()
        if kind == "message_start":
            message = _field(event, "message", dict)
            self.model = message.get("model") or ""
            self.usage = _usage(message.get("usage") or {}, Usage())
        elif kind == "message_delta":
            stop_reason = _field(event, "delta", dict).get("stop_reason")
            self.stop_reason = stop_reason if isinstance(stop_reason, str) else self.stop_reason
            self.usage = _usage(event.get("usage") or {}, self.usage)
        elif kind == "message_stop":
            self.stopped = True
        return ()

    def content(self) -> list[dict[str, Any]]:
        """The finished blocks, in order, without those this client does not understand
        (a future block type, a server tool's block): stored in the history they would
        be sent back on every later call, and the API may refuse them out of context.
        `thinking` and `redacted_thinking` blocks are kept exactly as they came: the API
        wants them back unchanged."""
        out: list[dict[str, Any]] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.get("type") not in KNOWN_BLOCK_TYPES:
                self.dropped.append(str(block.get("type")))
                continue
            if block.get("type") == "tool_use":
                raw = "".join(self.json_parts.get(index, []))
                try:
                    parsed = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    # An input cut by max_tokens, or malformed: keep what arrived so the
                    # loop can say which (it knows the stop reason).
                    parsed = {"_incomplete_json": raw}
                block = {**block, "input": parsed if isinstance(parsed, dict) else {"_": parsed}}
            elif block.get("type") == "text" and not block.get("citations"):
                block = {"type": "text", "text": block.get("text", "")}
            out.append(block)
        return out


class _TransientError(Exception):
    """A failure worth retrying; `delay` is the server's retry-after, if it gave one."""

    def __init__(self, cause: str, delay: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.delay = delay


class _MalformedStreamError(_TransientError):
    """The stream sent something that is not a well-formed event: retried like a drop."""

    def __init__(self, what: str) -> None:
        super().__init__(f"malformed stream ({what})")


def _field(obj: dict[str, Any], key: str, kind: type, where: str = "") -> Any:
    """`obj[key]`, which must be a `kind`; else the stream is malformed."""
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        owner = where or str(obj.get("type", "event"))
        problem = "without" if value is None else f"with a non-{kind.__name__}"
        raise _MalformedStreamError(f"{owner} {problem} `{key}`")
    return value


def _peek(value: object) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 80 else text[:77] + "..."


class ModelClient:
    """Streams Messages API calls. One client per process is enough (it pools connections)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str = "claude-sonnet-5-5",
        max_tokens: int = 8192,
        max_attempts: int = 5,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        timeout: float = 600.0,
        thinking_budget: int | None = None,
        base_url_source: str = "",
    ) -> None:
        if not api_key:
            raise ModelError(NO_KEY_HELP.format(env="ANTHROPIC_API_KEY"), cause="no_api_key")
        self._api_key = api_key
        self.base_url = base_url
        # where the URL came from, for errors that name it ("$ANTHROPIC_BASE_URL")
        self.base_url_source = base_url_source or ("the default" if not base_url else "")
        self.model = model
        self.max_tokens = max_tokens
        self.max_attempts = max(1, max_attempts)
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.timeout = timeout
        self.thinking_budget = thinking_budget
        self._client: AsyncAnthropic | None = None
        self._post: Poster | None = None  # built with the client
        self._client_lock = threading.Lock()
        self.sent = asyncio.Event()  # a request went out (its answer's headers came back)
        self._draining: set[asyncio.Task[None]] = set()  # bodies read to their end (_drain)

    def __repr__(self) -> str:  # never show the key
        return f"ModelClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def endpoint(self) -> str:
        """The API's URL and where it came from, as errors name it."""
        url = without_secrets((self.base_url or DEFAULT_BASE_URL).rstrip("/"))
        return f"{url} (from {self.base_url_source})" if self.base_url_source else url

    @classmethod
    def from_settings(
        cls, settings: Settings, env: Mapping[str, str] | None = None, **overrides: Any
    ) -> ModelClient:
        """Key from `settings.api_key_env` (default ANTHROPIC_API_KEY); base URL from
        settings, else ANTHROPIC_BASE_URL. No key -> ModelError saying how to set one."""
        source = os.environ if env is None else env
        key = source.get(settings.api_key_env, "").strip()
        if not key:
            raise ModelError(NO_KEY_HELP.format(env=settings.api_key_env), cause="no_api_key")
        base_url = settings.base_url or source.get("ANTHROPIC_BASE_URL") or None
        origin = (
            "the setting baseUrl"
            if settings.base_url
            else "$ANTHROPIC_BASE_URL"
            if base_url
            else "the default"
        )
        return cls(
            api_key=key,
            base_url=base_url,
            base_url_source=origin,
            model=settings.model,
            max_tokens=settings.max_tokens,
            thinking_budget=settings.thinking_budget or None,
            **overrides,
        )

    def _sdk(self) -> AsyncAnthropic:
        if self._client is None:
            with self._client_lock:  # `prepare` may be building it in the background
                if self._client is None:
                    from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

                    from synapse_lsp.cli.preload import tls_context

                    tls = tls_context()  # built beside the SDK's import, if it was
                    self._client = AsyncAnthropic(
                        api_key=self._api_key,
                        base_url=self.base_url,
                        max_retries=0,
                        timeout=self.timeout,
                        http_client=None
                        if tls is None
                        else DefaultAsyncHttpxClient(timeout=self.timeout, verify=tls),
                    )
                    _warn_like_the_sdk(self.model, bool(self.thinking_budget))
        return self._client

    def _poster(self) -> Poster:
        if self._post is None:
            self._post = Poster(self._sdk())
        return self._post

    def prepare(self) -> None:
        """Build the SDK's client now (any thread; ~40-50 ms): the first request won't wait."""
        self._sdk()

    def _drain(self, stream: Any, events: AsyncIterator[object]) -> None:
        """Read the rest of a whole message's body (its end, after `message_stop`) in
        the background, then close it: the answer is handled meanwhile (~0.1-0.2 ms of
        the SDK's per call), and a body read to its end leaves its connection to the
        next request. What that rest holds is not the message's: a failure is dropped."""

        async def drain() -> None:
            try:
                async for _ in events:
                    pass
            except Exception as exc:
                log.debug("the end of a whole message's stream failed: %r", exc)
            finally:
                with contextlib.suppress(Exception):
                    await stream.close()

        task = asyncio.get_running_loop().create_task(drain())
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    async def close(self) -> None:
        for task in list(self._draining):
            task.cancel()
        await asyncio.gather(*self._draining, return_exceptions=True)
        if self._client is not None:
            await self._client.close()
            self._client = self._post = None

    def scrub(self, text: str) -> str:
        """`text` with the API key (should it ever appear) replaced."""
        return text.replace(self._api_key, "[redacted]") if self._api_key else text

    async def count_tokens(
        self,
        *,
        messages: list[dict[str, Any]],
        system: list[dict[str, Any]] | str | None = None,
        tools: list[dict[str, Any]] | None = None,
        timeout: float = 15.0,
    ) -> int:
        """The API's input token count for such a request (`messages.count_tokens`): one
        attempt, no retries (callers fall back to an estimate); ModelError on failure."""
        import anthropic

        client = self._sdk()
        extra: dict[str, Any] = {}
        if system:
            extra["system"] = system
        if tools:
            extra["tools"] = tools
        try:
            result = await client.messages.count_tokens(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                timeout=timeout,
                **extra,
            )
        except anthropic.APIStatusError as exc:
            err_type, message = error_fields(getattr(exc, "body", None))
            raise ModelError(
                self.scrub(f"token counting failed: HTTP {exc.status_code} {err_type} {message}"),
                cause="count_tokens",
            ) from None
        except anthropic.APIError as exc:
            raise ModelError(
                self.scrub(f"token counting failed: {root_cause(exc)}"), cause="count_tokens"
            ) from None
        return int(result.input_tokens)

    # ------------------------------------------------------------------ stream

    async def stream(
        self,
        *,
        system: list[dict[str, Any]] | str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """Yield the message as it streams, then one `StreamDone`. Transient failures
        yield `StreamRetry` and start over; the last failure raises `ModelError`."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.max_tokens,
            "system": system,
            "messages": messages,
            "stream": True,
        }
        if tools:
            params["tools"] = tools
        if self.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        body = request_body.encode_body(params)
        for attempt in range(1, self.max_attempts + 1):
            try:
                async for item in self._one_attempt(body):
                    yield item
                return
            except _TransientError as exc:
                cause = self.scrub(exc.cause)
                if attempt >= self.max_attempts:
                    raise ModelError(
                        f"The model API at {self.endpoint} failed after {attempt} attempt"
                        f"{'s' if attempt > 1 else ''}: {cause}",
                        cause=cause,
                    ) from None
                delay = self._delay(attempt, exc.delay)
                log.info("model call failed (%s); retry %d in %.2f s", cause, attempt, delay)
                yield StreamRetry(attempt, self.max_attempts, delay, cause)
                await asyncio.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.retry_max_delay)
        base = min(self.retry_base_delay * 2.0 ** (attempt - 1), self.retry_max_delay)
        return base * (1 - 0.25 * random.random())

    async def _one_attempt(self, body: bytes) -> AsyncIterator[StreamItem]:
        import anthropic
        import httpx2

        poster = self._poster()
        acc = _Attempt()
        try:
            # `messages.create` would deep-copy the whole history on every call (the SDK's
            # request preparation walks every block): the body is encoded once, here.
            # Events stay the JSON objects the API sent (`AsyncStream[object]`): building a
            # pydantic model per event cost ~0.8 ms per call, and they are read by key.
            stream: Any = await poster.post(body)
        except anthropic.APIStatusError as exc:
            raise self._status_failure(exc) from None
        except anthropic.APIConnectionError as exc:
            unreachable = cannot_succeed(exc)
            if unreachable:  # a retry cannot help: say so at once, naming the URL
                raise ModelError(
                    f"Cannot reach the model API at {self.endpoint}: {unreachable}. "
                    "Check the URL (not retried).",
                    cause="unreachable_url",
                ) from None
            if isinstance(exc, anthropic.APITimeoutError):  # not anyio's cancel scope text
                raise _TransientError(f"timed out (no answer in {self.timeout:g} s)") from None
            raise _TransientError(f"connection failed ({root_cause(exc)})") from None
        self.sent.set()
        events = stream.__aiter__()
        try:
            async for event in events:
                for item in acc.feed(event):
                    yield item
                if acc.stopped:  # the message is whole: what is left is the body's end
                    break
        except anthropic.APIStatusError as exc:  # an `event: error` inside the stream
            raise self._status_failure(exc) from None
        except (anthropic.APIConnectionError, httpx2.TransportError) as exc:
            raise _TransientError(f"stream dropped mid-message ({root_cause(exc)})") from None
        except ValueError as exc:  # a `data:` line that is not JSON (or not UTF-8)
            raise _MalformedStreamError(f"an event that is not JSON: {short(exc)}") from None
        finally:
            if acc.stopped:  # the answer goes on now; the connection is kept once read
                self._drain(stream, events)
            else:
                await stream.close()
        if not acc.stopped:
            raise _TransientError("stream dropped mid-message (ended before message_stop)")
        content = acc.content()
        if acc.dropped:
            log.warning(
                "left out content blocks of unknown type from the model's answer: %s",
                ", ".join(acc.dropped),
            )
        yield StreamDone(content, acc.stop_reason or "end_turn", acc.usage, acc.model)

    def _status_failure(self, exc: Any) -> Exception:
        """Classify an APIStatusError: transient -> _TransientError, else ModelError."""
        status: int = getattr(exc, "status_code", 0)
        body = getattr(exc, "body", None)
        err_type, message = error_fields(body)
        retry_after = asked_delay(exc.response.headers) if status != 200 else None
        label = f"HTTP {status}" if status != 200 else "stream error"
        cause = f"{label} {err_type}: {message}" if err_type else f"{label}: {message}"
        cause = self.scrub(cause)
        # The HTTP status decides; the error type only for an error event inside a
        # 200 stream (a 400 whose body says `api_error` is still a refused request).
        if (
            status in RETRYABLE_STATUS
            or status >= 500
            or (status == 200 and err_type in RETRYABLE_ERROR_TYPES)
        ):
            return _TransientError(cause, retry_after)
        if status == 401:
            return ModelError(
                f"The API key was rejected ({cause}). Check the key in the environment.",
                cause="authentication_error",
            )
        return ModelError(f"The model API refused the request: {cause}", cause=err_type or label)


def _without_nones(obj: dict[str, Any]) -> dict[str, Any]:
    """The block as the API would take it back: unset (null) fields left out."""
    return {k: v for k, v in obj.items() if v is not None}


def _usage(raw: dict[str, Any], before: Usage) -> Usage:
    """Token counts of a `message_start`/`message_delta` event: a count the event leaves
    out (or sends as null) keeps its value from before; output tokens are cumulative."""

    def count(key: str, old: int) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) else old

    return Usage(
        input_tokens=count("input_tokens", before.input_tokens),
        output_tokens=count("output_tokens", before.output_tokens),
        cache_creation_input_tokens=count(
            "cache_creation_input_tokens", before.cache_creation_input_tokens
        ),
        cache_read_input_tokens=count("cache_read_input_tokens", before.cache_read_input_tokens),
    )


def _warn_like_the_sdk(model: str, thinking: bool) -> None:
    """The deprecation warnings `messages.create` gives (its request path is bypassed)."""
    try:
        from anthropic.resources.messages import messages as sdk
    except ImportError:  # pragma: no cover - an SDK layout change only loses the warning
        return
    deprecated: dict[str, str] = getattr(sdk, "DEPRECATED_MODELS", {})
    if model in deprecated:
        warnings.warn(
            f"The model '{model}' is deprecated and will reach end-of-life on "
            f"{deprecated[model]}.\nPlease migrate to a newer model. Visit "
            "https://docs.anthropic.com/en/docs/resources/model-deprecations for more "
            "information.",
            DeprecationWarning,
            stacklevel=4,
        )
    if thinking and model in getattr(sdk, "MODELS_TO_WARN_WITH_THINKING_ENABLED", ()):
        warnings.warn(
            f"Using Claude with {model} and 'thinking.type=enabled' is deprecated. Use "
            "'thinking.type=adaptive' instead.",
            UserWarning,
            stacklevel=4,
        )
