"""What a session's first prompt would otherwise do on the event loop, done before it.

`server.py` imports the model SDK in the background from the start (`cli/preload.py`);
`prepare_model` builds a new session's API client (the SDK's HTTP stack and TLS
context, ~40-50 ms) in the background once that import ended, so the first request
of the session goes out without building it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from synapse_lsp.cli.preload import after_import
from synapse_lsp.errors import ModelError

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession

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
