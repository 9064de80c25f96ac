"""Import the model SDK in the background, as early as the process knows it will talk
to a model: `anthropic` takes most of a second to import, and everything else the
first request needs (settings, the shell, the system prompt) is done meanwhile."""

from __future__ import annotations

import contextlib
import threading

_started = threading.Event()


def _import_sdk() -> None:
    with contextlib.suppress(Exception):
        import anthropic  # noqa: F401


def start_sdk_import() -> None:
    """Start the import once per process (later calls do nothing)."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=_import_sdk, name="synapse-preload", daemon=True).start()


# Arguments after which `synapse chat` prints something and exits without a model.
NO_MODEL_FLAGS = frozenset({"-h", "--help", "--version", "--list"})


def wants_model(chat_args: list[str]) -> bool:
    """Whether `synapse chat` with these arguments will talk to a model."""
    return not any(arg in NO_MODEL_FLAGS for arg in chat_args)
