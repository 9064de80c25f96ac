"""The one assembly: a folder's shell + router + extension registry + permission gate.

Every face (LSP, REPL and `chat -p`, `exec`, later ACP) builds its tools here, so
they are the same tools: the same built-ins, the same `mcp:`/`skill:` commands,
the same search and the same gate, all reading one live settings source. A face
only says how it asks the user (`ask`; none = the gate denies what it would ask,
saying why: `cannot_ask`), where files go (`files`: disk, or the editor's buffers) and
how it shows slow start-up work (`progress`), and whether it trusts the folder
(`trusted`: the face's word, e.g. VS Code's Workspace Trust or `--trust`; None = the
rule of `synapse_lsp.policy.trust`: the environment, then the remembered answer, else no).
An untrusted folder's own `mcp_servers.json` is not loaded and its hooks do not run
(home config only), and `trust_notice` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import shutil
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp import sandbox
from synapse_lsp.background import TaskOwner
from synapse_lsp.config import Settings, SettingsSource, as_source
from synapse_lsp.errors import SynapseError
from synapse_lsp.policy import folder_files, trust
from synapse_lsp.sandbox import HOST_VIEW, PathView

if TYPE_CHECKING:
    from synapse_lsp.extensions.registry import ExtensionRegistry
    from synapse_lsp.extensions.search import Match
    from synapse_lsp.extensions.wrapper_files import RunDir
    from synapse_lsp.files import FileGateway
    from synapse_lsp.policy.gate import Asker, AskingGate, RuleStore
    from synapse_lsp.router import BashRouter, RouteResult
    from synapse_lsp.shell import ShellSession, WrapperDir

log = logging.getLogger(__name__)
Progress = Callable[[str], AbstractAsyncContextManager[None]]


@dataclass
class ChatTools:
    """One chat session's own shell (its own cwd and env), gate and router."""

    router: BashRouter
    shell: ShellSession
    gate: AskingGate


