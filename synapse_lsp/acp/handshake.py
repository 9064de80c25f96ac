"""The `initialize` answer, as plain JSON, without the SDK.

Importing the SDK's schema (pydantic models) costs ~0.45 s, most of the agent's
start-up. `server.py` imports it in a thread and meanwhile answers the client's
`initialize` with `initialize_result` (the agent's own `initialize` validates the
same dict with the SDK's `InitializeResponse`, so both answers are one answer).
"""

from __future__ import annotations

import os
from typing import Any

from synapse_lsp import __version__
from synapse_lsp.config import Settings

# The protocol version we speak (the SDK's `acp.PROTOCOL_VERSION`; a test checks).
PROTOCOL_VERSION = 1
AUTH_METHOD_ID = "anthropic-api-key"


def has_api_key(settings: Settings) -> bool:
    """Whether the key variable the settings name is set (what `ModelClient` reads)."""
    return bool(os.environ.get(settings.api_key_env, "").strip())


def initialize_result(settings: Settings, *, has_key: bool) -> dict[str, Any]:
    """Our answer to `initialize`, whatever version the client asked for: the spec has
    the agent answer the client's version when it supports it, else its latest (one
    version exists, so that is always 1), and the client decides whether to go on."""
    auth: list[dict[str, Any]] = []
    if not has_key:
        env = settings.api_key_env
        auth.append(
            {
                "id": AUTH_METHOD_ID,
                "name": "Anthropic API key",
                "description": (
                    f"Set {env} in the agent's environment (for example the `env` of the "
                    "agent server in your editor's settings), then restart the agent."
                ),
                "_meta": {"synapse": {"env": env}},
            }
        )
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            # Images and audio would not reach the model: not offered.
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}},
        },
        "authMethods": auth,
        "agentInfo": {"name": "synapse", "title": "Synapse", "version": __version__},
    }


def early_initialize(message: dict[str, Any]) -> dict[str, Any] | None:
    """The params of an `initialize` request this module can answer (a valid
    `protocolVersion`), else None (the SDK answers it, errors included)."""
    if message.get("method") != "initialize" or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        return None
    caps = params.get("clientCapabilities")
    if caps is not None and not isinstance(caps, dict):
        return None
    return params
