"""One owner for background work: every task is held by a `TaskOwner`, which logs
its failure and ends it on `aclose()`. No fire-and-forget tasks anywhere."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class TaskOwner:
    """Holds references to the tasks it spawns until they finish; `aclose()` cancels
    what is still running and waits (bounded) for it to end. Idempotent."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.name}: closed, cannot start {name}")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("background task %s failed: %r", task.get_name(), exc)

    @property
    def running(self) -> list[asyncio.Task[Any]]:
        return [t for t in self._tasks if not t.done()]

    async def aclose(self, timeout: float = 5.0) -> None:
        self._closed = True
        tasks = self.running
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait(tasks, timeout=timeout)
