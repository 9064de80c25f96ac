"""SIGINT and SIGTERM to `synapse chat -p`: a cancel at whatever stage the run is, then
exit 130 / 143 (128 + the signal).

Installed as the process starts (cli/entry.py, before the model SDK's background
import begins), so no stage is left where a signal raises KeyboardInterrupt in the
middle of an import or kills the process with the turn's command still to come. The
handler only records the signal and hands the cancel to the event loop; what the run
is doing then registers what a cancel means for it (`while_running`): during startup
the start is cancelled, during the turn the turn driver's `cancel` (the face's
preparation, e.g. waiting for the SDK import, stops at once; a started turn ends
before any further command starts). A signal that comes before the loop runs is
honoured when it starts: nothing more is started. A second signal while the first is
still being honoured ends the process at once (the shell's supervisor still reaps
what the command left).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from synapse_lsp.agent import stages

if TYPE_CHECKING:
    import asyncio

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """The process's SIGINT/SIGTERM handler while `chat -p` runs (one per process)."""

    def __init__(self) -> None:
        self.signum: int | None = None  # the first signal taken
        self._loop: asyncio.AbstractEventLoop | None = None  # where a cancel goes
        self._actions: list[Callable[[], object]] = []
        self._previous: dict[int, object] = {}

    @property
    def fired(self) -> bool:
        return self.signum is not None

    def exit_code(self, otherwise: int) -> int:
        """128 + the signal taken; `otherwise` when none came."""
        return 128 + self.signum if self.signum is not None else otherwise

    def install(self) -> None:
        for sig in SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                self._previous.setdefault(sig, signal.signal(sig, self._handle))

    def uninstall(self) -> None:
        """Put back the handlers that were there before (`chat` without -p)."""
        for sig, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, previous)  # type: ignore[arg-type]  # what it returned
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:  # a second one: the user means it
            with contextlib.suppress(Exception):
                sys.stderr.write("\n(stopped)\n")
                sys.stderr.flush()
            os._exit(128 + signum)
        self.signum = signum
        stages.cancel_seen()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        for action in list(self._actions):
            with contextlib.suppress(Exception):
                action()

    @contextlib.contextmanager
    def while_running(
        self, loop: asyncio.AbstractEventLoop, action: Callable[[], object]
    ) -> Iterator[None]:
        """`action` is what a signal does (in `loop`'s thread) while the block runs; a
        signal taken before it is honoured as the block starts."""
        self._loop = loop
        self._actions.append(action)
        if self.signum is not None:
            loop.call_soon(self._fire)
        try:
            yield
        finally:
            self._actions.remove(action)


_installed: StopSignals | None = None


def install() -> StopSignals:
    """The process's handler, installed once."""
    global _installed
    if _installed is None:
        _installed = StopSignals()
        _installed.install()
    return _installed


def installed() -> StopSignals | None:
    """`chat -p`'s handler; None in the REPL (and before `install`)."""
    return _installed


def exit_code(otherwise: int) -> int:
    """128 + the signal `chat -p` took; `otherwise` when none came."""
    return _installed.exit_code(otherwise) if _installed is not None else otherwise


def for_chat(one_shot: bool) -> None:
    """`chat -p`: the handler (installed by cli/entry.py, else now; a signal taken
    already stops the run before it starts anything: `start`). The interactive chat:
    none (the REPL's Ctrl-C cancels a turn; at its prompt it is Python's
    KeyboardInterrupt, as is one taken before now)."""
    global _installed
    if one_shot:
        install()
        return
    early, _installed = _installed, None
    if early is not None:
        early.uninstall()
        if early.fired:
            raise KeyboardInterrupt


async def start(work: Awaitable[None]) -> None:
    """Run `chat -p`'s startup (`work`); a signal before or meanwhile cancels it and
    ends the run: SystemExit(130 / 143), after what the caller's `finally` closes."""
    import asyncio

    async def started() -> None:
        await stages.at("startup")
        await work

    stops = _installed
    if stops is None:
        await started()
        return
    task = asyncio.ensure_future(started())
    try:
        with stops.while_running(asyncio.get_running_loop(), task.cancel):
            await asyncio.wait({task})  # not wait_for: it can drop a cancel (Python 3.11)
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        close = getattr(work, "close", None)
        if close is not None:  # cancelled before it began: never awaited
            close()
    else:
        task.result()  # its error, if it failed
    if stops.fired:
        raise SystemExit(stops.exit_code(1))
