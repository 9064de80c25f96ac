"""Issue 32: a session whose first prompt is sent before the folder's extension registry
indexed the skills (an ACP session's first prompt racing the registry's start, `chat -p`
sending its first request on the prepared router) gets the skill list in its system
prompt from the first request after the index is ready, and keeps that prompt from then
on. A real workspace (core.Workspace.prepare, then start), a real chat session, the fake
Messages API on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.core import Workspace
from synapse_lsp.events import TurnFinished
from tests.test_claude_sources import write_skill

LISTING = "# Installed skills"


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in body["system"])


async def test_the_skill_list_comes_at_the_first_request_after_the_index(
    tmp_path: Path, api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "user-claude"))
    home, folder = tmp_path / "home", tmp_path / "proj"
    folder.mkdir()
    write_skill(home / "skills", "pdf-tools", "pdf")
    ws = Workspace(folder, Settings(synapse_home=home), watch=False)
    model = ModelClient(api_key="sk-ant-late", base_url=api.base_url, model="fake-model")
    try:
        router = await ws.prepare()  # the registry's built-ins, nothing indexed yet
        session = ChatSession(router, ws.settings_source, model=model, workspace_root=folder)
        api.add({"text": "one"}, {"text": "two"}, {"text": "three"})

        async def turn(text: str) -> None:
            events = [e async for e in session.run_turn(text)]
            assert isinstance(events[-1], TurnFinished), events[-1]

        await turn("first, before the index")
        assert LISTING not in system_text(api.message_requests[0])
        registry = await ws.registry_ready()
        assert registry is not None and "pdf-tools" in registry.skills
        await turn("second, the index ready")
        second = system_text(api.message_requests[1])
        assert LISTING in second and "- pdf-tools: pdf-tools skill" in second
        await turn("third")
        assert api.message_requests[2]["system"] == api.message_requests[1]["system"]
        await session.close()
    finally:
        await model.close()
        await ws.close()
