"""What the router's parts share: the result type, the lookups it is given, and
`RouterBase`, the fields and the methods one part calls on another (`BashRouter`
has them all; each part is a mixin of `BashRouter`)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from synapse_lsp.commands import (
    Command,
    CommandLookup,
    CommandOutput,
    FailureCategory,
    Layer,
    McpHost,
    OutputSink,
    PermissionGate,
    SubAgentRunner,
)
from synapse_lsp.config import Settings, SettingsSource
from synapse_lsp.events import FileDiff
from synapse_lsp.files import ChangeRecorder, FileGateway
from synapse_lsp.shell import ShellSession


@runtime_checkable
class ExtensionDirectory(Protocol):
    """What an extension lookup may also say, for not-found hints (the registry does)."""

    def command_names(self) -> list[str]: ...

    def extension_sources(self) -> dict[str, list[str]]: ...


@runtime_checkable
class WithholdsServers(Protocol):
    """An extension lookup that knows of the folder's servers it does not load (the
    registry: an untrusted folder's own mcp_servers.json)."""

    def withheld_servers(self) -> str | None: ...


@dataclass
class RouteResult:
    """What happened, for faces and tests; `text` is exactly what the model is given."""

    command: str
    layer: Layer
    stdout: str
    stderr: str
    exit_code: int
    is_error: bool
    category: FailureCategory | None
    duration: float
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    full_output_path: Path | None = None
    diffs: tuple[FileDiff, ...] = ()
    # Content blocks for the model beside `text` (an MCP tool's image).
    attachments: list[dict[str, Any]] = field(default_factory=list)


# Nor variables that change which program runs or what it loads: the user allowed the
# command line they were shown, not one a sandboxed `export` redirected (a `git`
# function, PATH=./bin:…, GIT_CONFIG_* hooks, LD_PRELOAD, BASH_ENV…).
# The recorder of the tool call this task is running (set by `route`; built-ins write
# through it, so the call's diffs are known without asking each command).
_RECORDER: contextvars.ContextVar[ChangeRecorder | None] = contextvars.ContextVar(
    "synapse_change_recorder", default=None
)
EXTENSION_PREFIXES = ("mcp:", "skill:")


class RouterBase:
    """The fields every part of `BashRouter` reads, and the methods one part calls on
    another (each defined once, in its part)."""

    shell: ShellSession
    settings_source: SettingsSource
    files: FileGateway
    extensions: CommandLookup | None
    subagent: SubAgentRunner | None
    in_subagent: bool
    permission: PermissionGate | None
    mcp_host: McpHost | None
    state: dict[str, Any]
    builtins: dict[str, Command]
    _env_cache: tuple[tuple[int, str | None, str | None], dict[str, str]] | None

    @property
    def settings(self) -> Settings:
        return self.settings_source()

    async def route(
        self,
        command: str,
        *,
        restart: bool = False,
        on_output: OutputSink | None = None,
        emit: Callable[[Any], None] | None = None,
        _checked: bool = False,
    ) -> RouteResult:
        raise NotImplementedError

    def _finish(
        self,
        command: str,
        layer: Layer,
        out: CommandOutput,
        started: float,
        *,
        bounded: bool = False,
        paged: bool = False,
    ) -> RouteResult:
        raise NotImplementedError

    def _pipe_sink(self) -> Command | None:
        raise NotImplementedError

    def _trailing_write(self, line: str) -> tuple[str, str] | None:
        raise NotImplementedError

    def not_found_hint(self, name: str) -> str:
        raise NotImplementedError

    async def _run_native(
        self, command: str, line: str, on_output: OutputSink | None, started: float
    ) -> RouteResult:
        raise NotImplementedError

    async def _native_into_write(
        self,
        native: str,
        write_line: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        raise NotImplementedError

    def _env(self) -> dict[str, str]:
        raise NotImplementedError

    async def _session_env(self) -> dict[str, str]:
        raise NotImplementedError

    async def _invoke(
        self,
        target: Command,
        argv: list[str],
        stdin: str | None,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
        *,
        piped: bool = False,
    ) -> CommandOutput:
        raise NotImplementedError

    async def _words(
        self, head: str, target: Command, on_output: OutputSink | None
    ) -> list[str] | CommandOutput:
        raise NotImplementedError

    async def _pipe_into_shell(
        self,
        output: CommandOutput,
        rest: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        raise NotImplementedError
