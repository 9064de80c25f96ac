"""A Messages API request through the SDK, with the SDK's request preparation done once.

`AsyncAnthropic.post` prepares every request anew: an options model, the URL parsed and
joined, the headers merged layer by layer, the response wrapped and parsed into a
stream. That took ~0.8 ms of a ~7 ms tool call on a slow 2-core machine, and each of
our requests differs from the last only in its body. So the first request goes through
`post`, and the request it sent (URL, headers, timeout) is kept. Each later request is
that one with the new body, sent through the SDK's own HTTP client. The SDK's SSE
stream reads its answer, and a failure is raised as the SDK's error type, as its
`_attempt_request` and `_request` do with `max_retries=0`.

This holds only for a plain client. A client with middleware or a custom auth (a token
that refreshes) always goes through `post`: they need the per-request work. (The SDK's
OpenTelemetry spans are only for its named methods: a `post` of ours has none.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2
    from anthropic import AsyncAnthropic, AsyncStream

PATH = "/v1/messages"
# Headers of the sent request that belong to its body, not to every request.
_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


class Poster:
    """Posts request bodies to the Messages API for one SDK client."""

    def __init__(self, client: AsyncAnthropic) -> None:
        self._client = client
        self._plain = _plain(client)
        self._sent: tuple[httpx2.URL, list[tuple[bytes, bytes]], dict[str, Any]] | None = None

    async def post(self, body: bytes) -> AsyncStream[object]:
        """The answer's event stream (`AsyncStream[object]`: the events as the API's JSON
        objects). A refused request raises `APIStatusError`, one that got no answer
        `APIConnectionError` (`APITimeoutError`), as `client.post` would."""
        import anthropic

        if self._sent is None:
            from anthropic.types import Message

            stream: AsyncStream[object] = await self._client.post(
                PATH,
                cast_to=Message,
                content=body,
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
            )
            if self._plain:
                sent = stream.response.request
                headers = [kv for kv in sent.headers.raw if kv[0].lower() not in _BODY_HEADERS]
                timeout = sent.extensions.get("timeout")
                self._sent = (sent.url, headers, {} if timeout is None else {"timeout": timeout})
            return stream
        return await self._send(body, *self._sent)

    async def _send(
        self,
        body: bytes,
        url: httpx2.URL,
        headers: list[tuple[bytes, bytes]],
        extensions: dict[str, Any],
    ) -> AsyncStream[object]:
        import anthropic
        import httpx2

        request = httpx2.Request(
            "POST", url, headers=headers, content=body, extensions=dict(extensions)
        )
        try:
            response = await self._client._client.send(request, stream=True)
        except httpx2.TimeoutException as err:
            raise anthropic.APITimeoutError(request=request) from err
        except anthropic.AnthropicError:
            raise
        except Exception as err:
            raise anthropic.APIConnectionError(request=request) from err
        if not response.is_success:
            await response.aread()
            raise self._client._make_status_error_from_response(response) from None
        return anthropic.AsyncStream(cast_to=object, response=response, client=self._client)


def _plain(client: AsyncAnthropic) -> bool:
    """Whether every request of this client is the same but for its body."""
    try:
        return (
            client.custom_auth is None
            and not getattr(client, "_middleware", ())
            and client._idempotency_header is None
            and client.max_retries == 0
        )
    except AttributeError:  # another SDK layout: let `post` do all of it
        return False
