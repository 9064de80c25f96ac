"""Project instructions (AGENTS.md, CLAUDE.md): read in order into the system prompt,
`@path` imports confined and through the secrets deny-list, shown in `/context`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.agent.instructions import is_secret_path, load
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "userhome"
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRETKEY\n")
    (path / ".claude").mkdir()
    (path / ".claude" / "CLAUDE.md").write_text("USER-CLAUDE: answer tersely.\n")
    return path


def test_files_load_in_the_documented_order(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "repo"
    sub = root / "pkg" / "core"
    sub.mkdir(parents=True)
    synapse_home = tmp_path / "synapse-home"
    synapse_home.mkdir()
    (synapse_home / "AGENTS.md").write_text("SYNAPSE-USER\n")
    (root / "AGENTS.md").write_text("ROOT-AGENTS\n")
    (root / "CLAUDE.md").write_text("ROOT-CLAUDE\n")
    (root / "CLAUDE.local.md").write_text("ROOT-LOCAL\n")
    (root / "pkg" / "AGENTS.md").write_text("PKG-AGENTS\n")
    (root / "docs").mkdir()
    (root / "docs" / "AGENTS.md").write_text("DOCS-AGENTS\n")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "AGENTS.md").write_text("NOT-OURS\n")

    found = load(root, root / "pkg", synapse_home, home)
    texts = [f.text.strip() for f in found.files]
    assert texts == [
        "SYNAPSE-USER",
        "USER-CLAUDE: answer tersely.",
        "ROOT-AGENTS",
        "ROOT-CLAUDE",
        "ROOT-LOCAL",
        "PKG-AGENTS",
    ]
    assert [f.scope for f in found.files] == [
        "user",
        "user",
        "project",
        "project",
        "local",
        "project",
    ]
    # deeper folders' own files are listed by path, dependency folders skipped
    assert found.nested == [root / "docs" / "AGENTS.md"]
    text = found.prompt_text(root)
    assert text.index("ROOT-AGENTS") < text.index("PKG-AGENTS")
    assert "docs/AGENTS.md" in text and "NOT-OURS" not in text


def test_a_hostile_import_sends_nothing(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "style.md").write_text("STYLE-GUIDE @../secret.env\n")
    (root / "secret.env").write_text("TOKEN=abc\n")
    (root / ".env").write_text("API_KEY=leak\n")
    (tmp_path / "outside.md").write_text("OUTSIDE-TEXT\n")
    (root / "CLAUDE.md").write_text(
        "Read @docs/style.md first.\n"
        "Also @~/.ssh/id_rsa and @../outside.md and @.env\n"
        "Mention @someone; code `@docs/nothing.md` is not an import.\n"
        "```\n@docs/fenced.md\n```\n"
    )
    found = load(root, root, tmp_path / "synapse-home", home)
    (claude,) = [f for f in found.files if f.path == root / "CLAUDE.md"]
    assert "STYLE-GUIDE" in claude.text  # an import inside the workspace
    for leaked in ("SECRETKEY", "OUTSIDE-TEXT", "API_KEY=leak", "TOKEN=abc"):
        assert leaked not in found.prompt_text(root)
    refused = "\n".join(claude.refused)
    assert "@~/.ssh/id_rsa: a secret file" in refused
    assert "@../outside.md: outside the workspace" in refused
    assert "@.env: a secret file" in refused
    assert "@../secret.env: a secret file" in refused  # an import's own import too
    assert "nothing.md" not in refused and "fenced.md" not in refused  # not imports


def test_an_instruction_file_linked_to_a_secret_or_outside_is_not_read(
    tmp_path: Path, home: Path
) -> None:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").symlink_to(home / ".ssh" / "id_rsa")
    (tmp_path / "elsewhere.md").write_text("ELSEWHERE\n")
    (root / "CLAUDE.md").symlink_to(tmp_path / "elsewhere.md")
    (root / "pkg" / "AGENTS.md").write_text("PKG\n")
    found = load(root, root / "pkg", tmp_path / "synapse-home", home)
    text = found.prompt_text(root)
    assert "SECRETKEY" not in text and "ELSEWHERE" not in text
    assert [f.text.strip() for f in found.files] == ["USER-CLAUDE: answer tersely.", "PKG"]


def test_a_user_file_may_import_from_home_but_not_its_secrets(tmp_path: Path, home: Path) -> None:
    (home / "notes.md").write_text("HOME-NOTES\n")
    (home / ".claude" / "CLAUDE.md").write_text("@~/notes.md @~/.ssh/id_rsa @/etc/hostname\n")
    found = load(tmp_path, tmp_path, tmp_path / "synapse-home", home)
    (user,) = found.files
    assert "HOME-NOTES" in user.text and "SECRETKEY" not in user.text
    assert any("outside the home folder" in why for why in user.refused)
    assert is_secret_path(home / ".aws" / "credentials", home)
    assert not is_secret_path(home / "notes.md", home)


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


async def test_the_model_gets_the_instructions_in_an_untrusted_folder_and_context_lists_them(
    api: FakeAnthropic, router: BashRouter, settings: Settings, workdir: Path
) -> None:
    (workdir / "AGENTS.md").write_text("Always run `make check` before finishing.\n")
    api.add("ok")
    model = ModelClient(api_key="sk-ant-x", base_url=api.base_url, model="fake-model")
    session = ChatSession(router, settings, model=model, workspace_root=workdir)
    try:
        _ = [e async for e in session.run_turn("hi")]
        report = await session.context_report()
    finally:
        await model.close()
    system = api.message_requests[0]["system"]
    assert "Always run `make check` before finishing." in system[1]["text"]
    assert "cache_control" in system[0] and "cache_control" not in system[1]
    assert str(workdir / "AGENTS.md") in report.text()
    assert "tokens" in report.text().split(str(workdir / "AGENTS.md"))[1].splitlines()[0]
