"""Loop guards end to end: the failure breaker (`maxToolFailures`), the turn limit
(`maxTurns`, `--max-turns`) in the terminal and the editor, and the cap on stored
sessions (`maxSessions`), which never prunes a session live in another process or
one with checkpoints."""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.store import CHECKPOINTS, ChatStore, SessionLockedError
from synapse_lsp.cli.render import Renderer
from synapse_lsp.config import Settings
from synapse_lsp.events import (
    NOTICE_MAX_TURNS,
    NOTICE_TOOL_FAILURES,
    Event,
    Notice,
    ToolCallStarted,
    TurnFinished,
)
from synapse_lsp.router import BashRouter
from tests.fake_api import FakeApiProcess

KEY = "sk-ant-guards-test-key"


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> AsyncIterator[Callable[..., ChatSession]]:
    models: list[ModelClient] = []

    def factory(*, store: ChatStore | None = None, **changes: Any) -> ChatSession:
        model = ModelClient(
            api_key=KEY, base_url=api.base_url, model="fake-model", retry_base_delay=0.001
        )
        models.append(model)
        return ChatSession(
            router, dataclasses.replace(settings, **changes), model=model, store=store
        )

    yield factory
    for model in models:
        await model.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]


def notices(events: list[Event], code: str) -> list[Notice]:
    return [e for e in events if isinstance(e, Notice) and e.code == code]


# ------------------------------------------------------------------ the breaker


async def test_the_breaker_tells_the_model_and_the_user_and_runs_nothing_more(
    api: FakeAnthropic, make: Callable[..., ChatSession], workdir: Path
) -> None:
    api.add(
        {"commands": ["false", "ls /no/such/dir", "cat missing.txt"]},
        # the 5th failure trips it; the call after it in the same response is not run
        {"commands": ["grep -q x missing.txt", "exit-code-42-not-a-command", "touch ran.txt"]},
        # the wrap-up: its commands are not run either, and the turn ends
        {"text": "I could not do it: the files are missing.", "commands": ["touch ran2.txt"]},
    )
    session = make()
    events = await turn(session, "try things")
    done = events[-1]
    assert isinstance(done, TurnFinished) and done.stop_reason == "end_turn"
    assert api.calls == 3
    second = results(api.message_requests[2])
    assert [r["is_error"] for r in second] == [True, True, True]
    assert "5 tool calls in a row have failed" in second[1]["content"]
    assert "Do not call tools now" in second[1]["content"]
    assert second[2]["content"].startswith("Not run: 5 tool calls in a row failed")
    assert not (workdir / "ran.txt").exists() and not (workdir / "ran2.txt").exists()
    started = [e.command for e in events if isinstance(e, ToolCallStarted)]
    assert "touch ran.txt" not in started and "touch ran2.txt" not in started
    (notice,) = notices(events, NOTICE_TOOL_FAILURES)
    assert notice.level == "warning" and "maxToolFailures" in notice.message
    # the history stays valid: the wrap-up's calls are answered
    last = session.messages[-1]
    assert last["role"] == "user" and "Not run" in last["content"][0]["content"]
    # every face renders it: the terminal shows the notice
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(out, err, one_shot=True)
    for event in events:
        renderer.show(event)
    assert "[warning] 5 tool calls in a row failed" in err.getvalue()
    assert "I could not do it" in out.getvalue()
    # the next turn starts counting afresh
    api.add({"commands": ["false"]}, "ok")
    assert notices(await turn(session, "again"), NOTICE_TOOL_FAILURES) == []


async def test_a_success_resets_the_count_and_zero_turns_it_off(
    api: FakeAnthropic, make: Callable[..., ChatSession]
) -> None:
    api.add({"commands": ["false"] * 4 + ["true"] + ["false"] * 4}, "fine")
    events = await turn(make(), "x")
    assert notices(events, NOTICE_TOOL_FAILURES) == [] and api.calls == 2
    api.add({"commands": ["false"] * 8}, "fine")
    events = await turn(make(max_tool_failures=0), "y")
    assert notices(events, NOTICE_TOOL_FAILURES) == [] and api.calls == 4
    assert all(not r["content"].startswith("Not run") for r in results(api.message_requests[3]))
    api.add({"commands": ["false", "false", "true"]}, "done")
    events = await turn(make(max_tool_failures=2), "z")
    assert len(notices(events, NOTICE_TOOL_FAILURES)) == 1
    assert results(api.message_requests[5])[2]["content"].startswith("Not run")


# ------------------------------------------------------------------ the turn limit


async def test_the_turn_limit_stops_and_says_so(
    api: FakeAnthropic, make: Callable[..., ChatSession]
) -> None:
    api.add(*[{"commands": ["true"]}] * 3)
    events = await turn(make(max_turns=3), "loop")
    done = events[-1]
    assert isinstance(done, TurnFinished) and done.stop_reason == "max_turns"
    (notice,) = notices(events, NOTICE_MAX_TURNS)
    assert "Stopped after 3 model calls" in notice.message and "maxTurns" in notice.message
    assert api.calls == 3


