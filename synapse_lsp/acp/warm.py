"""What a session's first prompt would otherwise do on the event loop, done before it.

`server.py` imports the model SDK in the background from the start (`cli/preload.py`);
`prepare_model` builds a new session's API client (the SDK's HTTP stack and TLS
context, ~40-50 ms) in the background once that import ended, so the first request
of the session goes out without building it.

`ready_for_prompt`: `session/new` and `session/load` answer once a prompt can go out
at once, i.e. after the SDK's import (most of a second, once per process; later
sessions find it done). The wait is where claude-agent-acp has its own start-up (its
`session/new` starts Claude Code) and costs a user nothing: a prompt sent earlier
would wait for the same import. What it buys: a prompt, once accepted, reaches the
model in milliseconds, and a client that sends it with `session/new`'s answer
(scripted, or a user who typed while the agent started) sees no stall mid-turn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from synapse_lsp.cli.preload import after_import, sdk_ready
from synapse_lsp.errors import ModelError

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession

__all__ = ["prepare_model", "ready_for_prompt", "sdk_ready"]  # sdk_ready: the turn's wait

log = logging.getLogger(__name__)


def prepare_model(chat: ChatSession) -> None:
    """Build `chat`'s API client once the SDK is imported (nothing without an API key:
    the prompt says what is missing)."""
    try:
        model = chat._ensure_model()  # on the loop: the client object, not the SDK's
    except ModelError:
        return

    def build() -> None:
        try:
            model.prepare()
        except Exception as exc:  # the first request builds it again and reports
            log.info("preparing the API client failed: %r", exc)

    after_import(build)


async def ready_for_prompt(chat: ChatSession) -> None:
    """Build `chat`'s API client in the background and wait (off the loop; a cancel
    ends the wait at once) for the SDK's import, if it still runs."""
    prepare_model(chat)
    await sdk_ready()
