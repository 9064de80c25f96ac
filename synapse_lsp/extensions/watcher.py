"""Background watcher (watchfiles): skills and MCP config changes -> registry refresh.

Watches, of `$SYNAPSE_HOME`, what holds extensions: `skills/` recursively, `mcp/`
and the home itself non-recursively (for `skills/` and `mcp/` appearing, going and
coming back), never the rest (session records and the checkpoint store change at
every command; watching them cost inotify watches without end and, at exit, ~10-20 ms
for the kernel to drop them). Also the workspace root non-recursively for its
`mcp_servers.json` and `.mcp.json`, and each other skills folder there is
(`~/.claude/skills`, a trusted folder's `.claude/skills`) recursively.

`skills/` or `mcp/` missing is waited for quietly; when the home's watch sees one
appear or go, that folder's watch starts again, and once it runs the registry is
refreshed: what was written there before the watch began is read then, what comes
after arrives as changes.
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
        # skills/ and mcp/ of the home: set to end (and start again) that folder's watch
        self._again: dict[Path, asyncio.Event] = {}

    def start(self) -> None:
        if self._tasks:
            return
        self.home.mkdir(parents=True, exist_ok=True)
        self._stop = asyncio.Event()
        self._again = {self.home / "skills": asyncio.Event(), self.home / "mcp": asyncio.Event()}
        roots: list[tuple[Path, bool]] = [
            (self.home, False),
            (self.home / "skills", True),
            (self.home / "mcp", False),
        ]
        if self.workspace_root is not None and self.workspace_root.is_dir():
            roots.append((self.workspace_root, False))
        roots += [(root, True) for root in self.skill_roots if root.is_dir()]
        for root, recursive in roots:
            self._tasks.append(
                asyncio.create_task(self._watch(root, recursive), name=f"watch:{root}")
            )

    async def stop(self) -> None:
        self._stop.set()
        for again in self._again.values():
            again.set()
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

        again = self._again.get(root)  # skills/ or mcp/ of the home
        began = True
        while not self._stop.is_set():
            if again is not None:
                again.clear()
                if not root.is_dir():  # wait for the home's watch to see it appear
                    began = False
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(again.wait(), 0.5)
                    continue
                if not began:  # what it got before this watch: read once the watch runs
                    began = True
                    kind = self.classify(root)
                    asyncio.get_running_loop().call_soon(self._refresh, {kind} if kind else set())
            try:
                async for changes in awatch(
                    root,
                    watch_filter=keep,
                    debounce=DEBOUNCE_MS,
                    step=STEP_MS,
                    recursive=recursive,
                    stop_event=again if again is not None else self._stop,
                    yield_on_timeout=False,
                ):
                    if root == self.home:  # skills/ or mcp/ came or went: watch it anew
                        for path in {Path(p) for _, p in changes} & self._again.keys():
                            self._again[path].set()
                    kinds = {k for _, p in changes if (k := self.classify(Path(p)))}
                    if kinds:
                        try:
                            await self.on_change(kinds)
                        except Exception:
                            log.exception("refresh after a file change failed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the root vanished, inotify limits, ...
                if again is None or root.is_dir():
                    log.warning("watching %s stopped (%s); retrying", root, exc)
            if again is not None:
                began = False
                if not again.is_set():  # failed, not told to (gone, back, stop()): no busy
                    with contextlib.suppress(TimeoutError):  # loop; in 0.5 s or when told
                        await asyncio.wait_for(again.wait(), 0.5)
                continue
            if not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.5)
                if root == self.home:  # never another skills folder (not ours to make)
                    with contextlib.suppress(OSError):
                        root.mkdir(parents=True, exist_ok=True)

    def _refresh(self, kinds: set[str]) -> None:
        async def run() -> None:
            try:
                await self.on_change(kinds)
            except Exception:
                log.exception("refresh after a folder appeared failed")

        if kinds and not self._stop.is_set():
            task = asyncio.get_running_loop().create_task(run())
            self._tasks.append(task)
