"""MCP client manager: reads `mcp_servers.json`, keeps one live session per server.

Each server is owned by one background task that enters the SDK's `Client`, lists
the tools and then waits; calls from any task go through that session. The SDK
(`mcp`, ~1 s to import) is imported only inside those tasks, so start-up never
waits for it. A server that fails, crashes or hangs gives a clear error for its
own commands and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from synapse_lsp.config import Settings
from synapse_lsp.extensions.mcp_config import (
    CONFIG_NAME,
    SAFE_NAME,
    ServerConfig,
    config_paths,
    load_config,
)
from synapse_lsp.extensions.mcp_import import import_mcp_sdk
from synapse_lsp.extensions.mcp_session import (
    Callers,
    PromptSpec,
    ResourceSpec,
    ToolSpec,
    client_options,
    list_prompts,
    list_resources,
    list_tools,
    watch_end,
)

if TYPE_CHECKING:
    from mcp import Client
    from mcp.shared.dispatcher import ProgressFnT
    from mcp_types import CallToolResult, GetPromptResult, ReadResourceResult

    from synapse_lsp.commands import McpHost

__all__ = [  # what other modules import from here (configs and specs live next door)
    "CONFIG_NAME",
    "McpCallError",
    "McpManager",
    "McpServer",
    "PromptSpec",
    "ResourceSpec",
    "ServerConfig",
    "ToolSpec",
    "config_paths",
    "load_config",
]
log = logging.getLogger(__name__)
_T = TypeVar("_T")

CLOSE_GRACE = 0.005  # closing for good (exit): the close's start -> a stdio server's SIGTERM
# Launchers that may download the server before it starts (its first run is slow).
INSTALLERS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx"})


class McpCallError(Exception):
    """A call that did not reach a result; `kind` is timeout, unavailable or disconnected."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------ server


