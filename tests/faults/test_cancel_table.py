"""Issue 31, "cancel always wins": a cancel at each stage of a turn ends the turn before
any further command starts, and the session goes on (its next turn works, its history
stays valid).

One test per stage, each deterministic: the turn stops at the stage (a stage hook,
agent/stages.py, or the thing itself held: a hook script that sleeps, a permission
question left open, a snapshot held back), the cancel comes while it is there, then the
stage is let go. The scripted model's command touches `marker`: it must never exist.
The face here is the turn driver with a toy `render` (agent/turns.py: what every face
runs); tests/faults/test_cancel_faces.py cancels at a representative subset of these
stages through `chat -p` (SIGINT, SIGTERM), the REPL (Ctrl-C), LSP and ACP.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent import stages
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.turns import LiveChat
from synapse_lsp.checkpoints import Checkpoints
from synapse_lsp.cli import preload
from synapse_lsp.config import LiveSettings
from synapse_lsp.core import Workspace
from synapse_lsp.events import Event, TurnFinished

KEY = "sk-ant-cancel-table-key"
TOUCH = "touch marker"
GUARD = 60.0  # seconds: a hang guard only, never what a test measures


@dataclass
class Rig:
    tmp: Path
    home: Path
    work: Path
    api: FakeAnthropic
    asking: asyncio.Event = field(default_factory=asyncio.Event)
    _open: list[Any] = field(default_factory=list)

    async def live(self, home_settings: dict[str, Any] | None = None, **chat: Any) -> LiveChat[Any]:
        """A chat session assembled as the faces assemble it (workspace, gate, hooks)."""
        (self.home / "settings.json").write_text(json.dumps(home_settings or {}))
        settings = LiveSettings({"SYNAPSE_HOME": str(self.home)}, folder=self.work)
        assert settings.problems == [], settings.problems

        async def ask(*question: Any) -> str:  # a question left open until cancelled
            self.asking.set()
            await asyncio.Event().wait()
            return "Deny"

        ws = Workspace(self.work, settings, extensions=False, ask=ask)
        self._open.append(ws)
        tools = await ws.session_tools()
        model = ModelClient(api_key=KEY, base_url=self.api.base_url, model="claude-test")
        session = ChatSession(tools.router, settings, model=model, workspace_root=self.work, **chat)
        live: LiveChat[Any] = LiveChat(session, None)
        self._open.append(live)
        self._open.append(model)
        return live

    @property
    def marker(self) -> Path:
        return self.work / "marker"

    async def close(self) -> None:
        for thing in reversed(self._open):
            await thing.close()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    async with FakeAnthropic([]) as api:
        state = Rig(tmp_path, home, work, api)
        try:
            yield state
        finally:
            await state.close()


class Pause:
    """A stage hook: the turn stops at `stage` (the `nth` time it is reached with a
    `detail` that `when` accepts) until `release`; `hold=False` only notes the stage."""

    def __init__(
        self,
        stage: str,
        *,
        nth: int = 1,
        when: Callable[[str | None], bool] = lambda detail: True,
        hold: bool = True,
    ) -> None:
        assert stage in stages.STAGES
        self.stage, self.nth, self.when, self.hold = stage, nth, when, hold
        self.count = 0
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.seen: list[str] = []

    def __call__(self, stage: str, detail: str | None) -> Awaitable[None] | None:
        self.seen.append(stage)
        if stage != self.stage or not self.when(detail):
            return None
        self.count += 1
        if self.count != self.nth:
            return None
        self.reached.set()
        return self._held() if self.hold else None

    async def _held(self) -> None:
        await self.release.wait()


@pytest.fixture
def hook() -> Iterator[Callable[[Pause], Pause]]:
    def install(pause: Pause) -> Pause:
        stages.set_hook(pause)
        return pause

    yield install
    stages.set_hook(None)


async def until(condition: Callable[[], bool], turn: asyncio.Task[Any] | None = None) -> None:
    """Wait (polling) for `condition`; the turn must not end first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while not condition():
        assert turn is None or not turn.done(), f"the turn ended first: {turn.result()!r}"
        assert loop.time() < deadline, "hang guard"
        await asyncio.sleep(0.01)


async def cancel_at(
    live: LiveChat[Any],
    there: Callable[[], bool],
    release: Callable[[], None] = lambda: None,
    *,
    text: str = "go",
    prepare: Callable[[], Awaitable[None]] | None = None,
) -> TurnFinished:
    """Run a turn; once `there()` holds, cancel it, then `release` the stage; its end."""
    shown: list[Event] = []

    async def render(event: Event) -> None:
        shown.append(event)

    turn = asyncio.create_task(live.run(text, None, render, prepare=prepare))
    await until(there, turn)
    assert live.cancel() is True
    release()
    finished = await asyncio.wait_for(turn, GUARD)
    assert shown[-1] is finished
    return finished


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


