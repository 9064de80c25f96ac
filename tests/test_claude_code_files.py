"""Issue 32 item 2: Claude Code's custom slash commands (`.claude/commands`) and sub-agent
definitions (`.claude/agents`), the user's (`$CLAUDE_CONFIG_DIR`, here a temporary
folder) and the folder's — the folder's only when it is trusted. Real sessions against
the fake Messages API on loopback, real bash, the user's defaults (sandbox on, the
folder untrusted unless a test trusts it through its gate's hooks, as core.Workspace
wires them)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.config import Settings
from synapse_lsp.events import Event, TurnFinished
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.policy.hooks import Hooks
from synapse_lsp.router import BashRouter
from tests.slash_host import SessionHost

KEY = "sk-ant-claude-files-key"
Make = Callable[..., ChatSession]

REVIEW = """\
---
description: Review one file for one concern
argument-hint: FILE CONCERN
allowed-tools: Bash(git diff:*), Bash(git log:*)
---
Review $1 with an eye on $2.
Everything you were given: $ARGUMENTS
"""

REVIEWER = """\
---
name: reviewer
description: Reviews code and reports, changing nothing
tools: Read, Grep, Glob
model: haiku
---
You are REVIEWER-7Q: read the code and report problems, most serious first.
"""


@pytest.fixture
def user_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's own Claude Code folder (`~/.claude`), here via $CLAUDE_CONFIG_DIR."""
    folder = tmp_path / "user-claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder))
    return folder


def put(folder: Path, rel: str, text: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings, workdir: Path
) -> AsyncIterator[Make]:
    models: list[ModelClient] = []

    def factory(*, trusted: bool = False) -> ChatSession:
        model = ModelClient(
            api_key=KEY, base_url=api.base_url, model="fake-model", retry_base_delay=0.001
        )
        models.append(model)
        # The folder's trust as core.Workspace gives it: the agent gate's hooks know it.
        gate = AskingGate(
            settings, workdir, None, hooks=Hooks(lambda: settings, workdir, lambda: trusted)
        )
        return ChatSession(
            router.derive(permission=gate), settings, model=model, workspace_root=workdir
        )

    yield factory
    for model in models:
        await model.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    events = [e async for e in session.run_turn(text)]
    assert isinstance(events[-1], TurnFinished), events[-1]
    return events


def first_user_text(body: dict[str, Any]) -> str:
    """The prompt of the turn this request belongs to (its last user text)."""
    for message in reversed(body["messages"]):
        content = message["content"]
        if message["role"] == "user" and isinstance(content, str):
            return content
        texts: list[str] = [b["text"] for b in content if b.get("type") == "text"]
        if message["role"] == "user" and texts:
            return texts[0]
    raise AssertionError("no user text")


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(b["text"] for b in body["system"])


async def slash(session: ChatSession, line: str) -> str:
    """What the slash command shows, runs of spaces (its columns) as one."""
    return re.sub(r" {2,}", "  ", await SESSION_COMMANDS.run(SessionHost(session), line))


# ------------------------------------------------------------------ commands


async def test_a_command_expands_its_arguments_and_runs_a_turn(
    make: Make, api: FakeAnthropic, user_claude: Path
) -> None:
    put(user_claude, "commands/review.md", REVIEW)
    session = make()
    host = SessionHost(session)
    assert SESSION_COMMANDS.is_prompt(host, "/review a.py speed")
    assert not SESSION_COMMANDS.is_prompt(host, "/cost")
    api.add({"text": "Reviewed."})
    await turn(session, '/review "src/a b.py" speed')
    assert first_user_text(api.message_requests[0]) == (
        'Review src/a b.py with an eye on speed.\nEverything you were given: "src/a b.py" speed'
    )
    listing = await slash(session, "/help")
    assert "/review FILE CONCERN  Review one file for one concern (user)" in listing
    # A body with no placeholder gets the arguments appended, as Claude Code does.
    put(user_claude, "commands/plain.md", "Tidy the imports.\n")
    api.add({"text": "Tidied."})
    await turn(session, "/plain in utils.py")
    assert first_user_text(api.message_requests[1]).endswith(
        "Tidy the imports.\n\nARGUMENTS: in utils.py"
    )


async def test_a_subfolder_is_a_namespace(
    make: Make, api: FakeAnthropic, user_claude: Path
) -> None:
    put(user_claude, "commands/frontend/component.md", "Make a component named $1.\n")
    session = make()
    listing = await slash(session, "/help")
    assert "/frontend:component  Make a component named $1. (user)" in listing
    api.add({"text": "Made."})
    await turn(session, "/frontend:component Button")
    assert first_user_text(api.message_requests[0]) == "Make a component named Button."