def test_chat_p_honours_max_turns_and_tells_the_user(tmp_path: Path, workdir: Path) -> None:
    script = {"responses": [], "fallback": {"commands": ["true"]}}
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = api.env(SYNAPSE_HOME=str(tmp_path / "home"))
        proc = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "--max-turns", "2", "-p", "go"],
            capture_output=True,
            text=True,
            env=env,
            cwd=workdir,
            timeout=120,
        )
        calls = len(api.message_bodies())
    assert proc.returncode == 3  # the turn limit's own exit status (cli/headless.py)
    assert "Stopped after 2 model calls in one turn" in proc.stderr
    assert "(turn ended: max_turns)" in proc.stderr
    assert calls == 2


async def test_the_editor_honours_max_turns_and_sees_the_breaker(tmp_path: Path) -> None:
    from tests.lsp_client import editor

    proj = tmp_path / "proj"
    proj.mkdir()
    async with FakeAnthropic({"responses": [], "fallback": {"commands": ["false"]}}) as api:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
        options = {"maxTurns": 4, "maxToolFailures": 2}
        async with editor(tmp_path / "home", [proj], env=env, init_options=options) as ed:
            sid = (await ed.command("synapse.session.new", {}))["sessionId"]
            result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            # 2 failures trip the breaker; the wrap-up call's command is not run
            assert result["stopReason"] == "end_turn"
            texts = [u.get("message", "") for u in ed.session_updates(sid)]
            assert any("2 tool calls in a row failed" in t for t in texts)
            assert api.calls == 3
        options = {"maxTurns": 2, "maxToolFailures": 0}
        async with editor(tmp_path / "home2", [proj], env=env, init_options=options) as ed:
            sid = (await ed.command("synapse.session.new", {}))["sessionId"]
            result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            assert result["stopReason"] == "max_turns"
            notes = [u for u in ed.session_updates(sid) if u["sessionUpdate"] == "notice"]
            assert any("Stopped after 2 model calls" in n["message"] for n in notes)


# ------------------------------------------------------------------ stored sessions


def _hold_lock(root: Path, session_id: str) -> subprocess.Popen[str]:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from synapse_lsp.agent.store import ChatStore\n"
        f"ChatStore(Path({str(root)!r})).lock({session_id!r})\n"
        "print('locked', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def _make_sessions(store: ChatStore, ids: list[str]) -> None:
    for n, sid in enumerate(ids):
        store.create(sid, sid, None)
        store.append_message(sid, {"role": "user", "content": "hi"})
        store.close(sid)
        stamp = time.time() - 1000 + n * 10  # oldest first
        path = store.path(sid)
        os.utime(path, (stamp, stamp))


def test_prune_keeps_live_and_checkpointed_sessions(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store = ChatStore(root)
    ids = ["s1-oldest", "s2-live", "s3-checkpoints", "s4", "s5", "s6-newest"]
    _make_sessions(store, ids)
    (root / "s3-checkpoints" / CHECKPOINTS).mkdir()
    (root / "s3-checkpoints" / CHECKPOINTS / "0001").write_text("{}")
    holder = _hold_lock(root, "s2-live")
    try:
        with pytest.raises(SessionLockedError):
            store.lock("s2-live")
        assert store.prune(0) == []  # 0: no cap
        removed = store.prune(2)
        left = sorted(i.id for i in store.list())
        assert sorted(removed) == ["s1-oldest", "s4"]
        assert left == ["s2-live", "s3-checkpoints", "s5", "s6-newest"]
    finally:
        holder.kill()
        holder.wait()
    # once nobody writes it, it may go; checkpoints still protect s3
    assert store.prune(2) == ["s2-live"]
    assert sorted(i.id for i in store.list()) == ["s3-checkpoints", "s5", "s6-newest"]
    # checkpoints older than a week protect nothing (checkpoints are on by default)
    old = time.time() - 8 * 86400
    os.utime(root / "s3-checkpoints" / CHECKPOINTS / "0001", (old, old))
    assert store.prune(2) == ["s3-checkpoints"]


async def test_a_new_session_prunes_over_the_cap_only_when_set(
    api: FakeAnthropic, make: Callable[..., ChatSession], tmp_path: Path
) -> None:
    store = ChatStore(tmp_path / "sessions")
    _make_sessions(store, ["old-1", "old-2", "old-3"])
    api.add("hello", "hello again")
    uncapped = make(store=store)
    await turn(uncapped, "no cap")
    assert len(store.list()) == 4
    await uncapped.close()
    capped = make(store=store, max_sessions=2)
    await turn(capped, "capped")
    kept = {i.id for i in store.list()}
    assert kept == {capped.id, uncapped.id}
    await capped.close()
