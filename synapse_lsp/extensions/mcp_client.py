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
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from synapse_lsp.config import Settings
from synapse_lsp.extensions import claude_sources, mcp_vars
from synapse_lsp.extensions.mcp_import import import_mcp_sdk
from synapse_lsp.extensions.mcp_vars import Expander

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

log = logging.getLogger(__name__)

CONFIG_NAME = "mcp_servers.json"
DEFAULT_CONNECT_TIMEOUT = 30.0
CLOSE_GRACE = 0.02  # closing for good (exit): a stdio server's end of input -> SIGTERM
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SERVER_KEYS = {
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "disabled",
    "disabledTools",
    "tools",
    "timeout",
    "connectTimeout",
    "description",
}
_TYPES = {"stdio", "http", "streamable-http", "streamableHttp"}
# Launchers that may download the server before it starts (its first run is slow).
INSTALLERS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx"})


class McpCallError(Exception):
    """A call that did not reach a result; `kind` is timeout, unavailable or disconnected."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ToolSpec:
    """What Mcp2Bash needs of one tool (plain data: no SDK types leak out)."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def command_name(self) -> str:
        return f"mcp:{self.server}:{self.name}"


@dataclass(frozen=True)
class ServerConfig:
    name: str
    source: Path
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    disabled: bool = False
    disabled_tools: frozenset[str] = frozenset()
    timeout: float | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


# ------------------------------------------------------------------ config


def config_paths(
    settings: Settings, workspace_root: Path | None, *, trusted: bool = True
) -> list[Path]:
    """Where configs are read from, lowest precedence first (workspace entries win; of
    the folder's, Synapse's own over Claude Code's `.mcp.json`: `claude_sources`).

    The folder's own files only when the folder is `trusted` (`synapse_lsp.policy.trust`
    decides; `core.Workspace` passes its decision): an untrusted folder gets the
    home configuration only."""
    paths = [settings.synapse_home / "mcp" / CONFIG_NAME]
    if workspace_root is not None and trusted:
        paths += [workspace_root / claude_sources.MCP_JSON, workspace_root / CONFIG_NAME]
    return paths


def load_config(
    paths: list[Path], settings: Settings | None = None
) -> tuple[dict[str, ServerConfig], list[str]]:
    """Merge the server tables of every existing file; later files override by name.

    Returns the servers and one message per problem. A broken file or server entry is
    reported (naming the file and server) and skipped; everything else still loads.
    `$VAR` in `env` and `headers` never expands to a secret (`mcp_vars.expander`); `settings`
    (defaults when None) says which variables are secrets and where the home file is.
    """
    policy = settings or Settings()
    servers: dict[str, ServerConfig] = {}
    problems: list[str] = []
    for path in paths:
        if not path.is_file():
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            continue
        except json.JSONDecodeError as exc:
            problems.append(
                f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
                "no server from this file was loaded"
            )
            continue
        except RecursionError:
            # The C decoder recurses per `[`/`{`: 100,000 of them exhaust the stack.
            problems.append(
                f"{path}: nested too deeply (arrays or objects inside one another past "
                "the JSON reader's limit); no server from this file was loaded"
            )
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers", {}), dict):
            problems.append(f'{path}: expected {{"mcpServers": {{"<name>": {{...}}}}}}')
            continue
        extra = sorted(set(raw) - {"mcpServers"})
        if extra:
            problems.append(f"{path}: unknown top-level key(s) {', '.join(extra)} (ignored)")
        expand = mcp_vars.expander(path, policy)
        for name, entry in raw.get("mcpServers", {}).items():
            try:
                earlier = servers[name].source if name in servers else None
                servers[name] = _server_config(name, entry, path, expand, problems)
                problems += claude_sources.shadowed(name, path, earlier)
            except ValueError as exc:
                servers.pop(name, None)
                problems.append(f"{path}: server {name!r}: {exc}; this server was not loaded")
    return servers, problems


