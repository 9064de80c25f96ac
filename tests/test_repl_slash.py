"""Issue 19 item 7: the REPL's `/tools`, `/skills`, `/model [name]` and `/resume` with
`--latest` and id-prefix matching — through a real `synapse chat` on a pipe with the
fake Messages API, and the slash table on a host of known sessions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.cli.chat import Runtime
from synapse_lsp.config import LiveSettings
from synapse_lsp.errors import SynapseError
from tests.fake_api import FakeApiProcess
from tests.test_repl import finish, home_env, spawn

SKILL_MD = """\
---
name: greet-skill
description: Greets people
domain: social
tags: [greeting]
---
Say hello.
"""


class Host:
    """Stored sessions with known times; the current one is `current`."""

    def __init__(self) -> None:
        self.current = "2026-11-20T10-00-00-cccc"
        self.rows = [
            ("2026-11-20T09-00-00-aaaa", "2026-11-20T09:00:00Z", "oldest"),
            ("2026-11-20T09-30-00-bbbb", "2026-11-20T09:30:00Z", "middle"),
            ("2026-11-21T08-00-00-dddd", "2026-11-21T08:00:00Z", "newest other"),
            (self.current, "2026-11-22T00:00:00Z", "the current one"),
        ]
        self.resumed: list[str] = []

    def list_sessions(self) -> list[tuple[str, str, str]]:
        return list(self.rows)

    def current_session_id(self) -> str | None:
        return self.current

    async def new_session(self) -> str:
        return "new"

    async def resume(self, session_id: str) -> str:
        titles = {sid: title for sid, _, title in self.rows}
        if session_id not in titles:
            raise SynapseError(f"no session {session_id!r}")
        self.resumed.append(session_id)
        self.current = session_id
        return titles[session_id]

    def request_exit(self) -> None:
        return None


async def test_resume_latest_prefix_and_ambiguous_prefix() -> None:
    host = Host()
    latest = await SESSION_COMMANDS.run(host, "/resume --latest")
    # The most recently updated session other than the current one.
    assert latest == "Resumed 2026-11-21T08-00-00-dddd: newest other"
    unique = await SESSION_COMMANDS.run(host, "/resume 2026-11-20T09-3")
    assert unique == "Resumed 2026-11-20T09-30-00-bbbb: middle"
    ambiguous = await SESSION_COMMANDS.run(host, "/resume 2026-11-20")
    assert ambiguous.startswith("3 sessions start with '2026-11-20'; type more of the id:")
    listed = re.findall(r"^  (\S+)  ", ambiguous, re.M)
    assert listed == [  # newest first
        "2026-11-20T10-00-00-cccc",
        "2026-11-20T09-30-00-bbbb",
        "2026-11-20T09-00-00-aaaa",
    ]
    unknown = await SESSION_COMMANDS.run(host, "/resume 2025")
    assert "no session '2025'" in unknown and "current session goes on" in unknown
    assert "Unknown option --newest" in await SESSION_COMMANDS.run(host, "/resume --newest")
    assert host.resumed == ["2026-11-21T08-00-00-dddd", "2026-11-20T09-30-00-bbbb"]
    host.rows = [r for r in host.rows if r[0] == host.current]
    assert await SESSION_COMMANDS.run(host, "/resume --latest") == (
        "No other stored session to resume."
    )


async def test_model_and_extension_commands_say_when_the_face_lacks_them() -> None:
    class Bare:
        def list_sessions(self) -> list[tuple[str, str, str]]:
            return []

        async def new_session(self) -> str:
            return ""

        async def resume(self, session_id: str) -> str:
            return ""

        def request_exit(self) -> None:
            return None

    for name in ("/tools", "/skills", "/model"):
        assert "not available here" in await SESSION_COMMANDS.run(Bare(), name)


async def test_set_model_keeps_the_rest_of_the_face_layer(tmp_path: Path) -> None:
    env = {"SYNAPSE_HOME": str(tmp_path / "home"), "SYNAPSE_MODEL": "env-model"}
    settings = LiveSettings(env)
    face = {"maxTurns": 7}
    settings.set_face(face)
    store = ChatStore(tmp_path / "sessions")
    runtime = Runtime(settings, tmp_path, store, face=face)
    try:
        assert await SESSION_COMMANDS.run(runtime, "/model") == (
            "Model: env-model (switch with /model NAME, for this session)"
        )
        shown = await SESSION_COMMANDS.run(runtime, "/MODEL other-model")
        assert shown == "Model: other-model from the next request on (this session only)."
        assert settings().model == "other-model" and settings().max_turns == 7
        assert "Usage: /model" in await SESSION_COMMANDS.run(runtime, "/model a b")
    finally:
        store.close()


def test_tools_skills_model_and_resume_latest_in_the_repl(tmp_path: Path, workdir: Path) -> None:
    """A real `synapse chat` on a pipe: /tools and /skills list the home's skill, /model
    switches the model the next request names, /resume --latest continues the session
    a previous `chat -p` stored."""
    home = tmp_path / "home"
    skill = home / "skills" / "greet-skill"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "scripts" / "hello.sh").write_text("# Say hello.\necho hello\n")
    script: list[Any] = [{"text": "first answer"}, {"text": "second answer"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(home, api.env(SYNAPSE_MODEL="env-model"))
        first = finish(spawn(["-p", "first question"], env, workdir))
        assert first.returncode == 0, first.stderr
        listed = finish(spawn(["--list"], env, workdir))
        (stored,) = [line.split()[0] for line in listed.stdout.splitlines()]
        lines = (
            "/model\n/model switched-model\n/tools\n/tools nothing-like-this\n/skills\n"
            "/resume --latest\nhello again\n/q\n"
        )
        repl = finish(spawn([], env, workdir, stdin=lines))
        bodies = api.message_bodies()
    assert repl.returncode == 0, repl.stderr
    out = repl.stdout
    assert "Model: env-model (switch with /model NAME" in out
    assert "Model: switched-model from the next request on" in out
    assert "skill:greet-skill:hello  Say hello." in out
    assert "No extension commands match 'nothing-like-this'." in out
    assert "greet-skill: Greets people  [domain: social; tags: greeting]  (1 command)" in out
    assert f"Resumed {stored}: first question" in out
    assert len(bodies) == 2
    assert bodies[0]["model"] == "env-model" and bodies[1]["model"] == "switched-model"
    sent = bodies[1]["messages"]  # the resumed session's history, then the new prompt
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "first question" in str(sent[0]["content"])
    assert sent[-1]["content"][-1]["text"] == "hello again"


async def test_a_bare_resume_on_a_terminal_offers_the_recent_sessions() -> None:
    class Picking(Host):
        def __init__(self, answer: int | None) -> None:
            super().__init__()
            self.answer = answer
            self.offered: list[str] = []

        def can_pick(self) -> bool:
            return True

        async def pick(self, title: str, options: list[str]) -> int | None:
            self.offered = options
            return self.answer

    host = Picking(1)
    shown = await SESSION_COMMANDS.run(host, "/resume")
    assert [o.split()[0] for o in host.offered] == [  # newest first, not the current one
        "2026-11-21T08-00-00-dddd",
        "2026-11-20T09-30-00-bbbb",
        "2026-11-20T09-00-00-aaaa",
    ]
    assert shown == "Resumed 2026-11-20T09-30-00-bbbb: middle"
    cancelled = Picking(None)
    assert "Not resumed" in await SESSION_COMMANDS.run(cancelled, "/resume")
    assert cancelled.resumed == []


def test_the_resume_picker_in_a_terminal(tmp_path: Path, workdir: Path) -> None:
    from tests.test_repl_bang import PtyChat

    script: list[Any] = [{"text": "first answer"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        first = finish(spawn(["-p", "picked question"], env, workdir))
        assert first.returncode == 0, first.stderr
        (stored,) = [
            line.split()[0] for line in finish(spawn(["--list"], env, workdir)).stdout.splitlines()
        ]
        chat = PtyChat(env, workdir)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("/resume\r")
            at = chat.wait_for("Resume which session?", at)
            at = chat.wait_for(f"[1] {stored}", at)
            chat.type("1\r")
            chat.wait_for(f"Resumed {stored}: picked question", at)
            chat.type("/exit\r")
            assert chat.wait_exit() == 0
        finally:
            chat.close()


def test_the_repl_sends_a_custom_command_expanded(tmp_path: Path, workdir: Path) -> None:
    """`~/.claude/commands/greet.md` typed as `/greet Bob` in the REPL goes to the model
    expanded; a `!cmd` note typed before it follows the expansion, not inside $ARGUMENTS."""
    claude = tmp_path / "claude"
    (claude / "commands").mkdir(parents=True)
    (claude / "commands" / "greet.md").write_text(
        "---\ndescription: Greet someone\n---\nSay hello to $ARGUMENTS, briefly.\n"
    )
    with FakeApiProcess([{"text": "Hello, Bob."}], tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env(CLAUDE_CONFIG_DIR=str(claude)))
        repl = finish(spawn([], env, workdir, stdin="!echo from-bang\n/greet Bob\n/q\n"))
        bodies = api.message_bodies()
    assert repl.returncode == 0, repl.stderr
    assert len(bodies) == 1
    sent = str(bodies[0]["messages"][-1]["content"])
    assert "Say hello to Bob, briefly." in sent
    assert "from-bang" in sent and "Bob, briefly.\\n\\n" in sent
