"""Fixtures of the sandbox suite: real bubblewrap, modes set explicitly (the rest of
the test session runs full-access, tests/conftest.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    """Each test probes bwrap as its own PATH finds it."""
    sandbox._reset_for_tests()
    yield
    sandbox._reset_for_tests()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """workspace-write, network off: the default a user gets."""
    return Settings(
        synapse_home=tmp_path / "synapse-home",
        command_timeout=30.0,
        sandbox="workspace-write",
        network="off",
    )


@pytest.fixture
async def shell(workdir: Path, settings: Settings) -> AsyncIterator[ShellSession]:
    session = ShellSession(workdir, settings)
    await session.start()
    try:
        assert session.sandbox.sandboxed, session.sandbox.describe()
        yield session
    finally:
        await session.close()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host directory outside the workspace and outside /tmp (the sandbox has a
    /tmp of its own, so a path under the host's /tmp would not even be seen)."""
    base = "/var/tmp" if Path("/var/tmp").is_dir() else str(Path.home())  # noqa: S108
    path = Path(tempfile.mkdtemp(prefix="synapse-outside-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
