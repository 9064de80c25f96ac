"""ExtensionRegistry: every `mcp:*` and `skill:*` command, kept current.

It owns the MCP manager (servers connect in the background), the skills index,
the wrappers, the file watcher and the Unix socket that MCP wrappers use to reach
the live sessions. Each registry has a folder of its own while it runs
(`wrapper_files.RunDir`: `bin/` with all its wrappers, which name its socket, and the
socket), first on its shells' PATH; `$SYNAPSE_HOME/bin/` gets the commands of the
persistent configs, for terminals (`private_config_files`: a session's own servers
stay out of it). The router asks it `get(name)`;
faces register `registry.builtins()` (command:search, skill:search, skill:load,
skill:reinforce and the lifecycle: skill:list, skill:info, skill:import,
skill:rollback, skill:delete).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from synapse_lsp.commands import (
    Command,
    CommandContext,
    CommandOutput,
    FailureCategory,
    PromptError,
    PromptInfo,
)
from synapse_lsp.config import (
    SETTINGS_FILE,
    Settings,
    SettingsSource,
    as_source,
    read_settings_file,
)
from synapse_lsp.extensions import mcp_commands, wrapper_files
from synapse_lsp.extensions.claude_sources import scan_roots, skill_roots
from synapse_lsp.extensions.mcp2bash import McpToolCommand
from synapse_lsp.extensions.mcp_client import McpManager, McpServer
from synapse_lsp.extensions.mcp_commands import McpCommand
from synapse_lsp.extensions.search import CommandSearchCommand, SearchIndex
from synapse_lsp.extensions.skill_commands import (
    SkillDeleteCommand,
    SkillImportCommand,
    SkillInfoCommand,
    SkillListCommand,
    SkillLoadCommand,
    SkillReinforceCommand,
    SkillRollbackCommand,
    SkillSearchCommand,
)
from synapse_lsp.extensions.skills import SkillInfo, SkillScriptCommand
from synapse_lsp.extensions.watcher import ExtensionWatcher
from synapse_lsp.files import DiskFiles
from synapse_lsp.policy.folder_files import FOLDER_CONFIGS, withheld_servers_note
from synapse_lsp.policy.secrets import child_env
from synapse_lsp.sandbox import HOST_VIEW, PathView

log = logging.getLogger(__name__)

RefreshKind = Literal["mcp", "skills", "all"]


class ExtensionRegistry:
    """Implements `CommandLookup` for the router; see the module docstring."""

    def __init__(
        self,
        settings: Settings | SettingsSource,
        workspace_root: Path | None = None,
        *,
        watch: bool = True,
        install_wrappers: bool = True,
        serve_socket: bool = True,
        config_files: list[Path] | None = None,
        only_servers: set[str] | None = None,
        run_dir: wrapper_files.RunDir | None = None,
        private_config_files: Sequence[Path] = (),
    ) -> None:
        self.settings_source = as_source(settings)
        self.workspace_root = workspace_root
        self.watch = watch
        self.install_wrappers = install_wrappers
        self.serve_socket = serve_socket
        self.only_servers = only_servers
        # The folder of this registry's wrappers and socket: given by the owner (who
        # removes it; `core.Workspace` makes it before its shell starts), else made by
        # `start()` when serving the socket and removed by `close()`.
        self.run_dir = run_dir
        self._own_run_dir = False
        self.private_config_files = frozenset(private_config_files)
        # How the shells this registry serves spell paths (`sandbox.PathView`): a
        # wrapper's cwd and a skill script's /tmp are the calling shell's (the owner
        # sets it; `core.Workspace` gives its shells' view).
        self.view: Callable[[], PathView] = lambda: HOST_VIEW
        # Why the folder's own mcp_servers.json is not loaded, when it is not (the owner
        # knows the folder's trust; `core.Workspace` sets it): `withheld_servers()`.
        self.withheld_reason: Callable[[], str | None] = lambda: None
        self.skill_roots: Callable[[], list[Path]] = lambda: skill_roots(self.settings.synapse_home)
        self.mcp = McpManager(
            self.settings, workspace_root, self._server_changed, config_files, only_servers
        )
        self.skills: dict[str, SkillInfo] = {}
        self.skill_warnings: list[str] = []
        self.wrapper_problems: dict[str, list[str]] = {}  # "skill"/"mcp" -> problems
        self._skill_cmds: dict[str, SkillScriptCommand] = {}
        self._mcp_cmds: dict[str, McpCommand] = {}
        self._watcher: ExtensionWatcher | None = None
        self._socket_server: asyncio.Server | None = None
        self._socket_file: Path | None = None
        self._search: SearchIndex | None = None
        self._started = False
        self.version = 0

    # ------------------------------------------------------------ lifecycle

    @property
    def settings(self) -> Settings:
        """The live settings (commands run through the socket read the current limits)."""
        return self.settings_source()

    async def start(self) -> None:
        """Index skills, start MCP connects in the background, the watcher and the socket.
        Returns without waiting for any MCP server."""
        if self._started:
            return
        self._started = True
        if self.serve_socket and self.run_dir is None:
            try:
                self.run_dir = wrapper_files.RunDir.create(self.settings.synapse_home)
                self._own_run_dir = True
            except OSError as exc:
                log.warning("no folder for this process's wrappers and socket: %s", exc)
        self._refresh_skills()
        await self._reload_mcp()
        if self.watch:
            home, root, roots = self.settings.synapse_home, self.workspace_root, self.skill_roots()
            self._watcher = ExtensionWatcher(home, root, self._on_files_changed, roots)
            self._watcher.start()
        if self.serve_socket:
            await self._start_socket()

    async def close(self) -> None:
        """Stop the watcher (first: no file change reloads a server then) and the socket,
        end every MCP session and child process: all at once, each waits milliseconds."""
        watcher, self._watcher = self._watcher, None
        ends = asyncio.gather(*([watcher.stop()] if watcher else []), self.mcp.close())
        if self._socket_server is not None:
            self._socket_server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._socket_server.wait_closed(), 2.0)
            self._socket_server = None
            if self._socket_file is not None:
                with contextlib.suppress(OSError):
                    self._socket_file.unlink()
                self._socket_file = None
        await ends
        if self._own_run_dir and self.run_dir is not None:
            self.run_dir.remove()
            self.run_dir, self._own_run_dir = None, False
        self._started = False

    async def refresh(self, kind: RefreshKind = "all") -> None:
        """Re-read skills and/or MCP config; `mcp` also reconnects and re-lists tools."""
        if kind in ("skills", "all"):
            self._refresh_skills()
        if kind in ("mcp", "all"):
            await self.mcp.restart_all()
            self._rebuild_mcp()

    async def wait_for_mcp(self, timeout: float | None = None) -> None:
        await self.mcp.wait_all(timeout)

    @property
    def problems(self) -> list[str]:
        skipped = [p for s in self.mcp.servers.values() for p in s.skipped_tools]
        wrappers = [
            p for kind in sorted(self.wrapper_problems) for p in self.wrapper_problems[kind]
        ]
        return [*self.mcp.problems, *skipped, *self.skill_warnings, *wrappers]

    # ------------------------------------------------------------- lookups

    def get(self, name: str) -> Command | None:
        if name.startswith("skill:"):
            return self._skill_cmds.get(name)
        if not name.startswith("mcp:") or name.count(":") < 2:
            return None
        _, server_name, tool = name.split(":", 2)
        server = self.mcp.servers.get(server_name)
        if server is None:
            return None
        if tool in server.config.disabled_tools:
            why = f"{name} is disabled in {server.config.source} (disabledTools)"
            return _Unavailable(name, why)
        if server.state in ("ready", "broken"):
            return self._mcp_cmds.get(name)
        if server.state in ("connecting", "idle"):
            return _Pending(name, server, self)
        return _Unavailable(name, server.describe_failure())

    def tool_hint(self, name: str) -> str | None:
        """What the server says of the tool `name` ("read-only", "destructive"), or None."""
        cmd = self._mcp_cmds.get(name)
        return cmd.tool.hint if isinstance(cmd, McpToolCommand) else None

    def prompts(self) -> list[PromptInfo]:
        """The ready servers' prompts, as slash commands (`commands.PromptLookup`)."""
        ready = [s for s in self.mcp.servers.values() if s.state in ("ready", "broken")]
        return [mcp_commands.prompt_info(s.name, p) for s in ready for p in s.prompts]

    async def render_prompt(self, name: str, args: list[str]) -> str:
        """`/mcp:<server>:<prompt> args` as the text of a user turn; PromptError says why not."""
        _, server_name, prompt = (name.lstrip("/").split(":", 2) + ["", ""])[:3]
        server = self.mcp.servers.get(server_name)
        if server is None or not prompt:
            raise PromptError(f"/{name.lstrip('/')}: no MCP server {server_name!r} is configured")
        await server.wait_ready(server.config.connect_timeout)
        try:
            timeout = server.config.timeout or self.settings.command_timeout
            return await mcp_commands.render(server, prompt, args, timeout)
        except Exception as exc:  # noqa: BLE001 - PromptArgError, McpCallError: said as is
            raise PromptError(f"/{name.lstrip('/')}: {exc}") from None

    def commands(self) -> list[Command]:
        return [*self._mcp_cmds.values(), *self._skill_cmds.values()]

    def search_index(self) -> SearchIndex:
        """The cached index for `search.search_commands`, rebuilt only when the command
        set changed."""
        if self._search is None:
            self._search = SearchIndex.of(self.commands())
        return self._search

    def command_names(self) -> list[str]:
        """Every extension command name known now (for "did you mean")."""
        return [*self._mcp_cmds, *self._skill_cmds]

    def extension_sources(self) -> dict[str, list[str]]:
        """The configured MCP servers and installed skills, by kind (for not-found hints)."""
        return {"mcp": sorted(self.mcp.servers), "skill": sorted(self.skills)}

    def withheld_servers(self) -> str | None:
        """Why the folder's own servers are not here (None: loaded, or none): "this folder's
        mcp_servers.json (github) is not loaded: this folder is not trusted: run …"."""
        root, reason = self.workspace_root, self.withheld_reason()
        if root is None or reason is None:
            return None
        held = tuple(n for n in FOLDER_CONFIGS if (root / n).is_file()
                     and root / n not in self.mcp.paths())  # fmt: skip
        return withheld_servers_note(root, reason, files=held) if held else None

    async def wait_for_pending(self, limit: float, named_in: str | None = None) -> None:
        """Wait for the servers still connecting (those a command line `named_in` names,
        `mcp:NAME:`), up to their connectTimeout and `limit` seconds (a search at
        session start must not find nothing; a line calling one must not fail)."""
        pending = [s for s in self.mcp.servers.values() if s.state in ("connecting", "idle")
                   and (named_in is None or f"mcp:{s.name}:" in named_in)]  # fmt: skip
        if not pending:
            return
        bound = min(limit, max(s.config.connect_timeout for s in pending))
        await asyncio.gather(*(s.wait_ready(bound) for s in pending))

    def pending_servers(self) -> list[str]:
        return [s.name for s in self.mcp.servers.values() if s.state in ("connecting", "idle")]

    def notes(self) -> list[str]:
        """Why some commands may be missing from a listing (servers connecting or failed)."""
        out: list[str] = []
        for server in self.mcp.servers.values():
            if server.state in ("connecting", "idle"):
                out.append(
                    f"Note: MCP server {server.name!r} is still connecting; its tools "
                    "are not listed yet."
                )
            elif server.state == "failed":
                out.append(f"Note: {server.describe_failure()}")
        withheld = self.withheld_servers()
        if withheld is not None:
            out.append(f"Note: {withheld}.")
        return out

    def builtins(self) -> list[Command]:
        return [
            CommandSearchCommand(self),
            SkillSearchCommand(self),
            SkillLoadCommand(self),
            SkillReinforceCommand(self),
            SkillListCommand(self),
            SkillInfoCommand(self),
            SkillImportCommand(self),
            SkillRollbackCommand(self),
            SkillDeleteCommand(self),
        ]

    # ------------------------------------------------------------ internals

    def _changed(self) -> None:
        self._search = None
        self.version += 1

    def _refresh_skills(self) -> None:
        skills, self.skill_warnings = scan_roots(self.skill_roots())
        for warning in self.skill_warnings:
            log.warning("%s", warning)
        self.skills = {s.name: s for s in skills}
        self._skill_cmds = {
            script.command_name: SkillScriptCommand(
                script, " ".join([skill.description, skill.domain, *skill.tags])
            )
            for skill in skills
            for script in skill.scripts
        }
        self._changed()
        if self.install_wrappers:
            self._sync_skill_wrappers()

    async def _reload_mcp(self) -> None:
        await self.mcp.reload()
        for problem in self.mcp.problems:
            log.warning("%s", problem)
        self._rebuild_mcp()

    def _server_changed(self, server: McpServer) -> None:
        self._rebuild_mcp()

    def _rebuild_mcp(self) -> None:
        cmds: dict[str, McpCommand] = {}
        for server in self.mcp.servers.values():
            if server.state in ("ready", "broken"):
                cmds.update(mcp_commands.of_server(server))
                for tool in server.tools:
                    cmds[tool.command_name] = McpToolCommand(server, tool)
        self._mcp_cmds = cmds
        self._changed()
        if self.install_wrappers:
            self._sync_mcp_wrappers()

    def _bin_dirs(self) -> list[tuple[Path, Path | None]]:
        """Where wrappers go: `$SYNAPSE_HOME/bin` (no socket named: its wrappers ask
        `$SYNAPSE_EXT_SOCKET`), and this registry's own bin folder (naming its socket)."""
        dirs: list[tuple[Path, Path | None]] = [(self.settings.bin_dir, None)]
        if self.run_dir is not None:
            dirs.append((self.run_dir.bin_dir, self.run_dir.socket))
        return dirs

    def _sync_skill_wrappers(self) -> None:
        problems = self.wrapper_problems["skill"] = []
        wrapper_files.sync_skills(self._bin_dirs(), self._skill_cmds, problems)

    def _sync_mcp_wrappers(self) -> None:
        """Ready servers: exactly their commands. Connecting or failed servers keep what
        they had; servers gone or disabled lose theirs (`wrapper_files.sync_mcp`)."""
        problems = self.wrapper_problems["mcp"] = []
        servers = [
            (s.name, s.state, s.config.source in self.private_config_files)
            for s in self.mcp.servers.values()
        ]
        home = self.settings.synapse_home
        wrapper_files.sync_mcp(self._bin_dirs(), servers, self._mcp_cmds, home, problems)

    async def _on_files_changed(self, kinds: set[str]) -> None:
        if "skills" in kinds:
            self._refresh_skills()
        if "mcp" in kinds:
            await self._reload_mcp()

    # --------------------------------------------------------------- socket

    async def _start_socket(self) -> None:
        """Serve this registry's own socket (in its run folder, which no one else uses)."""
        if self.run_dir is None:
            return
        path = self.run_dir.socket
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            self._socket_server = await asyncio.start_unix_server(self._serve_one, path=str(path))
            os.chmod(path, 0o600)  # noqa: PTH101
            self._socket_file = path
        except OSError as exc:
            log.warning("extension socket %s not available: %s", path, exc)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            request = json.loads(line)
            argv = [str(a) for a in request["argv"]]
            cwd = Path(request.get("cwd") or Path.cwd())
            reply = await self.run_request(argv, cwd)
            writer.write(json.dumps(reply).encode())
            await writer.drain()
        except (ValueError, KeyError, TypeError) as exc:
            writer.write(json.dumps({"stderr": f"bad request: {exc}\n", "exit_code": 2}).encode())
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def run_request(self, argv: list[str], cwd: Path) -> dict[str, Any]:
        """Run `argv` (name first) as a wrapper would; `unknown` when not ours."""
        command = self.get(argv[0]) if argv else None
        if command is None:
            return {"unknown": True}
        if self.settings.sandbox == "read-only" and argv[1:] not in (["-h"], ["--help"]):
            # Called from inside a command, where nobody can be asked; a direct call
            # (`mcp:…` as the line) asks first in read-only mode.
            return {
                "stderr": f"{argv[0]}: refused in read-only mode (setting `sandbox`): an "
                "extension call from inside a command cannot be asked about; run it as "
                "its own command line\n",
                "exit_code": 126,
            }
        # What a shell of this registry has: its own bin folder first, its socket.
        env = child_env(os.environ, self.settings)
        env.pop(wrapper_files.SOCKET_ENV, None)
        folders = [str(folder) for folder, _ in reversed(self._bin_dirs())]
        env["PATH"] = os.pathsep.join([*folders, env.get("PATH", "")])
        if self.run_dir is not None:
            env[wrapper_files.SOCKET_ENV] = str(self.run_dir.socket)
        # A skill script called from inside a command is confined to the workspace this
        # registry serves, never to the directory the caller names (no workspace: it
        # may write nothing).
        settings = self.settings
        if self.workspace_root is None and settings.sandbox == "workspace-write":
            settings = replace(settings, sandbox="read-only")
        view = self.view()
        cwd = view.host(cwd)  # the caller's cwd as its shell spells it
        roots = (self.workspace_root,) if self.workspace_root is not None else (cwd,)
        ctx = CommandContext(
            cwd=cwd,
            view=view,
            settings=settings,
            files=DiskFiles(),
            env=env,
            roots=roots,
            extension_dirs=self.run_dir.visible if self.run_dir is not None else (),
        )
        out = await command.run(argv, ctx)
        stdout, stderr = out.stdout, out.stderr
        # A wrapper is a program in a pipeline (`mcp:fs:read x | jq`): it prints the whole
        # output, not the model's head + tail; a cut stream is whole in its spill file.
        path = out.full_output_path
        if path is not None and out.bounded:
            try:
                full = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                full = None
            if full is not None and path.name.endswith("-stderr.txt"):
                stderr = full
            elif full is not None:
                stdout = full
        return {"stdout": stdout, "stderr": stderr, "exit_code": out.exit_code}


