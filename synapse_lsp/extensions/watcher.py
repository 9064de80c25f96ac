"""Background watcher (watchfiles): skills and MCP config changes -> registry refresh.

Watches `$SYNAPSE_HOME` recursively (so the skills folder may be deleted and
re-created) keeping only `skills/**` and `mcp/mcp_servers.json`, the workspace
root non-recursively for its `mcp_servers.json` and `.mcp.json`, and each other skills
folder there is (`~/.claude/skills`, a trusted folder's `.claude/skills`) recursively.
Changes are grouped with a short debounce (50 ms, polled every 10 ms) instead of
watchfiles' 1.6 s default, so a new script is a command within a fraction of a second.
The watcher is one owned task per root; `stop()` ends them and waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from synapse_lsp.extensions.claude_sources import MCP_JSON
from synapse_lsp.extensions.mcp_client import CONFIG_NAME

log = logging.getLogger(__name__)

DEBOUNCE_MS = 50
STEP_MS = 10


class ExtensionWatcher:
    """Calls `on_change(kinds)` with a subset of {"skills", "mcp"} after each burst."""

    def __init__(
        self,
        synapse_home: Path,
        workspace_root: Path | None,
        on_change: Callable[[set[str]], Awaitable[None]],
        skill_roots: Sequence[Path] = (),
    ) -> None:
        self.home = synapse_home
        # Skills folders outside $SYNAPSE_HOME (its own `skills/` is watched with it).
        self.skill_roots = [r for r in skill_roots if not r.is_relative_to(synapse_home)]
        self.workspace_root = workspace_root
        self.on_change = on_change
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started: list[asyncio.Event] = []

    def start(self) -> None:
        if self._tasks:
            return
        self.home.mkdir(parents=True, exist_ok=True)
        self._stop = asyncio.Event()
        roots: list[tuple[Path, bool]] = [(self.home, True)]
        if self.workspace_root is not None and self.workspace_root.is_dir():
            roots.append((self.workspace_root, False))
        roots += [(root, True) for root in self.skill_roots if root.is_dir()]
        for root, recursive in roots:
            self._tasks.append(
                asyncio.create_task(self._watch(root, recursive), name=f"watch:{root}")
            )

    async def stop(self) -> None:
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def classify(self, path: Path) -> str | None:
        try:
            rel = path.relative_to(self.home)
        except ValueError:
            rel = None
        if rel is not None and rel.parts:
            if rel.parts[0] == "skills":
                return "skills"
            if rel.parts == ("mcp", CONFIG_NAME) or rel.parts == ("mcp",):
                return "mcp"
            return None
        if any(path.is_relative_to(root) for root in self.skill_roots):
            return "skills"
        if self.workspace_root is not None and path.parent == self.workspace_root:
            return "mcp" if path.name in (CONFIG_NAME, MCP_JSON) else None
        return None

    async def _watch(self, root: Path, recursive: bool) -> None:
        from watchfiles import awatch

        def keep(_change: object, path: str) -> bool:
            return self.classify(Path(path)) is not None

        while not self._stop.is_set():
            try:
                async for changes in awatch(
                    root,
                    watch_filter=keep,
                    debounce=DEBOUNCE_MS,
                    step=STEP_MS,
                    recursive=recursive,
                    stop_event=self._stop,
                    yield_on_timeout=False,
                ):
                    kinds = {k for _, p in changes if (k := self.classify(Path(p)))}
                    if kinds:
                        try:
                            await self.on_change(kinds)
                        except Exception:
                            log.exception("refresh after a file change failed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the root vanished, inotify limits, ...
                log.warning("watching %s stopped (%s); retrying", root, exc)
            if not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.5)
                if root == self.home:  # never another skills folder (not ours to make)
                    with contextlib.suppress(OSError):
                        root.mkdir(parents=True, exist_ok=True)
