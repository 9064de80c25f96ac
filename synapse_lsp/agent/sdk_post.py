"""A Messages API request through the SDK, with the SDK's request preparation done once.

`AsyncAnthropic.post` prepares every request anew: an options model, the URL parsed and
joined, the headers merged layer by layer, the response wrapped and parsed into a
stream. That took ~0.8 ms of a ~7 ms tool call on a slow 2-core machine, and each of
our requests differs from the last only in its body. So the first request goes through
`post`, and the request it sent (URL, headers, timeout) is kept. Each later request is
that one with the new body, sent through the SDK's own HTTP client. The SDK's SSE
stream reads its answer, and a failure is raised as the SDK's error type, as its
`_attempt_request` and `_request` do with `max_retries=0`.

This holds only for a plain `AsyncAnthropic` (not a subclass that may sign each request)
without middleware or a custom auth (a token that refreshes): others always go through
`post`, which does their per-request work. So does every request after a first that was
redirected: the SDK goes back to its base URL each time. The client's cookies (a
gateway's affinity cookie) are added to each request as `post` adds them. (The SDK's
OpenTelemetry spans are only for its named methods: a `post` of ours has none.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2
    from anthropic import AsyncAnthropic, AsyncStream

log = logging.getLogger(__name__)

PATH = "/v1/messages"
# Headers of the sent request that are not the same for every request: its body's, and
# the cookies (the client's jar, as it is at each request).
_OWN_HEADERS = frozenset({b"content-length", b"transfer-encoding", b"cookie"})


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
            if self._plain and not stream.response.history:  # not redirected
                sent = stream.response.request
                headers = [kv for kv in sent.headers.raw if kv[0].lower() not in _OWN_HEADERS]
                # its timeout, and the TLS server name the SDK sets for some hosts
                self._sent = (sent.url, headers, dict(sent.extensions))
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

        http = self._client._client
        request = httpx2.Request(
            "POST", url, headers=headers, content=body, extensions=dict(extensions),
            cookies=http.cookies or None,
        )  # fmt: skip
        try:
            response = await http.send(request, stream=True)
        except httpx2.TimeoutException as err:
            raise anthropic.APITimeoutError(request=request) from err
        except anthropic.AnthropicError:
            raise
        except Exception as err:
            raise anthropic.APIConnectionError(request=request) from err
        log.debug("POST %s: %d, request_id %s", url, response.status_code,
                  response.headers.get("request-id"))  # fmt: skip
        if not response.is_success:
            await response.aread()
            raise self._client._make_status_error_from_response(response) from None
        return anthropic.AsyncStream(cast_to=object, response=response, client=self._client)


def _plain(client: AsyncAnthropic) -> bool:
    """Whether every request of this client is the same but for its body."""
    import anthropic

    try:
        return (
            type(client) is anthropic.AsyncAnthropic
            and client.custom_auth is None
            and not getattr(client, "_middleware", ())
            and client._idempotency_header is None
            and client.max_retries == 0
        )
    except AttributeError:  # another SDK layout: let `post` do all of it
        return False