async def goes_on(rig: Rig, live: LiveChat[Any], *first: Any) -> None:
    """The session is resumable: its next turn runs (`first`: what the API answers
    before its answer), with a valid history (every tool_use answered by a
    tool_result in the next message)."""
    assert not rig.marker.exists()  # no command ran after the cancel
    rig.api._queue.clear()  # what the cancelled turn did not ask for
    rig.api.add(*first, {"text": "resumed"})
    again = await asyncio.wait_for(live.run("again", None, _ignore), GUARD)
    assert again.stop_reason == "end_turn", again
    messages = rig.api.message_requests[-1]["messages"]
    for i, message in enumerate(messages):
        uses = [b["id"] for b in blocks(message) if b.get("type") == "tool_use"]
        if uses:
            answered = [b.get("tool_use_id") for b in blocks(messages[i + 1])]
            assert set(uses) <= set(answered), messages
    assert not rig.marker.exists()


async def _ignore(event: Event) -> None:
    return None


def hook_script(rig: Rig, name: str, tail: str = "") -> str:
    """A hook command that notes it started, then sleeps (a cancel kills it); run
    again (hooks are read once per session), it does nothing."""
    started, ended = rig.tmp / f"{name}.started", rig.tmp / f"{name}.ended"
    return f"[ -e {started} ] && exit 0; touch {started}; sleep 60; touch {ended}{tail}"


def hooks_of(event: str, command: str) -> dict[str, Any]:
    return {"hooks": {event: [{"matcher": "", "hooks": [{"type": "command", "command": command}]}]}}


# ------------------------------------------------------------ before the model


