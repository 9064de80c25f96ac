"""Background warm-up of the heavy imports a first prompt needs (LSP server).

`import anthropic` costs 1-5 s and the MCP SDK about 1 s. The server answers
`initialize` without them (cold start), then, once the client has sent
`initialized`, one daemon thread imports them in stages, so that the first
prompt a user types a few seconds later does not wait for them - and the event
loop never blocks on them either.

Stages, in order (each one a future that handlers can await):

- ``core``: our own modules behind the first command (router, shell, agent, ...);
- ``mcp``: the MCP SDK - only when an `mcp_servers.json` exists for an open folder
  (or in `$SYNAPSE_HOME/mcp/`). It comes before the model SDK because every first
  command in such a folder starts its MCP connections, and `import anthropic` (one
  indivisible import of 1-5 s) would otherwise hold them back;
- ``sdk``: the model SDK and its HTTP stack.

A handler that is about to import what a stage covers awaits that stage first
(`await warm.ready("sdk")`): two threads importing the same package at the same
time is legal but can trip Python's import deadlock detection on circular
imports. Waiting is bounded and never fails; a module that cannot be imported is
logged and left to the ordinary lazy import, which then reports the error.

The cyclic collector is paused while the thread imports (as `cli/preload.py` does:
~14% of the SDK's import is collections that find no garbage); at the end what the
imports made is frozen and the collector runs again.

The thread is a daemon and checks `stop()` between modules, so `shutdown`/`exit`
never wait for it; nothing is left behind (the thread ends with the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError

log = logging.getLogger(__name__)

ENV_SWITCH = "SYNAPSE_LSP_PREWARM"
"""Environment variable: ``0`` turns the warm-up off (benchmarks compare both)."""

STAGES: dict[str, tuple[str, ...]] = {
    "core": (
        "synapse_lsp.router",
        "synapse_lsp.shell",
        "synapse_lsp.policy.gate",
        "synapse_lsp.lsp.handlers",
        "synapse_lsp.lsp.editor_files",
        "synapse_lsp.lsp.updates",
        "synapse_lsp.agent.store",
        "synapse_lsp.agent.session",
        "synapse_lsp.agent.turns",
        "synapse_lsp.summaries.titles",
        "synapse_lsp.extensions.registry",
    ),
    "sdk": ("anthropic", "anthropic.types", "httpx2", "httpcore2"),
    "mcp": ("mcp", "mcp.client.stdio", "mcp.client.streamable_http"),
}
STAGE_ORDER = ("core", "mcp", "sdk")


class Warmup:
    """One background import thread with a future per stage; see the module docstring."""

    def __init__(
        self,
        *,
        need_mcp: Callable[[], bool],
        stages: dict[str, Sequence[str]] | None = None,
    ) -> None:
        self._stages = {name: tuple(mods) for name, mods in (stages or STAGES).items()}
        self._need_mcp = need_mcp
        self._stop = threading.Event()
        self._done: dict[str, Future[float]] = {name: Future() for name in STAGE_ORDER}
        self.failures: list[str] = []
        self.skipped: list[str] = []
        self.thread = threading.Thread(target=self._run, name="synapse-warmup", daemon=True)

    def start(self) -> None:
        # Imported here first: the SDK (certifi) and the main thread (agent.prompts) both
        # import importlib.resources, whose modules import each other; two threads at
        # once can make Python raise _DeadlockError in one of them.
        import importlib.resources  # noqa: F401

        self.thread.start()

    def stop(self) -> None:
        """Import nothing more (the module being imported finishes on its own)."""
        self._stop.set()

    @property
    def finished(self) -> bool:
        return all(f.done() for f in self._done.values())

    def seconds(self, stage: str) -> float | None:
        """How long `stage` took (None if it has not finished or was skipped)."""
        future = self._done[stage]
        if not future.done():
            return None
        value = future.result()
        return value if value >= 0 else None

    async def ready(self, stage: str, timeout: float = 30.0) -> None:
        """Wait (without blocking the event loop) until `stage` (and the ones before) ended."""
        future = self._done[stage]
        if future.done():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)

    def _finish(self, stage: str, value: float) -> None:
        with contextlib.suppress(InvalidStateError):
            self._done[stage].set_result(value)

    def _run(self) -> None:
        begun = time.perf_counter()
        paused = gc.isenabled()
        gc.disable()
        try:
            for stage in STAGE_ORDER:
                started = time.perf_counter()
                if self._stop.is_set() or (stage == "mcp" and not self._wants_mcp()):
                    self.skipped.append(stage)
                    self._finish(stage, -1.0)
                    continue
                for name in self._stages.get(stage, ()):
                    if self._stop.is_set():
                        break
                    try:
                        importlib.import_module(name)
                    except Exception as exc:  # the lazy import will report it properly
                        self.failures.append(f"{name}: {exc!r}")
                        log.warning("warm-up: importing %s failed: %r", name, exc)
                self._finish(stage, time.perf_counter() - started)
            log.info(
                "warm-up finished in %.2f s (skipped: %s)",
                time.perf_counter() - begun,
                ", ".join(self.skipped) or "nothing",
            )
        except BaseException as exc:  # never leave a waiter hanging
            log.warning("warm-up stopped: %r", exc)
        finally:
            if paused:
                gc.freeze()
                gc.enable()
            for stage in STAGE_ORDER:
                self._finish(stage, -1.0)

    def _wants_mcp(self) -> bool:
        try:
            return self._need_mcp()
        except Exception as exc:
            log.warning("warm-up: looking for MCP configs failed: %r", exc)
            return False
