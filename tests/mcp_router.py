"""A router on a registry's extensions, as a chat session has one: a bash session with
the registry's own wrappers first (naming its socket), the registry's built-ins, and
the chat's `McpHost` when given. For the MCP suites."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from synapse_lsp.commands import McpHost
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession, WrapperDir


@contextlib.asynccontextmanager
async def extension_router(
    registry: ExtensionRegistry, cwd: Path, host: McpHost | None = None
) -> AsyncIterator[BashRouter]:
    run = registry.run_dir
    assert run is not None
    wrappers = WrapperDir(run.bin_dir, run.socket, run.visible)
    shell = ShellSession(cwd, registry.settings, wrappers=wrappers)
    await shell.start()
    router = BashRouter(shell, registry.settings, extensions=registry, mcp_host=host)
    for command in registry.builtins():
        router.register(command)
    try:
        yield router
    finally:
        await shell.close()