async def test_an_untrusted_folders_commands_are_not_offered_the_users_are(
    make: Make, api: FakeAnthropic, user_claude: Path, workdir: Path
) -> None:
    put(user_claude, "commands/mine.md", "---\ndescription: the user's own\n---\nMINE $1\n")
    put(user_claude, "commands/both.md", "USER VERSION\n")
    put(workdir, ".claude/commands/theirs.md", "---\ndescription: the folder's\n---\nTHEIRS\n")
    put(workdir, ".claude/commands/both.md", "FOLDER VERSION\n")
    untrusted = make()
    listing = await slash(untrusted, "/help")
    assert "/mine" in listing and "/theirs" not in listing
    assert f"not loaded (the folder is not trusted): {workdir / '.claude' / 'commands'}" in listing
    api.add({"text": "a"}, {"text": "b"}, {"text": "c"})
    await turn(untrusted, "/theirs now")
    await turn(untrusted, "/both")
    await turn(untrusted, "/mine x")
    sent = [first_user_text(b) for b in api.message_requests]
    assert sent == ["/theirs now", "USER VERSION", "MINE x"]
    assert await slash(untrusted, "/theirs") == "Unknown command /theirs; /help lists them."

    trusted = make(trusted=True)
    listing = await slash(trusted, "/help")
    assert "/theirs  the folder's (project)" in listing and "/mine" in listing
    api.add({"text": "d"}, {"text": "e"})
    await turn(trusted, "/theirs")
    await turn(trusted, "/both")
    # One rule for skills, commands and sub-agents: on a name both define, the user's own wins.
    assert [first_user_text(b) for b in api.message_requests[3:]] == ["THEIRS", "USER VERSION"]
    both = workdir / ".claude" / "commands" / "both.md"
    assert (
        f"problem: {both}: skipped: {user_claude / 'commands' / 'both.md'} has the same name "
        "(the user's own wins)"
    ) in listing


async def test_a_built_in_wins_a_clash_with_one_notice(
    make: Make, api: FakeAnthropic, user_claude: Path
) -> None:
    cost = put(user_claude, "commands/cost.md", "Tell me what it costs.\n")
    alias = put(user_claude, "commands/q.md", "An alias of /exit is taken too.\n")
    session = make()
    listing = await slash(session, "/help")
    assert f"not offered: {cost} (/cost is built in and wins)" in listing
    assert f"not offered: {alias} (/q is built in and wins)" in listing
    first = await slash(session, "/cost")
    assert "$" in first  # the built-in's answer
    assert first.endswith(f"(/cost is built in: the custom command in {cost} is not used)")
    assert "custom command" not in await slash(session, "/cost")  # said once
    assert not SESSION_COMMANDS.is_prompt(SessionHost(session), "/cost")
    api.add({"text": "ok"})
    await turn(session, "/cost please")  # a face that sends it anyway: not expanded
    assert first_user_text(api.message_requests[0]) == "/cost please"


# ---------------------------------------------------------------- sub-agents


async def test_an_agent_file_is_a_task_type_with_its_prompt_tools_and_model(
    make: Make, api: FakeAnthropic, user_claude: Path, workdir: Path
) -> None:
    put(user_claude, "agents/reviewer.md", REVIEWER)
    # A built-in type's name is not taken over: task:explore stays the built-in.
    put(user_claude, "agents/explore.md", "---\nname: explore\ntools: Bash\n---\nNOT-EXPLORE\n")
    session = make()
    api.add(
        {"commands": ["task:reviewer -p 'check a.py' -d 'review a.py'"]},
        {"commands": ["write notes.txt 'found nothing'"]},  # the sub-agent tries a write
        {"commands": ["echo hi > notes.txt"]},
        {"text": "a.py is fine."},
        {"text": "The reviewer says a.py is fine."},
    )
    await turn(session, "review a.py with the reviewer")
    main, sub, *_rest = api.message_requests
    assert "task:reviewer" in system_text(main)
    assert "Reviews code and reports, changing nothing (read-only)" in system_text(main)
    assert "REVIEWER-7Q" not in system_text(main)
    assert "the explore sub-agent" not in system_text(main)
    assert "You are REVIEWER-7Q: read the code" in system_text(sub)
    assert "# You are a sub-agent (task:reviewer)" in system_text(sub)
    assert sub["model"] == "claude-haiku-4-5" and main["model"] == "fake-model"
    refused = [str(b["content"]) for b in api.message_requests[2]["messages"][-1]["content"]]
    assert "task:reviewer is read-only" in refused[0]
    refused = [str(b["content"]) for b in api.message_requests[3]["messages"][-1]["content"]]
    assert "task:reviewer is read-only" in refused[0]
    assert not (workdir / "notes.txt").exists()
    result = api.message_requests[4]["messages"][-1]["content"][0]
    assert "a.py is fine." in str(result["content"])


