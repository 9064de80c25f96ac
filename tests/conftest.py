"""Shared fixtures: a temporary SYNAPSE_HOME, a real bash session and a router on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

# The suites run their shells unsandboxed (full-access), as they did before the
# sandbox: servers and CLIs started by tests read $SYNAPSE_SANDBOX, and so does the
# default of a `Settings(...)` built in a test (config.default_sandbox).
# tests/sandbox/ sets its modes explicitly.
os.environ["SYNAPSE_SANDBOX"] = "full-access"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(synapse_home=tmp_path / "synapse-home", command_timeout=30.0)


@pytest.fixture
async def shell(workdir: Path, settings: Settings) -> AsyncIterator[ShellSession]:
    session = ShellSession(workdir, settings)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


@pytest.fixture
async def router(shell: ShellSession, settings: Settings) -> BashRouter:
    return BashRouter(shell, settings)
