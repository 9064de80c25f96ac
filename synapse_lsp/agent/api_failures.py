"""What a failed call to the model API means (`agent/model.py`): the error's fields, how
long the API asks to wait, whether a retry can help, and the cause as a user reads it."""

from __future__ import annotations

import socket
from collections.abc import Mapping


def error_fields(body: object) -> tuple[str, str]:
    """The error's type and message from a response body (the message cut at 500)."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("type", "")), str(err.get("message", ""))[:500]
    return "", str(body)[:500] if body is not None else ""


def asked_delay(headers: Mapping[str, str]) -> float | None:
    """The wait in seconds the API asks for (`retry-after-ms`, `retry-after`), or None."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


def without_secrets(url: str) -> str:
    """The URL as errors may show it: no user or password (`https://u:token@proxy`),
    no query (`?key=`) or fragment."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(a URL that cannot be parsed)"
    netloc = ("…@" if "@" in parts.netloc else "") + host + port
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def cannot_succeed(exc: BaseException) -> str | None:
    """Why a failed connection cannot succeed on a retry, or None: a host name that does
    not exist (not a resolver that is down: EAI_AGAIN is retried), a URL the client
    cannot use, or a TLS certificate it does not trust."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror) and current.errno in _NO_SUCH_HOST:
            return f"the host name does not resolve ({current.strerror})"
        name = type(current).__name__
        if name in ("UnsupportedProtocol", "InvalidURL"):
            return f"not a URL the client can use ({short(current)})"
        if name == "SSLCertVerificationError":  # ssl's, named: ssl is not imported here
            why = getattr(current, "verify_message", "") or short(current)
            return (
                f"its TLS certificate is not trusted ({why}; a private CA's certificate "
                "goes in SSL_CERT_FILE)"
            )
        current = current.__cause__ or current.__context__
    return None


_NO_SUCH_HOST = {
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
}


def short(exc: BaseException) -> str:
    """The exception's text, cut at 120 characters."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def root_cause(exc: BaseException) -> str:
    """The innermost cause of `exc` (its chain followed), named with its type."""
    seen: set[int] = set()
    current: BaseException | None = exc
    last = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        last = current
        current = current.__cause__ or current.__context__
    text = str(last) or type(last).__name__
    return f"{type(last).__name__}: {text}" if text != type(last).__name__ else text
