"""Issue 19 item 8: skills that grow by themselves — after a turn with enough tool calls
a background `skill:reinforce` (its `task:skill:enhance` sub-agent) improves and creates
skills, keeps versions, announces it in one notice, and never holds up the next prompt.
End to end: the real assembly (`core.Workspace` with its extension registry), real bash,
the SDK against the fake Messages API."""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic, normalize_response
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.config import LiveSettings
from synapse_lsp.core import Workspace
from synapse_lsp.events import Event, Notice, ToolCallFinished, TurnFinished
from synapse_lsp.extensions.skills import list_versions

KEY = "sk-ant-skill-enhance-key"
REVIEW = "Improve Synapse's skills from a finished task."  # skill:reinforce's prompt


class EnhanceAPI(FakeAnthropic):
    """The fake API with a second queue for the background sub-agent (its requests
    start with skill:reinforce's prompt), so the two conversations may interleave in
    any order and each still gets its own script."""

    def __init__(self) -> None:
        super().__init__([])
        self.background: deque[dict[str, Any]] = deque()
        self.background_bodies: list[dict[str, Any]] = []

    def _next(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        messages = (body or {}).get("messages", [])
        first = messages[0]["content"] if messages else []
        text = first[0].get("text", "") if isinstance(first, list) and first else str(first)
        if not text.startswith(REVIEW):
            return super()._next(body)
        assert body is not None
        self.background_bodies.append(body)
        if not self.background:
            return normalize_response({"text": "nothing more"})
        return self.background.popleft()

    def add_background(self, *responses: Any) -> None:
        self.background.extend(normalize_response(r) for r in responses)


@pytest.fixture
async def api() -> AsyncIterator[EnhanceAPI]:
    server = EnhanceAPI()
    async with server:
        yield server


class Folder:
    def __init__(self, tmp: Path, api: EnhanceAPI) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.work = tmp / "work"
        self.skills = self.home / "skills"
        self.api = api
        self._open: list[Any] = []
        self.home.mkdir()
        self.work.mkdir()

    async def session(self, settings: dict[str, Any]) -> ChatSession:
        (self.home / "settings.json").write_text(json.dumps(settings))
        live = LiveSettings({"SYNAPSE_HOME": str(self.home)}, folder=self.work)
        assert live.problems == [], live.problems
        ws = Workspace(self.work, live, watch=False)
        self._open.append(ws)
        await ws.registry_ready()  # skill:reinforce registered, the skills indexed
        tools = await ws.session_tools()
        model = ModelClient(api_key=KEY, base_url=self.api.base_url, model="claude-test")
        chat = ChatSession(tools.router, live, model=model, workspace_root=self.work)
        self._open.append(chat)
        return chat

    async def close(self) -> None:
        for thing in reversed(self._open):
            await thing.close()


@pytest.fixture
async def folder(tmp_path: Path, api: EnhanceAPI) -> AsyncIterator[Folder]:
    made = Folder(tmp_path, api)
    try:
        yield made
    finally:
        await made.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


async def until(condition: Any, what: str, seconds: float = 30.0) -> None:
    """Wait (bounded) for something the background task does."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


async def test_a_busy_turn_improves_skills_in_the_background_without_delaying_the_next(
    folder: Folder, api: EnhanceAPI
) -> None:
    existing = folder.skills / "csv-report"
    existing.mkdir(parents=True)
    (existing / "SKILL.md").write_text(skill_md("csv-report", "CSV reports", "Steps."))
    session = await folder.session({"skillEnhance": True, "skillEnhanceMinTools": 2})
    gate = folder.tmp / "gate.fifo"
    os.mkfifo(gate)
    api.add({"commands": ["echo one", "echo two"]}, {"text": "Made the report."})
    new_skill = skill_md("json-tools", "Pretty-print JSON", "Use jq .")
    api.add_background(
        {"commands": [f"cat {gate}"]},  # blocks until the test lets it go on
        {
            "commands": [
                f"edit {existing / 'SKILL.md'} 'Steps.' 'Steps: use csvkit.'",
                f"write {folder.skills / 'json-tools' / 'SKILL.md'} '{new_skill}'",
            ]
        },
        {"text": "Updated csv-report, created json-tools."},
    )

    first = await turn(session, "make the CSV report")
    assert isinstance(first[-1], TurnFinished) and first[-1].stop_reason == "end_turn"
    assert session.enhancing  # started after the turn's last event, not before it
    await until(lambda: len(api.background_bodies) == 1, "the background sub-agent's request")

    # The next prompt runs at once while the background sub-agent waits on the FIFO:
    # it could not finish if it were waiting for that work.
    api.add({"text": "Second answer."})
    second = await turn(session, "and now?")
    assert isinstance(second[-1], TurnFinished) and second[-1].stop_reason == "end_turn"
    assert session.enhancing and len(api.background_bodies) == 1
    assert not any(isinstance(e, Notice) and "background" in e.message for e in second)
    assert not (folder.skills / "json-tools").exists()

    def release() -> None:
        with open(gate, "w") as fifo:  # noqa: PTH123 - a FIFO, opened for its reader
            fifo.write("go\n")

    await asyncio.to_thread(release)
    await until(lambda: not session.enhancing, "the background run to end")

    assert "Steps: use csvkit." in (existing / "SKILL.md").read_text()
    assert (folder.skills / "json-tools" / "SKILL.md").read_text() == new_skill
    versions = list_versions(folder.skills, "csv-report")
    assert [v.reason for v in versions] == ["reinforce"]
    assert (versions[0].path / "SKILL.md").read_text().endswith("Steps.\n")
    # What the background sub-agent was told: the turn's transcript, summarised.
    asked = api.background_bodies[0]
    prompt = asked["messages"][0]["content"][0]["text"]
    assert "The user asked:\nmake the CSV report" in prompt
    assert "1. echo one  -> exit 0\n2. echo two  -> exit 0" in prompt
    assert "Its final answer:\nMade the report." in prompt
    assert "task:skill:enhance" in json.dumps(asked["system"])
    assert len(api.background_bodies) == 3

    api.add({"text": "Third answer."})
    third = await turn(session, "thanks")
    notices = [e for e in third if isinstance(e, Notice)]
    assert third[0] == notices[0]  # the one line comes first in the next turn
    assert notices[0].message == (
        "Skills improved in the background: `csv-report` updated (version 1 kept; undo: "
        "skill:rollback csv-report); `json-tools` created (undo: skill:delete json-tools)."
    )
    assert not session.enhancing  # a turn without tool calls starts none


async def test_the_background_run_may_only_touch_skills(folder: Folder, api: EnhanceAPI) -> None:
    session = await folder.session({"skillEnhance": True, "skillEnhanceMinTools": 1})
    api.add({"commands": ["echo hi"]}, {"text": "ok"})
    outside = folder.work / "notes.md"
    piped = folder.skills / "piped" / "SKILL.md"
    api.add_background(
        {
            "commands": [
                f"write {outside} 'x'",
                f"rm -rf {folder.work}",
                "ls",
                f"echo '# piped' | write {piped}",
            ]
        },
        {"text": "Nothing reusable."},
    )
    await turn(session, "say hi")
    await until(lambda: len(api.background_bodies) == 2, "the background sub-agent's answer")
    await until(lambda: not session.enhancing, "the background run to end")
    results = api.background_bodies[1]["messages"][-1]["content"]
    texts = [r["content"] for r in results if r.get("type") == "tool_result"]
    assert "may only read, list and search" in texts[0] and "may only read" in texts[1]
    assert "Not run" not in texts[2] and "Not run" not in texts[3]  # reading, a skill file
    assert not outside.exists() and folder.work.is_dir()
    assert piped.read_text() == "# piped\n"
    api.add({"text": "ok"})
    later = await turn(session, "again")
    (notice,) = [e for e in later if isinstance(e, Notice)]
    assert notice.message.endswith("`piped` created (undo: skill:delete piped).")


async def test_off_by_default_below_the_threshold_and_switchable_per_session(
    folder: Folder, api: EnhanceAPI
) -> None:
    session = await folder.session({"skillEnhanceMinTools": 2})
    api.add({"commands": ["echo a", "echo b"]}, {"text": "ok"})
    await turn(session, "two commands, setting off")
    assert not session.enhancing

    class Host:
        def chat_session(self) -> ChatSession:
            return session

    answer = await SESSION_COMMANDS.run(Host(), "/skill enhance on")  # type: ignore[arg-type]
    assert answer.startswith("Skill enhancement: on for this session: after a turn with at least 2")
    api.add({"commands": ["echo a"]}, {"text": "ok"})
    events = await turn(session, "one command only")
    assert [type(e) for e in events].count(ToolCallFinished) == 1
    assert not session.enhancing  # below the threshold
    assert await SESSION_COMMANDS.run(Host(), "/skill enhance off") == (  # type: ignore[arg-type]
        "Skill enhancement: off for this session."
    )
    assert await SESSION_COMMANDS.run(Host(), "/skill frobnicate") == (  # type: ignore[arg-type]
        "Usage: /skill enhance [on|off]"
    )
    api.add({"commands": ["echo a", "echo b"]}, {"text": "ok"})
    await turn(session, "two again, switched off")
    assert not session.enhancing and api.background_bodies == []


async def test_closing_the_session_cancels_a_background_run(
    folder: Folder, api: EnhanceAPI
) -> None:
    session = await folder.session({"skillEnhance": True, "skillEnhanceMinTools": 1})
    gate = folder.tmp / "never.fifo"
    os.mkfifo(gate)
    api.add({"commands": ["echo hi"]}, {"text": "ok"})
    api.add_background({"commands": [f"cat {gate}"]})
    await turn(session, "hi")
    await until(lambda: len(api.background_bodies) == 1, "the background request")
    await asyncio.wait_for(session.close(), 20)
    assert not session.enhancing


# ------------------------------------------------------- security review H2


async def test_a_line_that_writes_is_one_write_or_one_read_only_command_piped_in(
    tmp_path: Path,
) -> None:
    """The gate resolves a path against the directory the line starts in, so nothing
    before the write may change it: `cd sub && … | write sk/x` with `proj/sk` a link to
    the skills and `proj/sub/sk` one to the user's home wrote ~/.bashrc."""
    from synapse_lsp.agent.skill_enhance import SkillEnhanceGate
    from synapse_lsp.config import Settings
    from synapse_lsp.router import BashRouter
    from synapse_lsp.shell import ShellSession

    user = tmp_path / "user"
    skills = user / ".synapse" / "skills"
    skills.mkdir(parents=True)
    proj = user / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "sk").symlink_to(skills)
    (proj / "sub" / "sk").symlink_to(user)
    settings = Settings(synapse_home=user / ".synapse", sandbox="full-access")
    shell = ShellSession(proj, settings)
    await shell.start()
    try:
        gate = SkillEnhanceGate(lambda: settings, settings.skills_dir, None)
        router = BashRouter(shell, settings).derive(permission=gate, state={})
        for line in (
            "cd sub && echo evil | write sk/.bashrc",
            "cd sub; echo evil | write sk/.bashrc",
            "(cd sub && echo evil) | write sk/.bashrc",
            "echo $(cd sub) | write sk/.bashrc",
            "echo a && write sk/.bashrc evil",
            "write sk/ok/SKILL.md fine && cd sub",
        ):
            routed = await router.route(line)
            assert routed.exit_code == 126, (line, routed.stdout, routed.stderr)
            assert routed.stderr.startswith("Not run: ")
            assert shell.cwd == proj
        assert not (user / ".bashrc").exists() and not (skills / ".bashrc").exists()
        assert not (skills / "ok").exists()
        # The shapes a skill is written in still run.
        assert (await router.route("echo '# a' | write sk/a/SKILL.md")).exit_code == 0
        assert (await router.route("write sk/b/SKILL.md '# b'")).exit_code == 0
        assert (await router.route("edit sk/b/SKILL.md '# b' '# bee'")).exit_code == 0
        assert (skills / "a" / "SKILL.md").read_text() == "# a\n"
        assert (skills / "b" / "SKILL.md").read_text() == "# bee"
    finally:
        await shell.close()


