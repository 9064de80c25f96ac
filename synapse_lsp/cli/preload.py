"""Import the model SDK in the background, as early as the process knows it will talk
to a model: `anthropic` takes most of a second to import, and everything else the
first request needs (settings, the shell, the system prompt) is done meanwhile.

A turn waits for it with `await sdk_ready()`, off the event loop: importing it on the
loop's thread while this one imports it would block the loop (and with it a cancel)
until the import ends.

While the process starts, Python's cyclic collector is paused (`pause_collector`):
the SDK's import creates ~100k objects, none of them garbage, and the collections it
triggers cost ~14% of it (measured: 930 -> 800 ms). When the import ends, what start-up
made is frozen (never scanned again: later collections, and the one at exit, skip it)
and the collector runs again.

The API client's TLS context (the system's CA certificates parsed by OpenSSL, ~20 ms) is
built in a thread of its own while the rest of the SDK imports (`tls_context`): OpenSSL
parses without Python's interpreter lock, so on a second core it costs the first
request nothing. It is the context the SDK's HTTP stack builds by default
(`httpcore2.default_ssl_context`: `SSL_CERT_FILE`/`SSL_CERT_DIR` as there), handed to
the client (`agent/model.py`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from synapse_lsp.agent import stages

if TYPE_CHECKING:
    import ssl

_started = threading.Event()
_lock = threading.Lock()
_imported = False
_after: list[Callable[[], None]] = []
_paused = False
_tls_started = False
_tls_done = threading.Event()
_tls: ssl.SSLContext | None = None
TLS_WAIT = 10.0  # seconds: a hang guard (building it takes ~20 ms)


def pause_collector() -> None:
    """Pause the cyclic collector until the SDK import ends (see the module docstring).
    Called once, at the start of a process that will import the SDK."""
    global _paused
    with _lock:
        if not _paused and not _imported and gc.isenabled():
            gc.disable()
            _paused = True


def resume_collector() -> None:
    """Freeze what start-up made and run the collector again (once; also when the
    import failed, or never started)."""
    global _paused
    with _lock:
        if _paused:
            _paused = False
            gc.freeze()
            gc.enable()


def _build_tls() -> None:
    global _tls
    try:
        import httpcore2  # imported already, by `_import_sdk`

        _tls = httpcore2.default_ssl_context()
    except Exception:  # the client then builds its own, and reports what fails
        pass
    finally:
        _tls_done.set()


def tls_context() -> ssl.SSLContext | None:
    """The TLS context built beside the SDK's import (waited for, bounded), or None when
    none was built: the SDK's client then builds its own."""
    if not _tls_started or not _tls_done.wait(TLS_WAIT):
        return None
    return _tls


def _import_sdk() -> None:
    global _imported, _tls_started
    try:
        with contextlib.suppress(Exception):
            stages.at_sync("sdk_import")  # tests stop here (agent/stages.py)
            import httpcore2  # noqa: F401  (first: the TLS context is built beside the rest)

            _tls_started = True
            threading.Thread(target=_build_tls, name="synapse-tls", daemon=True).start()
            import anthropic  # noqa: F401
    finally:
        resume_collector()
    with _lock:
        _imported = True
        hooks = list(_after)
        _after.clear()
    for hook in hooks:
        with contextlib.suppress(Exception):
            hook()


def after_import(hook: Callable[[], None]) -> None:
    """Run `hook` in the background once the SDK is imported (e.g. building the API
    client, ~40-50 ms, so a REPL's first request does not pay for it after typing)."""
    with _lock:
        if not _imported:
            _after.append(hook)
            return
    threading.Thread(target=hook, name="synapse-prepare", daemon=True).start()


async def sdk_ready() -> None:
    """Wait, without blocking the event loop, for the background import (if one runs):
    a cancel of the waiting task ends the wait at once."""
    import asyncio

    with _lock:
        if not _started.is_set() or _imported:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        def woken() -> None:  # in the import thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(wake)

        _after.append(woken)
    await done


def start_sdk_import() -> None:
    """Start the import once per process (later calls do nothing)."""
    if _started.is_set():
        return
    _started.set()
    pause_collector()
    # Imported here first: the SDK's imports (certifi) and ours (agent.prompts) both
    # import importlib.resources, whose modules import each other; imported by two
    # threads at once, Python can raise _DeadlockError in one (`synapse chat` died so).
    import importlib.resources  # noqa: F401

    threading.Thread(target=_import_sdk, name="synapse-preload", daemon=True).start()


# Arguments after which `synapse chat` prints something and exits without a model.
NO_MODEL_FLAGS = frozenset({"-h", "--help", "--version", "--list"})


def wants_model(chat_args: list[str]) -> bool:
    """Whether `synapse chat` with these arguments will talk to a model."""
    return not any(arg in NO_MODEL_FLAGS for arg in chat_args)
