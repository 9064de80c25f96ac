"""Buffers and disk agree before a command runs (issue 29): the agent's edits land in
the editor's buffers unsaved; before the next command line that reads the disk, a
client that offers `synapse/saveDocuments` saves them, a buffer that also holds the
user's own unsaved edits is never saved unasked, and a client without the request is
told once and the model is told, in each result, which files differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.lsp_client import editor

FAKE_KEY = "sk-ant-fake-lsp-test"
TEST = "python3 -c 'import a; assert a.y == 3, a.y; print(\"tests pass\")'"


def _env(api: FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": api.base_url}


def _results(api: FakeAnthropic) -> list[str]:
    """The tool results the model got, in order."""
    found: list[str] = []
    for request in api.message_requests:
        for message in request["messages"]:
            if message["role"] != "user" or isinstance(message["content"], str):
                continue
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    found.append(content if isinstance(content, str) else content[0]["text"])
    return list(dict.fromkeys(found))


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "a.py").write_text("y = 2\n")
    return path


async def _turn(
    tmp_path: Path, proj: Path, *, save: bool, user_edit: bool
) -> tuple[list[str], list[list[str]], list[str]]:
    async with FakeAnthropic([]) as api:
        api.add(
            {"commands": ["edit a.py 'y = 2' 'y = 3'"]},
            {"commands": [TEST]},
            {"text": "done"},
        )
        async with editor(tmp_path / "home", [proj], env=_env(api), save_documents=save) as ed:
            uri = ed.open(proj / "a.py")
            if user_edit:
                ed.type_text(uri, "# the user's own line\n")
            sid = (await ed.command("synapse.session.new", {"workspaceUri": proj.as_uri()}))[
                "sessionId"
            ]
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "fix y"})
            shown = [m.message for m in ed.client.messages]
            return _results(api), ed.saves, shown


async def test_the_agents_edit_is_saved_before_its_test_runs(tmp_path: Path, proj: Path) -> None:
    results, saves, _ = await _turn(tmp_path, proj, save=True, user_edit=False)
    assert saves == [[(proj / "a.py").as_uri()]]
    assert (proj / "a.py").read_text() == "y = 3\n"
    assert "not saved yet; the editor saves it before the next command runs" in results[0]
    assert "tests pass" in results[1] and "not on disk" not in results[1]


async def test_the_users_own_unsaved_edits_are_never_saved_unasked(
    tmp_path: Path, proj: Path
) -> None:
    results, saves, _ = await _turn(tmp_path, proj, save=True, user_edit=True)
    assert saves == []
    assert (proj / "a.py").read_text() == "y = 2\n"  # the disk keeps the old text
    assert "the user's own unsaved edits" in results[1] and "ask the user to save it" in results[1]


async def test_a_client_without_the_request_is_told_once_and_the_model_each_time(
    tmp_path: Path, proj: Path
) -> None:
    results, saves, shown = await _turn(tmp_path, proj, save=False, user_edit=False)
    assert saves == [] and (proj / "a.py").read_text() == "y = 2\n"
    assert "AssertionError: 2" in results[1]  # the test read the disk
    assert "your edits are in the editor but not on disk" in results[1]
    assert "the editor cannot save it for Synapse" in results[1]
    assert sum("cannot save documents for Synapse" in m for m in shown) == 1


async def test_a_buffer_the_user_typed_in_after_the_agents_edit_is_not_saved(
    tmp_path: Path, proj: Path
) -> None:
    async with FakeAnthropic([]) as api:
        api.add({"commands": ["edit a.py 'y = 2' 'y = 3'"]}, {"text": "edited"})
        async with editor(tmp_path / "home", [proj], env=_env(api), save_documents=True) as ed:
            uri = ed.open(proj / "a.py")
            sid = (await ed.command("synapse.session.new", {"workspaceUri": proj.as_uri()}))[
                "sessionId"
            ]
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "fix y"})
            ed.type_text(uri, "# the user reviews and adds a line\n")
            api.add({"commands": ["cat a.py"]}, {"text": "looked"})
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "show it"})
            assert ed.saves == []
            assert (proj / "a.py").read_text() == "y = 2\n"
            assert "the user's own unsaved edits" in _results(api)[-1]


async def test_a_rewind_puts_the_saved_file_back_on_disk_too(tmp_path: Path, proj: Path) -> None:
    """Rewind x save: the turn's edit was saved before its command ran; rewinding the
    turn edits the buffer back, and that is saved too (the disk had the agent's text)."""
    async with FakeAnthropic([]) as api:
        api.add({"commands": ["edit a.py 'y = 2' 'y = 3'", "echo made > made.txt"]}, {"text": "ok"})
        async with editor(tmp_path / "home", [proj], env=_env(api), save_documents=True) as ed:
            uri = ed.open(proj / "a.py")
            sid = (await ed.command("synapse.session.new", {"workspaceUri": proj.as_uri()}))[
                "sessionId"
            ]
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            assert (proj / "a.py").read_text() == "y = 3\n"
            report = await ed.command("synapse.session.rewind", {"sessionId": sid, "turn": 1})
            assert "a.py" in report["restored"]
            assert ed.docs[uri].text == "y = 2\n"
            assert (proj / "a.py").read_text() == "y = 2\n"
            assert not (proj / "made.txt").exists()