class McpServer:
    """One configured server: a background owner task holds its session."""

    def __init__(
        self,
        config: ServerConfig,
        settings: Settings,
        on_change: Callable[[McpServer], None] | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.on_change = on_change
        self.state = "disabled" if config.disabled else "idle"
        self.error: str | None = None
        self.tools: list[ToolSpec] = []
        self.skipped_tools: list[str] = []
        self.connect_seconds: float | None = None
        self.signal_by: float | None = None  # SIGTERM by this loop time (None: 2 s after EOF)
        self.resources: list[ResourceSpec] = []  # resources, then templates
        self.prompts: list[PromptSpec] = []
        # The workspace folders, answered to `roots/list` (the manager's owner sets it).
        self.roots: Callable[[], list[Path]] = lambda: []
        self.callers = Callers()  # the chats whose calls are in flight (mcp_session)
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._restart_lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        """Begin connecting in the background; returns at once."""
        if self.config.disabled or self._task is not None:
            return
        self.state, self.error = "connecting", None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the first connect attempt to finish; True if the server is usable."""
        if self.state == "disabled":
            return False
        if self._task is None:
            self.start()
        if timeout is None:
            await self._ready.wait()
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # not wait_for: it can drop a cancel
                    await self._ready.wait()
        return self.state == "ready"

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None,
        host: McpHost | None = None,
        on_progress: ProgressFnT | None = None,
        notes: list[str] | None = None,
    ) -> CallToolResult:
        """Call a tool; reconnects first when the last call found the server gone. What
        the server asks while it runs (sampling, elicitation) goes to `host`; its progress
        notifications to `on_progress`; what the user should know of it to `notes`."""

        async def send(client: Client) -> CallToolResult:
            with self.callers.calling(host, notes):
                return await client.call_tool(
                    tool, arguments, read_timeout_seconds=timeout, progress_callback=on_progress
                )

        return await self.request(f"mcp:{self.name}:{tool}", timeout, send)

    async def read_resource(self, uri: str, timeout: float | None) -> ReadResourceResult:
        async def send(client: Client) -> ReadResourceResult:
            return await client.read_resource(uri, cache_mode="bypass")

        return await self.request(f"mcp:{self.name}:resource", timeout, send)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], timeout: float | None
    ) -> GetPromptResult:
        async def send(client: Client) -> GetPromptResult:
            return await client.get_prompt(name, arguments)

        return await self.request(f"mcp:{self.name}:prompt", timeout, send)

    async def request(
        self, what: str, timeout: float | None, send: Callable[[Client], Awaitable[_T]]
    ) -> _T:
        """One request on the live session (`send`), bounded by `timeout`; the errors of
        every kind of request told the same way."""
        if self.state == "broken":
            await self.restart()
        if self.state in ("connecting", "idle"):
            await self.wait_ready(self.config.connect_timeout)
        if self.state == "connecting":
            raise McpCallError(
                f"MCP server {self.name!r} is still connecting after "
                f"{self.config.connect_timeout:g} s; try again shortly",
                "unavailable",
            )
        client = self._client
        if self.state != "ready" or client is None:
            raise McpCallError(self.describe_failure(), "unavailable")
        from mcp import MCPError

        try:
            if timeout is None:
                return await send(client)
            async with asyncio.timeout(timeout + 5):  # the SDK's own timeout comes first
                return await send(client)
        except TimeoutError:
            raise McpCallError(f"{what} timed out after {timeout:g} s", "timeout") from None
        except MCPError as exc:
            text = str(exc)
            if "timed out" in text.lower():
                raise McpCallError(
                    f"{what} timed out after {timeout:g} s (the server is still "
                    'connected; raise the server\'s "timeout" in mcp_servers.json if it needs '
                    "longer)",
                    "timeout",
                ) from None
            if "connection closed" in text.lower() or "closed" in text.lower():
                self._mark_broken(text)
                raise McpCallError(
                    f"MCP server {self.name!r} disconnected during the call ({text})"
                    f"{self._stderr_tail()}; it will be restarted on the next call",
                    "disconnected",
                ) from None
            raise McpCallError(f"MCP server {self.name!r}: {text}", "protocol") from None
        except (OSError, EOFError, ConnectionError) as exc:
            self._mark_broken(str(exc))
            raise McpCallError(
                f"MCP server {self.name!r} connection failed ({exc}); it will be restarted on "
                "the next call",
                "disconnected",
            ) from None

    def starting(self) -> str:
        """What a wait for this server waits on, for progress lines: "installing/starting
        github (npx)", "starting db", "connecting to docs (https://…)"."""
        if self.config.url:
            return f"connecting to {self.name} ({self.config.url})"
        launcher = Path(self.config.command or "").name
        if launcher in INSTALLERS:
            return f"installing/starting {self.name} ({launcher})"
        return f"starting {self.name}"

    def describe_failure(self) -> str:
        if self.state == "disabled":
            return f"MCP server {self.name!r} is disabled in {self.config.source}"
        where = self.config.url or " ".join([self.config.command or "", *self.config.args])
        return (
            f"MCP server {self.name!r} ({where}) is not available: {self.error or self.state}"
            f"{self._stderr_tail()} [config: {self.config.source}]"
        )

    async def restart(self) -> None:
        async with self._restart_lock:
            if self.state not in ("broken", "failed"):
                return
            await self.stop()
            self.start()
            await self.wait_ready(self.config.connect_timeout)

    async def stop(self) -> None:
        """Close the session and end the child process (the SDK kills its process tree)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        if self.state in ("connecting", "idle"):
            task.cancel()  # a connect in progress has no session to close: abandon it
        try:
            await asyncio.wait_for(asyncio.shield(task), 10.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:  # noqa: BLE001 - the owner task logs its own failure
            pass
        self._client = None
        if self.state != "disabled":
            self.state = "closed"

    # ------------------------------------------------------------ internals

    def _ended(self) -> None:
        """The server's stdout closed while we were not stopping it: it exited. Marked
        broken now, so the next call restarts it before sending, instead of failing."""
        if not self._stop.is_set() and self.state == "ready":
            log.warning("MCP server %s exited; it is restarted on next use", self.name)
            self._mark_broken(f"the server exited{self._stderr_tail()}")

    def _mark_broken(self, why: str) -> None:
        if self.state == "ready":
            self.state, self.error = "broken", f"disconnected: {why}"
            self._notify()

    def _notify(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change(self)
            except Exception:  # pragma: no cover - a listener bug must not kill the server
                log.exception("on_change listener failed for %s", self.name)

    def _log_path(self) -> Path:
        return self.settings.synapse_home / "logs" / f"mcp-{self.name}.log"

    def _stderr_tail(self) -> str:
        if self.config.transport != "stdio":
            return ""
        try:
            lines = self._log_path().read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        tail = [line for line in lines[-5:] if line.strip()]
        return ("; server stderr: " + " | ".join(tail)[-600:]) if tail else ""

    async def _own(self) -> None:
        started = time.perf_counter()
        errlog: IO[str] | None = None
        try:
            from contextlib import AsyncExitStack

            await import_mcp_sdk()  # off the event loop (mcp_import.py)
            from mcp import Client

            async with AsyncExitStack() as stack:
                if self.config.transport == "stdio":
                    from mcp import StdioServerParameters

                    log_path = self._log_path()
                    log_path.parent.mkdir(parents=True, exist_ok=True)
                    errlog = log_path.open("w", encoding="utf-8")
                    params = StdioServerParameters(
                        command=self.config.command or "",
                        args=list(self.config.args),
                        env=dict(self.config.env) or None,
                        cwd=self.config.cwd,
                    )
                    from synapse_lsp.extensions.mcp_stdio import stdio_transport

                    stdio = stdio_transport(params, errlog, lambda: self.signal_by, self._stop.wait)
                    target: Any = watch_end(stdio, self._ended)
                else:
                    import httpx2
                    from mcp.client.streamable_http import streamable_http_client

                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=dict(self.config.headers),
                            timeout=httpx2.Timeout(30.0, read=300.0),
                        )
                    )
                    target = streamable_http_client(self.config.url or "", http_client=http)
                options = client_options(self.name, self.callers, self.roots, self._relist)
                async with asyncio.timeout(self.config.connect_timeout):
                    client = await stack.enter_async_context(Client(target, **options))
                    tools = await list_tools(client, self.name)
                    self.resources = await list_resources(client)
                    self.prompts = await list_prompts(client)
                self.tools, self.skipped_tools = self._filter(tools)
                self._client = client
                listening = asyncio.create_task(
                    self._listen(client), name=f"mcp:{self.name}:listen"
                )
                stack.push_async_callback(_cancel, listening)
                self.state, self.error = "ready", None
                self.connect_seconds = time.perf_counter() - started
                self._ready.set()
                self._notify()
                await self._stop.wait()
        except TimeoutError:
            self._fail(f"did not answer within {self.config.connect_timeout:g} s (connectTimeout)")
        except asyncio.CancelledError:
            self._fail("cancelled")
            raise
        except BaseException as exc:  # noqa: BLE001 - ExceptionGroups from anyio included
            self._fail(_explain(exc))
        finally:
            self._client = None
            if errlog is not None:
                errlog.close()
            self._ready.set()

    async def _relist(self, kind: str) -> None:
        """The server says a list changed: fetch it again (tools, prompts or resources),
        and tell the registry, which rebuilds the commands."""
        client = self._client
        if client is None or self.state != "ready":
            return
        try:
            if kind == "tools":
                self.tools, self.skipped_tools = self._filter(await list_tools(client, self.name))
            elif kind == "prompts":
                self.prompts = await list_prompts(client)
            else:
                self.resources = await list_resources(client)
        except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old list
            log.warning("MCP server %s: re-listing %s failed: %s", self.name, kind, exc)
            return
        self._notify()

    async def _listen(self, client: Client) -> None:
        """A 2026 server's list changes arrive on `subscriptions/listen`; a 2025 one
        sends notifications (`client_options`' message handler). Either way `_relist`."""
        caps = client.server_capabilities
        wanted = {
            "tools": bool(caps and caps.tools and caps.tools.list_changed),
            "prompts": bool(caps and caps.prompts and caps.prompts.list_changed),
            "resources": bool(caps and caps.resources and caps.resources.list_changed),
        }
        if not any(wanted.values()):
            return
        from mcp.client.subscriptions import (
            PromptsListChanged,
            ResourcesListChanged,
            ToolsListChanged,
        )
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        kinds: dict[type, str] = {
            ToolsListChanged: "tools",
            PromptsListChanged: "prompts",
            ResourcesListChanged: "resources",
        }
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        try:
            async with client.listen(
                tools_list_changed=wanted["tools"],
                prompts_list_changed=wanted["prompts"],
                resources_list_changed=wanted["resources"],
            ) as events:
                async for event in events:
                    kind = kinds.get(type(event))
                    if kind is not None:
                        await self._relist(kind)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - no live refresh; calls still work
            log.info("MCP server %s: no list-change stream: %s", self.name, exc)

    def _fail(self, why: str) -> None:
        if self._stop.is_set():
            return
        self.state, self.error = "failed", why
        self.tools = []
        log.warning("MCP server %s failed: %s", self.name, why)
        self._notify()

    def _filter(self, tools: list[ToolSpec]) -> tuple[list[ToolSpec], list[str]]:
        kept: list[ToolSpec] = []
        skipped: list[str] = []
        for tool in tools:
            if tool.name in self.config.disabled_tools:
                continue
            if not SAFE_NAME.match(tool.name):
                skipped.append(
                    f"MCP server {self.name!r}: tool {tool.name!r} skipped: its name is not safe "
                    "as a command name"
                )
                continue
            kept.append(tool)
        return kept, skipped


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def _explain(exc: BaseException) -> str:
    """The innermost useful message of an (anyio) exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, OSError) else text


# ----------------------------------------------------------------- manager


@dataclass
class McpManager:
    """Every configured server; `start()` returns at once, connects run in the background."""

    settings: Settings
    workspace_root: Path | None = None
    on_change: Callable[[McpServer], None] | None = None
    config_files: list[Path] | None = None
    only: set[str] | None = None  # connect just these servers (a wrapper's one-shot call)
    # Config files changed since the user confirmed them (asked at each reload: a file
    # written mid-session is not started either); `core.Workspace` says which.
    withheld: Callable[[], list[Path]] | None = None
    # The folders answered to a server's `roots/list` (default: the workspace folder).
    roots: Callable[[], list[Path]] | None = None
    servers: dict[str, McpServer] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def _roots(self) -> list[Path]:
        if self.roots is not None:
            return self.roots()
        return [self.workspace_root] if self.workspace_root is not None else []

    def paths(self) -> list[Path]:
        if self.config_files is not None:
            return self.config_files
        return config_paths(self.settings, self.workspace_root)

    async def start(self) -> None:
        await self.reload()

    async def reload(self) -> None:
        """Re-read config: start new or changed servers, stop removed ones, keep the rest."""
        paths = self.paths()
        held = set(self.withheld()) if self.withheld is not None else set()
        configs, self.problems = load_config([p for p in paths if p not in held], self.settings)
        self.problems += [
            f"{p}: changed since Synapse last loaded it; its servers are not started until "
            "the user confirms the change (`synapse trust --home` for $SYNAPSE_HOME's, "
            "`synapse trust` for a folder's)"
            for p in paths
            if p in held and p.exists()
        ]
        if self.only is not None:
            configs = {k: v for k, v in configs.items() if k in self.only}
        for name in list(self.servers):
            old = self.servers[name]
            if configs.get(name) != old.config:
                await old.stop()
                del self.servers[name]
                old.state = "removed"
                self._changed(old)
        for name, config in configs.items():
            if name in self.servers:
                continue
            server = McpServer(config, self.settings, self._changed)
            server.roots = self._roots
            self.servers[name] = server
            server.start()

    async def restart_all(self) -> None:
        """Reconnect every server and re-list tools (`synapse tools refresh mcp`)."""
        for server in list(self.servers.values()):
            await server.stop()
        self.servers.clear()
        await self.reload()

    def _changed(self, server: McpServer) -> None:
        if self.on_change is not None:
            self.on_change(server)

    async def wait_all(self, timeout: float | None = None) -> None:
        waits = [s.wait_ready() for s in self.servers.values() if s.state != "disabled"]
        if waits:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*waits)

    def tools(self) -> list[ToolSpec]:
        return [t for s in self.servers.values() if s.state == "ready" for t in s.tools]

    async def close(self) -> None:
        """Every server at once, each signalled a short grace after this close began."""
        for server in self.servers.values():
            server.signal_by = asyncio.get_running_loop().time() + CLOSE_GRACE
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
