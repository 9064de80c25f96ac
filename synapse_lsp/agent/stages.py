"""Named stages of a turn, a hook for tests at each (issue 31: cancel wins at every stage).

Product code marks where a turn is: `await stages.at("request")` (a thread:
`stages.at_sync("sdk_import")`). Unset — always, outside tests — that is one global
lookup. A test sets a hook (`set_hook`) that is awaited at each stage, to cancel the
turn right there; a test driving another process (`chat -p`, the REPL, `synapse lsp`,
`synapse acp`) names one stage in the environment instead:

    SYNAPSE_TEST_STAGE=request        (or request@2: the second time it is reached)
    SYNAPSE_TEST_STAGE_DIR=/some/dir

The process then stops at that stage, writes `<dir>/<stage>.reached` and waits there
until it has taken a cancel (`cancel_seen()`, called where a face takes one: the turn
driver's `cancel`, `chat -p`'s SIGINT/SIGTERM) or its task is cancelled; then the turn
goes on from that stage, and must end without starting another command.

The stages, in a turn's order (docs/user-guide.md "Cancelling a turn" says how a cancel
is honoured at each):

- `sdk_import`: the model SDK still importing in the background (`cli/preload.py`);
- `startup`: `chat -p` starting its shell and extensions;
- `prepare`: the face's own preparation, the turn already marked running;
- `prompt_hooks`: SessionStart / UserPromptSubmit hooks;
- `snapshot`: before each command, the turn waiting for the checkpoint snapshot of
  the folder (taken in the background since the turn began);
- `request`, `streaming`, `response`: before a model request, after its first streamed
  part, after it ended (detail: the sub-agent's tool call id, else None);
- `tool_use`: between a tool_use and its command;
- `compaction`: before the summary request of a compaction;
- `stop_hooks`: before the Stop hooks of a turn that ended normally;
- `finish`: the turn's end, before its end snapshot.

Not a turn's: `rewind_write`, a rewind about to put back one file (detail: its path;
the crash tests kill the process there, tests/faults/test_rewind_faults.py).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

# Stdlib modules only, and no asyncio at import: `cli/preload.py` imports this module
# before its import thread starts, on `synapse chat`'s startup path.

STAGES = (
    "sdk_import",
    "startup",
    "prepare",
    "prompt_hooks",
    "snapshot",
    "request",
    "streaming",
    "response",
    "tool_use",
    "compaction",
    "stop_hooks",
    "finish",
    "rewind_write",
)
STAGE_ENV = "SYNAPSE_TEST_STAGE"
STAGE_DIR_ENV = "SYNAPSE_TEST_STAGE_DIR"
PAUSE_LIMIT = 300.0  # seconds a paused stage waits for a cancel (a hang guard only)

Hook: TypeAlias = "Callable[[str, str | None], Awaitable[None] | None]"

_hook: Hook | None = None
_cancel_listeners: list[Callable[[], None]] = []


def set_hook(hook: Hook | None) -> Hook | None:
    """Install `hook` (None: none); the one it replaces."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def hooked() -> bool:
    """A hook is set (a test runs)."""
    return _hook is not None


async def at(stage: str, detail: str | None = None) -> None:
    """The turn reached `stage`: await the hook, if any."""
    hook = _hook
    if hook is None:
        return
    result = hook(stage, detail)
    if result is not None:
        await result


def at_sync(stage: str, detail: str | None = None) -> None:
    """`at` for a thread (the SDK import): the hook is called; an awaitable it returns is
    not awaited (a thread has no loop), so an env pause blocks the thread instead."""
    hook = _hook
    if hook is None:
        return
    pause = getattr(hook, "pause_thread", None)
    if pause is not None:
        pause(stage, detail)
        return
    result = hook(stage, detail)
    close = getattr(result, "close", None)
    if close is not None:  # a coroutine nobody will await
        close()


def on_cancel(listener: Callable[[], None]) -> Callable[[], None]:
    """Call `listener` whenever a face takes a cancel; returns its removal."""
    _cancel_listeners.append(listener)

    def remove() -> None:
        if listener in _cancel_listeners:
            _cancel_listeners.remove(listener)

    return remove


def cancel_seen() -> None:
    """A face took a cancel (any thread, a signal handler too): tell the listeners."""
    for listener in list(_cancel_listeners):
        listener()


class EnvPause:
    """The hook `SYNAPSE_TEST_STAGE` sets: stop at one stage until a cancel was taken."""

    def __init__(self, spec: str, folder: Path) -> None:
        name, _, nth = spec.partition("@")
        self.stage = name.strip()
        self.nth = int(nth) if nth.strip().isdigit() else 1
        self.folder = folder
        self.count = 0
        self.cancelled = threading.Event()
        on_cancel(self.cancelled.set)

    def _due(self, stage: str) -> bool:
        if stage != self.stage:
            return False
        self.count += 1
        if self.count != self.nth:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{stage}.reached").write_text(str(os.getpid()))
        return True

    def __call__(self, stage: str, detail: str | None) -> Awaitable[None] | None:
        return self._wait() if self._due(stage) else None

    async def _wait(self) -> None:
        import asyncio

        deadline = time.monotonic() + PAUSE_LIMIT
        while not self.cancelled.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def pause_thread(self, stage: str, detail: str | None) -> None:
        if self._due(stage):
            self.cancelled.wait(PAUSE_LIMIT)


def _from_env() -> None:
    spec = os.environ.get(STAGE_ENV)
    folder = os.environ.get(STAGE_DIR_ENV)
    if spec and folder:
        from pathlib import Path

        set_hook(EnvPause(spec, Path(folder)))


_from_env()