async def test_while_the_sdk_is_still_importing(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The REPL and `chat -p` wait for the SDK's background import (cli/preload.py)
    without blocking the loop: a cancel meanwhile ends the turn at once, before it
    starts, and the import ending later starts nothing."""
    live = await rig.live()
    rig.api.add({"commands": [TOUCH]})
    started = threading.Event()
    started.set()
    monkeypatch.setattr(preload, "_started", started)
    monkeypatch.setattr(preload, "_imported", False)
    monkeypatch.setattr(preload, "_after", [])
    finished = await cancel_at(live, lambda: bool(preload._after), prepare=preload.sdk_ready)
    assert finished.stop_reason == "cancelled"
    for woken in preload._after:  # the import ends now
        woken()
    await asyncio.sleep(0)
    monkeypatch.setattr(preload, "_imported", True)
    assert rig.api.message_requests == []
    await goes_on(rig, live)


async def test_while_the_face_prepares(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    live = await rig.live()
    rig.api.add({"commands": [TOUCH]})
    pause = hook(Pause("prepare"))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    assert rig.api.message_requests == [] and live.chat.messages == []
    await goes_on(rig, live)


async def test_during_a_user_prompt_submit_hook(rig: Rig) -> None:
    live = await rig.live(hooks_of("UserPromptSubmit", hook_script(rig, "prompt")))
    rig.api.add({"commands": [TOUCH]})
    started = rig.tmp / "prompt.started"
    finished = await cancel_at(live, started.exists)
    assert finished.stop_reason == "cancelled"
    assert rig.api.message_requests == []
    assert not (rig.tmp / "prompt.ended").exists()  # the hook was killed
    await goes_on(rig, live)


async def test_at_the_prompt_hooks_stage(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    live = await rig.live()
    rig.api.add({"commands": [TOUCH]})
    pause = hook(Pause("prompt_hooks"))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    assert rig.api.message_requests == []
    await goes_on(rig, live)


async def test_during_the_checkpoint_snapshot(
    rig: Rig, hook: Callable[[Pause], Pause], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot before the turn runs in the background while the model answers;
    the command waits for it: a cancel while it is still being taken ends the turn
    there, and the snapshot finishing afterwards runs nothing."""
    live = await rig.live()
    rig.api.add({"commands": [TOUCH]})
    held = asyncio.Event()
    original = Checkpoints._snapshot

    async def slow(self: Checkpoints, message: str) -> Any:
        if message.startswith("before"):
            await held.wait()
        return await original(self, message)

    monkeypatch.setattr(Checkpoints, "_snapshot", slow)
    waiting = hook(Pause("snapshot", hold=False))  # the command waits for the snapshot
    finished = await cancel_at(live, waiting.reached.is_set, held.set)
    assert finished.stop_reason == "cancelled"
    assert len(rig.api.message_requests) == 1
    await goes_on(rig, live)


# ------------------------------------------------------------ the model request


@pytest.mark.parametrize(
    "stage",
    ["request", "streaming", "response"],
    ids=["before-the-first-request", "during-the-first-request", "after-the-first-request"],
)
async def test_around_the_first_request(
    rig: Rig, hook: Callable[[Pause], Pause], stage: str
) -> None:
    live = await rig.live()
    rig.api.add({"text": "I will touch it now.", "chunk_size": 4, "commands": [TOUCH]})
    pause = hook(Pause(stage))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    assert len(rig.api.message_requests) == (0 if stage == "request" else 1)
    await goes_on(rig, live)


async def test_while_the_api_hangs(rig: Rig) -> None:
    """The request is sent and the API never answers: the cancel ends the turn."""
    live = await rig.live()
    rig.api.add({"text": "never complete", "commands": [TOUCH], "hang_after": 2})
    finished = await cancel_at(live, lambda: len(rig.api.message_requests) == 1)
    assert finished.stop_reason == "cancelled"
    await goes_on(rig, live)


# --------------------------------------------------------------- the command


async def test_between_a_tool_use_and_its_command(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    live = await rig.live()
    rig.api.add({"commands": ["echo first", TOUCH]})
    pause = hook(Pause("tool_use", nth=2))  # after `echo first` ran, before `touch`
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    await goes_on(rig, live)


async def test_during_a_permission_question(rig: Rig) -> None:
    live = await rig.live({"permission": "ask-all-native"})
    rig.api.add({"commands": [TOUCH]})
    finished = await cancel_at(live, rig.asking.is_set)
    assert finished.stop_reason == "cancelled"
    await goes_on(rig, live)


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
async def test_during_a_tool_hook(rig: Rig, event: str) -> None:
    """A PreToolUse hook runs before its command, a PostToolUse hook after one: a
    cancel while either runs kills it and runs no (further) command."""
    command = hook_script(rig, "tool")
    if event == "PostToolUse":  # it runs after `echo first`, before `touch`
        command = f'case "$(cat)" in *touch*) exit 0;; esac; {command}'
    live = await rig.live(hooks_of(event, command))
    rig.api.add({"commands": ["echo first", TOUCH]})
    finished = await cancel_at(live, (rig.tmp / "tool.started").exists)
    assert finished.stop_reason == "cancelled"
    assert not (rig.tmp / "tool.ended").exists()
    await goes_on(rig, live)


async def test_during_a_command(rig: Rig) -> None:
    live = await rig.live()
    rig.api.add({"commands": ["touch started; sleep 60; touch marker"]})
    finished = await cancel_at(live, (rig.work / "started").exists)
    assert finished.stop_reason == "cancelled"
    await goes_on(rig, live)


# -------------------------------------------------- sub-agents, compaction


SUBAGENT = "task:general -p 'touch the marker' -d 'sub-agent'"


@pytest.mark.parametrize("stage", ["request", "tool_use"])
async def test_during_a_sub_agent(rig: Rig, hook: Callable[[Pause], Pause], stage: str) -> None:
    """At the sub-agent's first request, or between its tool_use and its command."""
    live = await rig.live()
    rig.api.add({"commands": [SUBAGENT]}, {"commands": [TOUCH]}, "sub-agent done")
    pause = hook(Pause(stage, when=lambda parent: parent is not None))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    await goes_on(rig, live)


async def test_during_compaction(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    """The third turn starts by compacting (the second came close to the window): a
    cancel during the summary request ends the turn, its command never runs."""
    live = await rig.live(context_window=10_000)
    rig.api.add("one", {"text": "two", "usage": {"input_tokens": 9_000}})
    for text in ("first", "second"):
        done = await live.run(text, None, _ignore)
        assert done.stop_reason == "end_turn"
    rig.api.add("the summary", {"commands": [TOUCH]})
    pause = hook(Pause("compaction"))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    assert len(rig.api.message_requests) == 2  # no summary was asked for
    await goes_on(rig, live, "the summary")  # the next turn compacts


# ------------------------------------------------------------ the turn's end


async def test_stop_hooks_do_not_run_after_a_cancel(rig: Rig) -> None:
    log = rig.tmp / "stop.log"
    live = await rig.live(hooks_of("Stop", f"cat >> {log}"))
    rig.api.add({"commands": ["touch started; sleep 60"]})
    finished = await cancel_at(live, (rig.work / "started").exists)
    assert finished.stop_reason == "cancelled"
    assert not log.exists()
    await goes_on(rig, live)
    assert log.exists()  # they do after a turn that ended normally


async def test_during_a_stop_hook_that_would_have_the_agent_go_on(rig: Rig) -> None:
    block = '; echo \'{"decision": "block", "reason": "touch the marker"}\''
    live = await rig.live(hooks_of("Stop", hook_script(rig, "stop", block)))
    rig.api.add("done", {"commands": [TOUCH]})
    finished = await cancel_at(live, (rig.tmp / "stop.started").exists)
    assert finished.stop_reason == "cancelled"
    assert not (rig.tmp / "stop.ended").exists()
    assert len(rig.api.message_requests) == 1  # the agent did not go on
    await goes_on(rig, live)


async def test_at_the_stop_hooks_stage(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    live = await rig.live(hooks_of("Stop", f"touch {rig.tmp / 'stop.ran'}"))
    rig.api.add("done")
    pause = hook(Pause("stop_hooks"))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "cancelled"
    assert not (rig.tmp / "stop.ran").exists()
    await goes_on(rig, live)


async def test_as_the_turn_finishes(rig: Rig, hook: Callable[[Pause], Pause]) -> None:
    """The answer is complete: the turn keeps its ending; nothing else runs."""
    live = await rig.live()
    rig.api.add("the answer")
    pause = hook(Pause("finish"))
    finished = await cancel_at(live, pause.reached.is_set, pause.release.set)
    assert finished.stop_reason == "end_turn"
    await goes_on(rig, live)
