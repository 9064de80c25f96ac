"""`mcp_servers.json` (and Claude Code's `.mcp.json`): where the configs are, and each
server's entry checked and expanded into a `ServerConfig`. A broken file or entry is
reported (naming the file and server) and skipped; everything else still loads."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synapse_lsp.config import Settings
from synapse_lsp.extensions import claude_sources, mcp_vars
from synapse_lsp.extensions.mcp_vars import Expander

CONFIG_NAME = "mcp_servers.json"
DEFAULT_CONNECT_TIMEOUT = 30.0
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
