"""The MCP SDK imported off the event loop before an MCP server connects.

`mcp_client.McpServer`'s owner task awaits `import_mcp_sdk()` before it imports the
SDK (~0.5-1 s) itself, so the event loop (and with it a first model request, a
cancel) never stops for that import. It starts after the model SDK's background
import ended, if one runs (`cli/preload.py`'s thread, found by its name): one import
thread at a time (two importing shared packages at once can trip Python's import
deadlock detection), and the first request needs the model SDK, not the MCP one.
The LSP face's warm-up (`lsp/warmup.py`) has imported it already. The thread is a
daemon: exit never waits for it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
import threading
from concurrent.futures import Future

log = logging.getLogger(__name__)

MODULES = ("mcp", "mcp.client.stdio", "synapse_lsp.extensions.mcp_stdio")
_lock = threading.Lock()
PRELOAD_THREAD = "synapse-preload"  # cli/preload.py's import of the model SDK
_imported: Future[None] | None = None


def _import(done: Future[None]) -> None:
    try:
        for name in MODULES:
            importlib.import_module(name)
    except Exception as exc:  # the owner task's own import reports it properly
        log.warning("importing the MCP SDK in the background failed: %r", exc)
    finally:
        done.set_result(None)


async def import_mcp_sdk() -> None:
    """Wait (off the loop) until the MCP SDK is imported, importing it in a daemon
    thread once per process, after the model SDK's background import."""
    global _imported
    if all(name in sys.modules for name in MODULES):
        return
    for thread in threading.enumerate():
        while thread.name == PRELOAD_THREAD and thread.is_alive():
            await asyncio.sleep(0.02)
    with _lock:
        if _imported is None:
            _imported = Future()
            # Imported here first, as before any import thread (cli/preload.py does).
            import importlib.resources  # noqa: F401

            threading.Thread(
                target=_import, args=(_imported,), name="synapse-mcp-import", daemon=True
            ).start()
        future = _imported
    await asyncio.shield(asyncio.wrap_future(future))