class Workspace:
    """The tools of one folder; nothing starts before `start()` (or the first use)."""

    def __init__(
        self,
        root: Path,
        settings: Settings | SettingsSource,
        *,
        files: Callable[[], FileGateway] | None = None,
        ask: Asker | None = None,
        extensions: bool = True,
        watch: bool = True,
        progress: Progress | None = None,
        before_mcp: Callable[[], Awaitable[None]] | None = None,
        trusted: bool | None = None,
        cannot_ask: str | None = None,
        rules: RuleStore | None = None,
    ) -> None:
        self.root = root
        self.settings_source = as_source(settings)
        self.trust = trust.decide(self.settings.synapse_home, root, face=trusted)
        # A trusted folder's files that changed since Synapse last loaded them are not
        # used until the user confirms them (trust.unconfirmed); the rest is recorded.
        self.unconfirmed: list[Path] = self._unconfirmed()
        self._files = files
        self._ask = ask
        self._cannot_ask = cannot_ask
        self._rules = rules  # None: the remembered rules (`rule_store`)
        self._use_registry = extensions
        self._watch = watch
        self._progress = progress
        self._before_mcp = before_mcp
        self._gate: AskingGate | None = None
        self.shell: ShellSession | None = None
        self.router: BashRouter | None = None
        self.registry: ExtensionRegistry | None = None
        self.registry_error: str | None = None
        # The registry's own wrappers and socket (`wrapper_files.RunDir`), made before
        # the first shell starts (its PATH and sandbox name them), removed by close().
        self.run_dir: RunDir | None = None
        # The /tmp every shell of the folder sees when sandboxed (and its skill scripts
        # and wrappers): one host folder, made before the first shell, removed by close().
        self.private_tmp: Path | None = None
        self.tasks = TaskOwner(f"workspace-{root.name}")
        self._registry_task: asyncio.Task[None] | None = None
        # begin_close(): the registry it is closing, and that close; the shells' close
        self._extensions_closing: tuple[ExtensionRegistry | None, asyncio.Task[None]] | None = None
        self._shells_closing: asyncio.Task[None] | None = None
        # prepare()'s router and registry, until start()
        self._prepared: tuple[BashRouter, ExtensionRegistry | None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._session_shells: weakref.WeakSet[ShellSession] = weakref.WeakSet()

    @property
    def settings(self) -> Settings:
        return self.settings_source()

    @property
    def started(self) -> bool:
        return self.router is not None

    @property
    def trusted(self) -> bool:
        return self.trust.trusted

    def _unconfirmed(self) -> list[Path]:
        home = self.settings.synapse_home
        # $SYNAPSE_HOME's MCP config changed since it was loaded: not used either
        own = [home / n for n in trust.home_unconfirmed(home) if n == trust.HOME_MCP]
        if not self.trust.trusted:
            return own
        changed = trust.unconfirmed(home, self.root)
        if not changed:
            trust.record_loaded(home, self.root)
        return own + changed

    @property
    def trust_notice(self) -> str | None:
        """Why the folder's own extension config is not in use (None: nothing withheld)."""
        home = self.settings.synapse_home
        own = [str(p.relative_to(home)) for p in self.unconfirmed if p.is_relative_to(home)]
        folder = [p for p in self.unconfirmed if not p.is_relative_to(home)]
        notices = [trust.home_unconfirmed_notice(home, own)] if own else []
        if self.trusted:
            if folder:
                notices.append(trust.unconfirmed_notice(self.root, folder))
        else:
            untrusted = trust.untrusted_notice(self.root, self._trust_hint)
            if untrusted:
                notices.append(untrusted)
        return "; ".join(notices) or None

    _trust_hint = ""  # a face's own words for how to trust the folder

    def mcp_config_files(self) -> list[Path]:
        """The MCP configs the folder's registry reads: home's, a trusted folder's own."""
        from synapse_lsp.extensions.mcp_client import config_paths

        paths = config_paths(self.settings, self.root, trusted=self.trusted)
        return [p for p in paths if p not in self.unconfirmed]

    def private_mcp_config_files(self) -> list[Path]:
        """Those of `mcp_config_files()` whose servers belong to this workspace alone:
        their wrappers stay out of `$SYNAPSE_HOME/bin` (none here; an ACP session's)."""
        return []

    async def set_trusted(self, trusted: bool) -> None:
        """The face's word changed (the user trusted the folder): a running registry
        re-reads its MCP config, so the folder's own servers start (or stop)."""
        if trusted == self.trusted and self.trust.source == "face":
            return
        self.trust = trust.Trust(trusted, "face")
        self.unconfirmed = self._unconfirmed()
        registry = self.registry
        if registry is None:
            return
        registry.mcp.config_files = self.mcp_config_files()
        await registry.refresh("all")  # the folder's skills come (or go) with its servers

    def new_gate(
        self, shell: Callable[[], ShellSession | None], *, typed_by_user: bool = False
    ) -> AskingGate:
        """A permission gate for the commands of `shell()`: it asks through the face, or,
        when it cannot ask, denies what would be asked and says why (`typed_by_user`: the
        user's own lines, which only deny rules and the sandbox mode limit). An agent's
        gate carries the folder's hooks (`hooks.Hooks`: a trusted folder's hook files,
        read once), which its chats run too, and what MCP servers say of their tools."""
        from synapse_lsp.policy.gate import NO_ASKING, AskingGate
        from synapse_lsp.policy.hooks import Hooks

        def sandboxed() -> bool:
            current = shell()
            return current is not None and current.sandbox.sandboxed

        def view() -> PathView:
            current = shell()
            return current.view if current is not None else HOST_VIEW

        return AskingGate(
            self.settings_source,
            self.root,
            self._ask,
            sandboxed=sandboxed,
            view=view,
            rules=self.rule_store(),
            cannot_ask=self._cannot_ask or NO_ASKING,
            typed_by_user=typed_by_user,
            tool_hints=lambda name: self.registry.tool_hint(name) if self.registry else None,
            hooks=None
            if typed_by_user
            else Hooks(
                self.settings_source,
                self.root,
                lambda: self.trusted,
                withheld=lambda: self.unconfirmed,
            ),
        )

    def rule_store(self) -> RuleStore:
        """The remembered "Always allow" / deny rules (`permission_rules`), or what the
        face gave (`rules`: e.g. a run's own prefixes over them, `policy.run_rules`)."""
        from synapse_lsp.policy.run_rules import RuleFile

        return self._rules or RuleFile(self.settings.synapse_home)

    @property
    def gate(self) -> AskingGate:
        """The gate of the folder's own (direct) commands."""
        if self._gate is None:
            self._gate = self.new_gate(lambda: self.shell)
        return self._gate

    async def start(self) -> BashRouter:
        """The folder's router, starting its shell and extension registry on first use."""
        if self.router is not None:
            return self.router
        async with self._lock:
            if self._closed:
                raise SynapseError(f"workspace {self.root} was closed")
            if self.router is not None:
                return self.router
            router, registry = self._prepared or await self._prepare()
            await router.shell.start()
            if registry is not None:
                self.registry = registry
                self._registry_task = self.tasks.spawn(self._run_registry(registry), "registry")
            self.router = router
            return router

    async def prepare(self) -> BashRouter:
        """The folder's router with all its built-ins (the registry's too) before anything
        runs: no bash, MCP server, watcher or socket yet. `chat -p` sends its first model
        request with it, then `start()` starts the rest (a command starts its bash)."""
        async with self._lock:
            if self._closed:
                raise SynapseError(f"workspace {self.root} was closed")
            return self.router or (self._prepared or await self._prepare())[0]

    async def _prepare(self) -> tuple[BashRouter, ExtensionRegistry | None]:
        from synapse_lsp.router import BashRouter

        if self._use_registry:
            self._make_run_dir()
        shell = self.shell = self._new_shell()
        files = self._files() if self._files is not None else None
        router = BashRouter(shell, self.settings_source, files=files, permission=self.gate)
        registry = await self._new_registry(router) if self._use_registry else None
        self._prepared = (router, registry)
        return self._prepared

    def _new_shell(self) -> ShellSession:
        """A shell of the folder: its wrappers, and the folder's one /tmp."""
        from synapse_lsp.shell import ShellSession

        if self.private_tmp is None:
            self.private_tmp = sandbox.make_private_tmp()
        return ShellSession(
            self.root,
            self.settings_source,
            wrappers=self.wrapper_dir(),
            private_tmp=self.private_tmp,
        )

    def _make_run_dir(self) -> None:
        from synapse_lsp.extensions.wrapper_files import RunDir

        if self.run_dir is not None:
            return
        try:
            self.run_dir = RunDir.create(self.settings.synapse_home)
        except OSError as exc:  # the shell still works; wrappers reach no registry
            log.warning("workspace %s: no folder for wrappers and socket: %s", self.root, exc)

    def wrapper_dir(self) -> WrapperDir | None:
        """What the folder's shells get of the registry's wrappers: its bin folder first
        on PATH, its socket in `$SYNAPSE_EXT_SOCKET`, both visible in the sandbox."""
        from synapse_lsp.shell import WrapperDir

        run = self.run_dir
        return None if run is None else WrapperDir(run.bin_dir, run.socket, run.visible)

    async def _new_registry(self, router: BashRouter) -> ExtensionRegistry | None:
        """The folder's registry, its built-ins on `router` (started by `start()`)."""
        try:
            # Imported off the event loop: the MCP SDK behind it costs most of a second.
            module = await asyncio.to_thread(
                importlib.import_module, "synapse_lsp.extensions.registry"
            )
            from synapse_lsp.extensions.claude_sources import skill_roots

            registry: ExtensionRegistry = module.ExtensionRegistry(
                self.settings_source,
                self.root,
                watch=self._watch,
                config_files=self.mcp_config_files(),
                run_dir=self.run_dir,
                private_config_files=self.private_mcp_config_files(),
            )
            router.extensions = registry
            registry.withheld_reason = lambda: trust.mcp_withheld_reason(
                self.root, self.trusted, self.unconfirmed, self._trust_hint
            )
            registry.skill_roots = lambda: skill_roots(  # a changed .claude/skills: not read
                self.settings.synapse_home, self.root, self.trusted, self.unconfirmed
            )
            registry.mcp.withheld = lambda: trust.changed_mcp_configs(
                self.settings.synapse_home, self.root, self.trusted
            )
            registry.view = lambda: router.shell.view  # a wrapper's paths, as its shell spells them
            for command in registry.builtins():
                router.register(command)
        except Exception as exc:  # extensions are optional: the shell must still work
            self.registry_error = f"extensions unavailable: {exc}"
            log.warning("workspace %s: %s", self.root, self.registry_error)
            return None
        return registry

    async def _run_registry(self, registry: ExtensionRegistry) -> None:
        try:
            if self._before_mcp is not None and self.has_mcp_config():
                await self._before_mcp()  # e.g. the LSP warm-up importing the MCP SDK
            await registry.start()
            if self._progress is not None and registry.pending_servers():
                async with self._progress("Synapse: connecting MCP servers"):
                    await registry.wait_for_mcp(60.0)
        except Exception as exc:
            self.registry_error = f"extensions failed to start: {exc}"
            log.warning("workspace %s: %s", self.root, self.registry_error)

    def has_mcp_config(self) -> bool:
        return any(path.is_file() for path in self.mcp_config_files())

    async def registry_ready(self) -> ExtensionRegistry | None:
        """The started registry (None when extensions are unavailable)."""
        await self.start()
        if self._registry_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._registry_task)
        return self.registry

    async def run(self, command: str, *, timeout: float | None = None) -> RouteResult:
        """One command in the folder's own shell."""
        router = await self.start()
        if "mcp:" in command:
            # An MCP tool run right after start: let its server finish connecting
            # (bounded by the registry's connect wait) instead of "command not found".
            await self.registry_ready()
        if timeout is not None:
            source = self.settings_source
            router = router.derive(settings=lambda: replace(source(), command_timeout=timeout))
        return await router.route(command)

    async def restart_shell(self) -> None:
        await self.start()
        assert self.shell is not None
        await self.shell.restart()

    async def session_tools(self) -> ChatTools:
        """A router on a fresh shell (in the folder) for one chat session, with its own gate."""
        router = await self.start()

        shell = self._new_shell()
        await shell.start()
        self._session_shells.add(shell)
        gate = self.new_gate(lambda: shell)
        return ChatTools(router.derive(shell=shell, permission=gate, state={}), shell, gate)

    def search(self, query: str, kind: str | None = None) -> list[Match]:
        """The one search over the folder's extension commands (`command:search`'s)."""
        from synapse_lsp.extensions.search import search_commands

        if self.registry is None:
            return []
        return search_commands(self.registry.search_index(), query, kind)

    def tool_count(self) -> int:
        return len(self.registry.commands()) if self.registry is not None else 0

    async def refresh_tools(self, what: str) -> dict[str, Any]:
        registry = await self.registry_ready()
        if registry is None:
            return {"tools": 0, "errors": [self.registry_error or "extensions unavailable"]}
        if what in ("mcp", "all"):
            # The user's own "refresh tools" (an editor command, never the agent's):
            # the MCP configs as they are now are what the user asked to start.
            home = self.settings.synapse_home
            trust.record_home(home, (trust.HOME_MCP,))
            if self.trusted:
                trust.record_loaded(home, self.root, only=folder_files.FOLDER_CONFIGS)
            self.unconfirmed = self._unconfirmed()
            registry.mcp.config_files = self.mcp_config_files()
        await registry.refresh(what)  # type: ignore[arg-type]
        with contextlib.suppress(Exception):
            await registry.wait_for_mcp(30.0)
        notice = [self.trust_notice] if self.trust_notice else []
        return {"tools": self.tool_count(), "errors": notice + list(registry.problems)}

    def child_pids(self) -> list[int]:
        """Process ids of the bash sessions this folder owns (for last-resort cleanup)."""
        shells = [self.shell, *self._session_shells]
        return [s.pid for s in shells if s is not None and s.pid is not None]

    def begin_close(self, *, shells: bool = True) -> None:
        """Begin ending the folder's extensions (MCP servers, watcher, socket) and, with
        `shells`, its background tasks and shells (none starts after). A face whose
        conversation closes for good calls it first, so they end beside its last work
        (the after-snapshot, SessionEnd hooks: neither uses them); `close()` awaits them."""
        registry, closing = self.registry, self._extensions_closing
        if closing is None or closing[0] is not registry:  # once per registry
            ending = _end_registry(self.root, self._registry_task, registry)
            self._extensions_closing = (registry, asyncio.get_running_loop().create_task(ending))
        if shells and self._shells_closing is None:
            self._closed = True
            self._shells_closing = asyncio.get_running_loop().create_task(self._close_shells())

    async def _close_shells(self) -> None:
        await self.tasks.aclose()
        shells = [s for s in (self.shell, *self._session_shells) if s is not None]
        self._session_shells.clear()
        await asyncio.gather(*(s.close() for s in shells), return_exceptions=True)

    async def close(self) -> None:
        """Dispose everything: the registry and its children beside the background tasks
        and shells (`begin_close`), then the folders."""
        self.begin_close()
        assert self._extensions_closing is not None and self._shells_closing is not None
        closing = (self._extensions_closing[1], self._shells_closing)
        await asyncio.gather(*map(asyncio.shield, closing), return_exceptions=True)
        self.router = None
        if self.run_dir is not None:
            self.run_dir.remove()
            self.run_dir = None
        if self.private_tmp is not None:
            shutil.rmtree(self.private_tmp, ignore_errors=True)
            self.private_tmp = None


async def _end_registry(
    root: Path, starting: asyncio.Task[None] | None, registry: ExtensionRegistry | None
) -> None:
    """A workspace's registry's close; the task still connecting its servers ends first."""
    if starting is not None and not starting.done():
        starting.cancel()
        await asyncio.wait({starting}, timeout=5.0)
    if registry is not None:
        try:
            await asyncio.wait_for(registry.close(), 10.0)
        except BaseException as exc:  # keep closing the rest
            log.warning("workspace %s: closing extensions: %s", root, exc)
