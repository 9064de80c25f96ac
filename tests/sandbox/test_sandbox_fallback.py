"""Where bubblewrap is missing or cannot work, the shell runs unsandboxed and says
so (`SandboxStatus.sandboxed` False with the reason), never pretending."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession

# bwrap's own message where the kernel refuses unprivileged user namespaces.
USERNS_MESSAGE = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not "
    "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)
# What the shell and these tests need on a PATH that lacks bwrap.
TOOLS = ("bash", "touch", "cat", "sleep", "python3", "env", "ls")


def _settings(tmp_path: Path) -> Settings:
    return Settings(synapse_home=tmp_path / "home", sandbox="workspace-write", network="off")


@pytest.fixture
def path_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin-without-bwrap"
    bindir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bindir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bindir))
    return bindir


@pytest.fixture
def failing_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `bwrap` first on PATH that fails like a kernel without user namespaces."""
    bindir = tmp_path / "bin-fake-bwrap"
    bindir.mkdir()
    fake = bindir / "bwrap"
    fake.write_text(f'#!/bin/sh\necho "{USERNS_MESSAGE}" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    return fake


def test_full_access_is_not_sandboxed_and_needs_no_reason(tmp_path: Path) -> None:
    status = sandbox.status(Settings(synapse_home=tmp_path, sandbox="full-access"))
    assert status == sandbox.SandboxStatus("full-access", False, "off", None)
    assert status.describe() == "full-access (no sandbox)"


async def test_missing_bwrap_runs_unsandboxed_and_says_why(
    tmp_path: Path,
    path_without_bwrap: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = _settings(tmp_path)
    with caplog.at_level(logging.WARNING, logger="synapse_lsp.sandbox"):
        status = sandbox.status(settings)
        assert sandbox.status(settings) == status
    assert not status.sandboxed
    assert status.reason == "bubblewrap (bwrap) is not installed"
    assert status.describe() == (
        "workspace-write requested, NOT sandboxed: bubblewrap (bwrap) is not installed"
    )
    assert len([r for r in caplog.records if "without a sandbox" in r.getMessage()]) == 1
    work = tmp_path / "work"
    work.mkdir()
    session = ShellSession(work, settings)
    await session.start()
    try:
        assert session.sandbox == status
        assert session.private_tmp is None
        # honestly unconfined: a write outside the workspace goes through
        result = await session.run(f"touch {tmp_path}/outside.txt && echo ok")
        assert result.stdout == "ok\n", result.stderr
        assert (tmp_path / "outside.txt").exists()
    finally:
        await session.close()


async def test_bwrap_without_user_namespaces_runs_unsandboxed_and_says_why(
    tmp_path: Path, failing_bwrap: Path
) -> None:
    settings = _settings(tmp_path)
    status = sandbox.status(settings)
    assert not status.sandboxed
    assert status.reason == f"bwrap cannot create a user namespace here: {USERNS_MESSAGE}"
    assert "NOT sandboxed: bwrap cannot create a user namespace here" in status.describe()
    work = tmp_path / "work"
    work.mkdir()
    session = ShellSession(work, settings)
    await session.start()
    try:
        assert not session.sandbox.sandboxed
        assert session.sandbox.reason == status.reason
        result = await session.run("echo $$")
        assert int(result.stdout) == session.pid  # bash itself, no bwrap in between
        assert (await session.run(f"touch {tmp_path}/outside.txt")).exit_code == 0
    finally:
        await session.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_the_probe_is_kept_per_bwrap_path(
    tmp_path: Path, failing_bwrap: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    assert not sandbox.status(settings).sandboxed
    # the real bwrap (another path) is probed on its own: the fake's verdict does not leak
    path = os.environ["PATH"].split(os.pathsep, 1)[1]
    monkeypatch.setenv("PATH", path)
    assert sandbox.status(settings).sandboxed
    assert sandbox.status(settings).sandboxed
    assert set(sandbox.probe_seconds) == {
        os.path.realpath(failing_bwrap),
        os.path.realpath(str(shutil.which("bwrap"))),
    }