async def test_the_path_is_checked_again_when_the_file_is_written(
    folder: Folder, api: EnhanceAPI
) -> None:
    """A link changed after the gate said yes (here by a PreToolUse hook, which runs
    after the gate's own check) does not redirect the write: the file gateway resolves
    the path again and opens nothing through a link."""
    outside = folder.tmp / "outside"
    outside.mkdir()
    folder.skills.mkdir(parents=True)
    link = folder.work / "sk"
    link.symlink_to(folder.skills)
    swap = f"ln -sfn {outside} {link}"
    session = await folder.session(
        {
            "skillEnhance": True,
            "skillEnhanceMinTools": 1,
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Write", "hooks": [{"type": "command", "command": swap}]}
                ]
            },
        }
    )
    api.add({"commands": ["echo hi"]}, {"text": "ok"})
    api.add_background({"commands": ["write sk/x/SKILL.md 'evil'"]}, {"text": "done"})
    await turn(session, "say hi")
    await until(lambda: len(api.background_bodies) == 2, "the background sub-agent's answer")
    await until(lambda: not session.enhancing, "the background run to end")
    assert link.resolve() == outside  # the hook did swap it
    assert list(outside.iterdir()) == []
    results = api.background_bodies[1]["messages"][-1]["content"]
    (text,) = [r["content"] for r in results if r.get("type") == "tool_result"]
    assert f"not under {folder.skills.resolve()}/" in text


async def test_the_background_run_has_a_shell_of_its_own(folder: Folder, api: EnhanceAPI) -> None:
    """Its `cd` never moves the session's shell, which the next turn uses."""
    (folder.work / "sub").mkdir()
    session = await folder.session({"skillEnhance": True, "skillEnhanceMinTools": 1})
    api.add({"commands": ["echo hi"]}, {"text": "ok"})
    api.add_background({"commands": ["cd sub"]}, {"text": "nothing"})
    await turn(session, "hi")
    await until(lambda: len(api.background_bodies) == 2, "the background sub-agent's answer")
    await until(lambda: not session.enhancing, "the background run to end")
    api.add({"commands": ["pwd"]}, {"text": "ok"})
    events = await turn(session, "where?")
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert str(folder.work) in finished.text and "sub" not in finished.text
