"""One ACP session: its settings layer, its folder's tools and its conversation.

Each session gets its own `core.Workspace` rooted at the client's `cwd`: its own
shell (so sessions never share a `cd`), its own permission gate asking through
`session/request_permission`, its own file gateway (the client's buffers) and
its own settings layer (`AcpChatSettings`: the session mode is the `sandbox`
setting; `_meta.synapse` of `session/new` may set more). MCP servers the client
passes become that session's `mcp:<server>:<tool>` commands (`AcpWorkspace`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.acp.files import ClientFiles
from synapse_lsp.config import HOME_ONLY, Settings, SettingsSource, as_source
from synapse_lsp.core import Workspace

if TYPE_CHECKING:
    from synapse_lsp.agent.turns import LiveChat

    # A session live in this agent process: the one live-chat record (its conversation
    # and turn driver, agent/turns.py) with what the ACP face keeps beside it.
    AcpChat = LiveChat["AcpFace"]

log = logging.getLogger(__name__)

# Keys a client may not set per session: where everything is stored, and what only
# $SYNAPSE_HOME/settings.json may say.
_REFUSED = frozenset({"synapseHome", "synapse_home", *HOME_ONLY})


class AcpChatSettings:
    """A live settings source: `base` (environment, settings files) plus this session's
    own layer (the mode, `_meta.synapse` settings), recomputed when `base` changes."""

    def __init__(
        self, base: Settings | SettingsSource, layer: Mapping[str, Any] | None = None
    ) -> None:
        self._base = as_source(base)
        self._layer: dict[str, Any] = {}
        self._seen: Settings | None = None
        self._value = self._base()
        self.problems: list[str] = []
        self.problems = self.update(dict(layer or {}))  # what the client asked for, refused

    def __call__(self) -> Settings:
        base = self._base()
        if base is not self._seen:
            self._recompute(base)
        return self._value

    def update(self, values: Mapping[str, Any]) -> list[str]:
        """Add `values` to the session's layer; the problems (refused or bad values)."""
        base = self._base()
        problems = [
            f"setting {k!r} cannot be set per session; ignored" for k in values if k in _REFUSED
        ]
        for key, value in values.items():
            if key in _REFUSED:
                continue
            _, found = base.with_overrides({key: value})
            if found:  # a bad value: the session's earlier one (or the base's) stays
                problems += found
                continue
            self._layer[key] = value
        self._recompute(base)
        return problems + self.problems

    def _recompute(self, base: Settings) -> None:
        self._seen = base
        self._value, self.problems = base.with_overrides(self._layer)


class AcpWorkspace(Workspace):
    """`core.Workspace` whose MCP config also holds the servers the ACP client passed for
    this session (written to a private file, read by the session's own registry). Their
    wrappers are in the session's own bin folder only (first on its shells' PATH, naming
    its registry's socket), never in `$SYNAPSE_HOME/bin`: two sessions may each have a
    server `db`, and `$(mcp:db:q)` in each reaches its own."""

    def __init__(self, *args: Any, session_mcp: Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session_mcp = session_mcp

    def mcp_config_files(self) -> list[Path]:
        files = super().mcp_config_files()
        return [*files, self.session_mcp] if self.session_mcp is not None else files

    def private_mcp_config_files(self) -> list[Path]:
        return [self.session_mcp] if self.session_mcp is not None else []

    async def close(self) -> None:
        await super().close()
        if self.session_mcp is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.session_mcp.parent)


def mcp_config(servers: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """ACP `mcpServers` (stdio, http; the SDK's models) as our `mcp_servers.json` table,
    and one problem per server left out."""
    table: dict[str, Any] = {}
    problems: list[str] = []
    for server in servers:
        name = getattr(server, "name", None)
        if not isinstance(name, str) or not name:
            problems.append("an MCP server without a name was left out")
            continue
        kind = getattr(server, "type", None)
        if hasattr(server, "command") and kind in (None, "stdio"):
            entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
            env = {v.name: v.value for v in server.env or []}
            if env:
                entry["env"] = env
        elif kind == "http":
            entry = {"type": "http", "url": server.url}
            headers = {h.name: h.value for h in server.headers or []}
            if headers:
                entry["headers"] = headers
        else:
            problems.append(f"MCP server {name!r}: transport {kind!r} is not supported")
            continue
        table[name] = entry
    return table, problems


def write_mcp_config(folder: Path, table: dict[str, Any]) -> Path:
    """The session's private MCP config (mode 0600: it may hold the client's secrets)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / "mcp_servers.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"mcpServers": table}, fh)
    return path


@dataclass
class AcpFace:
    """What the ACP face keeps for one session beside its conversation (the session
    itself is the one live-chat record, `agent.turns.LiveChat`): its folder, settings
    layer, workspace and file gateway, and the state of the running turn's tool calls."""

    id: str
    cwd: Path
    settings: AcpChatSettings
    workspace: Workspace
    files: ClientFiles
    open_calls: dict[str, str] = field(default_factory=dict)  # tool call id -> command
    output: dict[str, str] = field(default_factory=dict)  # tool call id -> output so far
    # tool call id -> set once its `tool_call` update went out (a question waits for it)
    announcements: dict[str, asyncio.Event] = field(default_factory=dict)
    asked: int = 0  # questions about no tool call, numbered

    @property
    def shell_cwd(self) -> Path:
        shell = self.workspace.shell
        return shell.cwd if shell is not None else self.cwd

    def announced(self, call_id: str) -> asyncio.Event:
        """Set once the `tool_call` update of `call_id` went out to the client."""
        return self.announcements.setdefault(call_id, asyncio.Event())

    def turn_ended(self) -> None:
        self.open_calls.clear()
        self.output.clear()
        self.announcements.clear()

    def closing(self) -> None:
        """The session's MCP servers end beside its conversation's close."""
        self.workspace.begin_close(shells=False)

    async def close(self) -> None:
        """Its shells and MCP children (after the conversation closed)."""
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.workspace.close(), 15.0)