async def test_an_agent_with_edit_tools_may_edit_but_not_run_commands(
    make: Make, api: FakeAnthropic, user_claude: Path, workdir: Path
) -> None:
    put(
        user_claude,
        "agents/scribe.md",
        "---\nname: scribe\ndescription: writes notes\ntools: Read, Write\nmodel: inherit\n---\n"
        "Write what you are told.\n",
    )
    session = make()
    api.add(
        {"commands": ["task:scribe -p 'note it' -d 'note'"]},
        {"commands": ["write notes.txt 'noted'"]},
        {"commands": ["touch other.txt"]},
        {"text": "Noted."},
        {"text": "Done."},
    )
    await turn(session, "note it")
    assert (workdir / "notes.txt").read_text().strip() == "noted"
    assert not (workdir / "other.txt").exists()
    refused = str(api.message_requests[3]["messages"][-1]["content"][0]["content"])
    assert "task:scribe may only read and edit files" in refused
    assert api.message_requests[1]["model"] == "fake-model"  # inherit: the session's


async def test_an_untrusted_folders_agents_are_not_loaded(
    make: Make, api: FakeAnthropic, user_claude: Path, workdir: Path
) -> None:
    put(workdir, ".claude/agents/helper.md", "---\nname: helper\ndescription: helps\n---\nHELP\n")
    untrusted = make()
    api.add({"commands": ["task:helper -p 'x' -d 'y'"]}, {"text": "no helper"})
    await turn(untrusted, "use the helper")
    main = api.message_requests[0]
    assert "task:helper" not in system_text(main)
    answer = str(api.message_requests[1]["messages"][-1]["content"][0]["content"])
    assert "unknown task type 'helper'" in answer

    trusted = make(trusted=True)
    api.add({"commands": ["task:helper -p 'x' -d 'y'"]}, {"text": "helped"}, {"text": "ok"})
    await turn(trusted, "use the helper")
    assert "task:helper" in system_text(api.message_requests[2])
    assert "HELP" in system_text(api.message_requests[3])


# ---------------------------------------------------------------- every face


async def test_acp_announces_custom_commands_and_sends_them_expanded(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    from acp.schema import TextContentBlock

    from tests.test_acp_client import AcpTestClient, acp_agent, agent_env

    user = tmp_path / "acp-user-claude"
    put(user, "commands/review.md", REVIEW)
    proj = tmp_path / "proj"
    proj.mkdir()
    api.add({"text": "Reviewed."})
    client = AcpTestClient()
    env = agent_env(tmp_path / "home", api.base_url, CLAUDE_CONFIG_DIR=str(user))
    async with acp_agent(client, env) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        line = TextContentBlock(type="text", text="/review a.py speed")
        assert (await conn.prompt(session_id=sid, prompt=[line])).stop_reason == "end_turn"
    assert first_user_text(api.message_requests[0]).startswith("Review a.py with an eye on speed.")
    announced = next(
        u for u in client.of(sid) if u["sessionUpdate"] == "available_commands_update"
    )["availableCommands"]
    review = next(c for c in announced if c["name"] == "review")
    assert review["description"] == "Review one file for one concern"
    assert review["input"] == {"hint": "FILE CONCERN"}


# ----------------------------------------------------------------------- /init


async def test_init_looks_with_a_subagent_and_writes_agents_md(
    make: Make, api: FakeAnthropic, user_claude: Path, workdir: Path
) -> None:
    """`/init` (Synapse's own command, prompts/commands/init.md): the prompt asks for a
    look with `task:explore`, then an AGENTS.md; the user's own init.md would win."""
    (workdir / "Makefile").write_text("test:\n\tpytest -q\n")
    session = make()
    assert "/init [what to focus on]  Write a starting AGENTS.md" in await slash(session, "/help")
    api.add(
        {"commands": ['task:explore --prompt "how is it built and tested?" --description "look"']},
        {"commands": ["cat Makefile"]},
        {"text": "Tests: `make test` (pytest -q)."},
        {"commands": ["write AGENTS.md '# Agents\n\nRun the tests with `make test`.\n'"]},
        {"text": "Wrote AGENTS.md."},
    )
    await turn(session, "/init the tests")
    prompt = first_user_text(api.message_requests[0])
    assert "Write a starting `AGENTS.md`" in prompt and "task:explore" in prompt
    assert prompt.rstrip().endswith("the tests")
    assert "make test" in (workdir / "AGENTS.md").read_text()
    put(user_claude, "commands/init.md", "My own init.\n")
    api.add({"text": "ok"})
    await turn(session, "/init")
    assert first_user_text(api.message_requests[-1]) == "My own init."