def _server_config(
    name: str,
    entry: Any,
    path: Path,
    expander: Callable[[list[str]], Expander] | None = None,
    problems: list[str] | None = None,
) -> ServerConfig:
    if not SAFE_NAME.match(name):
        raise ValueError(
            "the name must be letters, digits, '_', '.' or '-' (it becomes part of "
            "mcp:<server>:<tool>)"
        )
    if not isinstance(entry, dict):
        raise ValueError("expected an object with 'command' or 'url'")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(_SERVER_KEYS))})"
        )
    kind = entry.get("type")
    if kind is not None and kind not in _TYPES:
        raise ValueError(f"'type' must be one of {', '.join(sorted(_TYPES))}, not {kind!r}")
    warnings: list[str] = []
    expand = (expander or mcp_vars.expander(path, Settings()))(warnings)
    everywhere = claude_sources.expands_all(path)  # Claude Code's `${VAR}` in these too
    command, url = entry.get("command"), entry.get("url")
    if everywhere:
        command, url = (expand(v, name, k, k) if isinstance(v, str) else v
                        for k, v in (("command", command), ("url", url)))  # fmt: skip
    if command is None and url is None:
        raise ValueError("missing 'command' (stdio server) or 'url' (remote server)")
    if command is not None and url is not None:
        raise ValueError("give either 'command' or 'url', not both")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ValueError("'command' must be a non-empty string")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise ValueError("'url' must be an http:// or https:// URL")
    args = _str_list(entry, "args")
    args = [expand(a, name, "args", a) for a in args] if everywhere else args
    env = _str_map(entry, "env")
    headers = _str_map(entry, "headers")
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise ValueError("'cwd' must be a string")
        cwd = str((path.parent / Path(cwd).expanduser()).resolve())
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ValueError("'disabled' must be true or false")
    off = set(_str_list(entry, "disabledTools"))
    tools = entry.get("tools", {})
    if not isinstance(tools, dict):
        raise ValueError("'tools' must map tool names to {\"disabled\": true|false}")
    for tool, opts in tools.items():
        if not isinstance(opts, dict) or not isinstance(opts.get("disabled", False), bool):
            raise ValueError(f'tools.{tool}: expected {{"disabled": true|false}}')
        if set(opts) - {"disabled"}:
            raise ValueError(
                f"tools.{tool}: unknown key(s) {', '.join(sorted(set(opts) - {'disabled'}))}"
            )
        if opts.get("disabled"):
            off.add(tool)
    timeout = _positive(entry, "timeout", None)
    connect_timeout = _positive(entry, "connectTimeout", DEFAULT_CONNECT_TIMEOUT)
    assert connect_timeout is not None
    env_items = tuple((k, expand(v, name, "env", k)) for k, v in env.items())
    header_items = tuple((k, expand(v, name, "headers", k)) for k, v in headers.items())
    if problems is not None:  # the manager's problems: logged and shown by the registry
        problems += warnings
    return ServerConfig(
        name=name,
        source=path,
        command=command,
        args=tuple(args),
        env=env_items,
        cwd=cwd,
        url=url,
        headers=header_items,
        disabled=disabled,
        disabled_tools=frozenset(off),
        timeout=timeout,
        connect_timeout=connect_timeout,
    )


def _str_list(entry: dict[str, Any], key: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return value


def _str_map(entry: dict[str, Any], key: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{key!r} must map names to strings")
    return value


def _positive(entry: dict[str, Any], key: str, default: float | None) -> float | None:
    value = entry.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{key!r} must be a positive number of seconds")
    return float(value)


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
        self.stop_grace: float | None = None  # end of input -> SIGTERM (None: 2 s)
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
        self, tool: str, arguments: dict[str, Any], timeout: float | None
    ) -> CallToolResult:
        """Call a tool; reconnects first when the last call found the server gone."""
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
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            text = str(exc)
            if "timed out" in text.lower():
                raise McpCallError(
                    f"mcp:{self.name}:{tool} timed out after {timeout:g} s (the server is still "
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

                    transport = stdio_transport(params, errlog, lambda: self.stop_grace)
                    target: Any = _watch_end(transport, self._ended)
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
                async with asyncio.timeout(self.config.connect_timeout):
                    client = await stack.enter_async_context(Client(target))
                    tools = await _list_tools(client, self.name)
                self.tools, self.skipped_tools = self._filter(tools)
                self._client = client
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


@contextlib.asynccontextmanager
async def _watch_end(transport: Any, on_end: Callable[[], None]) -> Any:
    """The transport's (read, write) streams, the read side wrapped to call `on_end` when
    the server's output ends - the only sign the SDK gives of a stdio server that exited
    between requests. A wrapper, not a pump: no extra hop per message."""
    async with transport as (read, write):
        yield _EndWatch(read, on_end), write


class _EndWatch:
    """Delegates to a receive stream; reports its end of stream once."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    async def __aenter__(self) -> _EndWatch:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._ended()
            raise

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._ended()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _list_tools(client: Client, server: str) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        for tool in page.tools:
            out.append(
                ToolSpec(
                    server=server,
                    name=tool.name,
                    description=(tool.description or tool.title or "").strip(),
                    input_schema=dict(tool.input_schema or {}),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return out


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
    servers: dict[str, McpServer] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

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
        """Every server at once, each with a short grace before its signal."""
        for server in self.servers.values():
            server.stop_grace = CLOSE_GRACE
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