async def run_one_shot(
    home: Path, config: Path | None, argv: list[str], cwd: Path
) -> dict[str, Any]:
    """A wrapper call with no Synapse process to ask: connect that one server, call, close."""
    name = argv[0]
    # The user's own settings (secretEnv, mcpEnvAllowCredentials) still apply.
    values, _ = read_settings_file(home / SETTINGS_FILE, workspace=False)
    settings, _ = Settings(synapse_home=home).with_overrides(values)
    server = name.split(":")[1] if name.startswith("mcp:") and name.count(":") >= 2 else None
    registry = ExtensionRegistry(
        settings,
        None,
        watch=False,
        install_wrappers=False,
        serve_socket=False,
        config_files=[config] if config is not None else None,
        only_servers={server} if server else set(),
    )
    await registry.start()
    try:
        reply = await registry.run_request(argv, cwd)
    finally:
        await registry.close()
    if reply.get("unknown"):
        return {
            "stderr": f"{name}: command not found (no longer configured?). Run `synapse tools "
            "refresh mcp` to regenerate the wrappers.\n",
            "exit_code": 127,
        }
    return reply


@dataclass(frozen=True)
class _Unavailable:
    """A command whose server is disabled or failed: a clear error, never a hang."""

    name: str
    reason: str
    summary: str = "unavailable MCP command"

    @property
    def usage(self) -> str:
        return self.name

    def help(self) -> str:
        return self.reason

    async def run(self, argv: Sequence[str], ctx: CommandContext) -> CommandOutput:
        return CommandOutput(
            stderr=self.reason.rstrip("\n") + "\n",
            exit_code=1,
            category=FailureCategory.DEPENDENCY_MISSING,
        )


class _Pending:
    """A command of a server still connecting: waits for it (up to connectTimeout)."""

    def __init__(self, name: str, server: McpServer, registry: ExtensionRegistry) -> None:
        self.name = name
        self.server = server
        self.registry = registry
        self.summary = f"MCP tool of {server.name} (server still connecting)"
        self.usage = name

    def help(self) -> str:
        return f"{self.name}: the MCP server {self.server.name!r} is still connecting."

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        await self.server.wait_ready(self.server.config.connect_timeout)
        target = self.registry.get(self.name)
        if target is None:
            return CommandOutput(
                stderr=f"{self.name}: command not found: server {self.server.name!r} has no "
                "tool of that name. List its tools with `command:search "
                f"mcp:{self.server.name}: --type mcp`.\n",
                exit_code=127,
                category=FailureCategory.NOT_FOUND,
            )
        if isinstance(target, _Pending):
            return CommandOutput(
                stderr=f"MCP server {self.server.name!r} is still connecting after "
                f"{self.server.config.connect_timeout:g} s; try again shortly.\n",
                exit_code=1,
                category=FailureCategory.DEPENDENCY_MISSING,
            )
        return await target.run(argv, ctx)
