"""Shared fixtures: a temporary SYNAPSE_HOME, a real bash session and a router on it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

# Every suite runs in the configuration a user gets: workspace-write, network off,
# bubblewrap present (`./dev` installs it). A test that needs another mode says so
# itself. `./dev test` runs a second, shorter leg with SYNAPSE_TEST_LEG=full-access
# (the environment's default mode) or =fallback (a bwrap that cannot create its
# namespaces comes first on PATH, as in some containers).
# A sandboxed session has a /tmp of its own, so a folder under the host's /tmp is not
# where a user's folders are: tests' folders (workspaces, and the "outside" folders a
# test writes to and then looks at from here) go under /var/tmp, beside a user's.
if os.path.realpath(tempfile.gettempdir()) == "/tmp" and os.access("/var/tmp", os.W_OK):  # noqa: S108
    os.environ["TMPDIR"] = "/var/tmp"  # noqa: S108
    tempfile.tempdir = None

LEG = os.environ.get("SYNAPSE_TEST_LEG", "default")
if LEG == "full-access":
    os.environ["SYNAPSE_SANDBOX"] = "full-access"
else:
    os.environ.pop("SYNAPSE_SANDBOX", None)
if LEG == "fallback":
    # bwrap is there but cannot create its namespaces (some containers): Synapse
    # warns and runs unsandboxed. A stand-in that fails as bwrap does there.
    _FAKE = Path(tempfile.mkdtemp(prefix="synapse-no-userns-"))
    (_FAKE / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because "
        "the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    (_FAKE / "bwrap").chmod(0o755)
    os.environ["PATH"] = f"{_FAKE}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture(autouse=True)
def _sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`@pytest.mark.sandbox_mode("full-access")`: this test's shells (and the
    servers and CLIs it starts) run in that mode instead of the leg's."""
    marker = request.node.get_closest_marker("sandbox_mode")
    if marker is not None:
        monkeypatch.setenv("SYNAPSE_SANDBOX", str(marker.args[0]))


@pytest.fixture(autouse=True)
def _no_users_claude_files(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine user's own Claude Code commands and sub-agents (`~/.claude`) stay out
    of the tests: an empty $CLAUDE_CONFIG_DIR (a test that wants some sets its own)."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path_factory.getbasetemp() / "no-claude"))


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
