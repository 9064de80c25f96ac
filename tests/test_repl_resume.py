"""`/resume` in `synapse chat` leaves the current session as it was when the stored one
cannot be opened (issue 14, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from synapse_lsp.agent import session as session_module
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.cli.chat import Runtime
from synapse_lsp.config import LiveSettings, Settings
from synapse_lsp.router import BashRouter


async def test_a_resume_that_fails_keeps_the_current_session_open(
    router: BashRouter, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ChatStore(tmp_path / "sessions")
    runtime = Runtime(LiveSettings(), tmp_path, store)
    runtime.router = router
    try:
        current = runtime.new_session_now()
        store.create(current.id, "current", str(tmp_path))
        store.lock(current.id)
        other = "2026-01-01T00-00-00-abcd"
        store.create(other, "other", str(tmp_path))
        store.close(other)

        def unreadable(*args: object, **kwargs: object) -> None:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

        monkeypatch.setattr(session_module.ChatSession, "resume", unreadable)
        shown = await SESSION_COMMANDS.run(runtime, f"/resume {other}")
        assert f"cannot resume {other!r}" in shown and "current session goes on" in shown
        assert runtime.session is current
        assert current.id in store._locks  # still its writer: nothing was closed

        monkeypatch.undo()
        unknown = await SESSION_COMMANDS.run(runtime, "/RESUME no-such-session")
        assert "no session 'no-such-session'" in unknown and runtime.session is current
        same = await SESSION_COMMANDS.run(runtime, f"/resume {current.id}")
        assert "already the current session" in same and current.id in store._locks
    finally:
        if runtime.session is not None:
            await runtime.session.close()
        store.close()
