"""The faces' side of the MCP client (issue 33 item 1): a chat session as an MCP server's
host (agent/session_mcp.py: sampling approved through the permission gate and run on the
session's model, elicitation through the face's elicitor), the faces' elicitors (REPL
terminal form, LSP `window/showMessageRequest`, ACP `elicitation/create` and
`session/request_permission`), and `/mcp:<server>:<prompt>` slash commands expanded by
the one turn driver. The end-to-end part runs `synapse exec` and `synapse chat -p` against
the real stdio fixture server (tests/mcp_servers/capabilities_server.py) and the fake
Messages API.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.acp.elicit import NO_FORMS, form_schema
from synapse_lsp.acp.elicit import elicitor as acp_elicitor
from synapse_lsp.agent import session_mcp
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session_mcp import NOBODY, SessionMcp
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.agent.turns import LiveChat
from synapse_lsp.cli.terminal_forms import ask_form, parse
from synapse_lsp.commands import PromptError, PromptInfo
from synapse_lsp.config import Settings
from synapse_lsp.events import Event, TurnFinished, Usage
from synapse_lsp.lsp.elicit import elicitor as lsp_elicitor
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.question import (
    ALLOW_ONCE,
    DENY,
    ElicitAnswer,
    Elicitation,
    ElicitField,
    Question,
    SamplingMessage,
    SamplingRequest,
)
from tests.fake_api import FakeApiProcess
from tests.test_repl import finish, home_env, spawn

SERVER = Path(__file__).parent / "mcp_servers" / "capabilities_server.py"
FORM = Elicitation(
    "caps",
    "Who are you?",
    (
        ElicitField("name", "string", "Your name", required=True),
        ElicitField("color", "string", "Color", required=True, choices=("red", "green")),
        ElicitField("subscribe", "boolean", "Subscribe", default=False),
        ElicitField("age", "integer", "Age"),
    ),
)
REQUEST = SamplingRequest("caps", (SamplingMessage("user", "what is 6*7?"),), "Be short.", 50)


# ------------------------------------------------------------------- sampling


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    fake = await FakeAnthropic([{"text": "42"}]).start()
    try:
        yield fake
    finally:
        await fake.close()


def host(tmp_path: Path, api: FakeAnthropic, ask: Any, **settings: Any) -> SessionMcp:
    live = Settings(synapse_home=tmp_path / "home", **settings)
    gate = AskingGate(live, tmp_path, ask, cannot_ask="synapse chat -p cannot ask")
    client = ModelClient(api_key="k", base_url=api.base_url, model="fake-model", max_attempts=1)
    spent: list[Any] = []
    made = SessionMcp(gate, lambda: client, lambda: live, spent.append)
    made.spent = spent  # type: ignore[attr-defined]
    return made


async def test_sampling_asks_once_then_runs_on_the_sessions_model(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    asked: list[Question] = []

    async def allow(question: Question) -> str | None:
        asked.append(question)
        return ALLOW_ONCE

    mcp = host(tmp_path, api, allow)
    reply = await mcp.sample(REQUEST)
    assert not isinstance(reply, str), reply
    assert reply.text == "42" and reply.stop_reason == "endTurn"
    assert [q.actions for q in asked] == [(ALLOW_ONCE, DENY)]  # once only, nothing remembered
    assert "caps asks to use the model" in asked[0].message and "6*7" in asked[0].message
    body = api.requests[-1]["body"]
    assert body["system"] == "Be short." and body["max_tokens"] == 50 and "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "what is 6*7?"}]
    assert mcp.spent  # type: ignore[attr-defined]  # the usage is the session's


async def test_sampling_denied_says_why_and_auto_does_not_ask(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    async def deny(question: Question) -> str | None:
        return DENY

    assert await host(tmp_path, api, deny).sample(REQUEST) == "denied by the user"
    refused = await host(tmp_path, api, None).sample(REQUEST)
    assert isinstance(refused, str) and "synapse chat -p cannot ask" in refused
    reply = await host(tmp_path, api, None, permission="auto").sample(REQUEST)
    assert not isinstance(reply, str) and reply.text == "42"
    nobody = SessionMcp(None, lambda: None, Settings)  # type: ignore[arg-type,return-value]
    assert "no permission gate" in str(await nobody.sample(REQUEST))


async def test_elicitation_without_an_elicitor_is_declined_saying_why() -> None:
    mcp = SessionMcp(None, lambda: None, Settings)  # type: ignore[arg-type,return-value]
    assert await mcp.elicit(FORM) == ElicitAnswer("decline", reason=NOBODY)

    async def broken(request: Elicitation) -> ElicitAnswer:
        raise RuntimeError("no editor")

    mcp.elicitor = broken
    answer = await mcp.elicit(FORM)
    assert answer.action == "cancel" and "no editor" in answer.reason


# ------------------------------------------------------------- the faces' forms


def reader(lines: list[str], shown: list[str]) -> Any:
    async def read(prompt: str) -> str:
        shown.append(prompt)
        return lines.pop(0)

    return read


async def test_the_terminal_form_validates_each_field_and_takes_defaults() -> None:
    import io

    out, shown = io.StringIO(), list[str]()
    lines = ["Ann", "blue", "2", "", "x", "41"]
    answer = await ask_form(out, reader(lines, shown), FORM)
    assert answer == ElicitAnswer(
        "accept", {"name": "Ann", "color": "green", "subscribe": False, "age": 41}
    )
    assert shown[1] == "  Color (1=red, 2=green; required)> " and "(one of red, green" in (
        out.getvalue()
    )
    assert "(a whole number)" in out.getvalue() and "caps asks:\nWho are you?" in out.getvalue()
    declined = await ask_form(io.StringIO(), reader([""], []), FORM)  # a required field left empty
    assert declined.action == "decline"
    confirm = Elicitation("caps", "Go?")
    assert (await ask_form(io.StringIO(), reader(["y"], []), confirm)).action == "accept"
    assert (await ask_form(io.StringIO(), reader([""], []), confirm)).action == "decline"
    assert parse(FORM.fields[2], "yes") == (True, None)


class Editor:
    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    async def ask_user(self, message: str, actions: tuple[str, ...]) -> str | None:
        self.asked.append((message, actions))
        return self.answers.pop(0)


async def test_the_editor_asks_with_buttons_and_declines_free_text() -> None:
    editor = Editor(["Accept"])
    assert (await lsp_elicitor(editor)(Elicitation("caps", "Go?"))).action == "accept"
    assert editor.asked == [("caps asks: Go?", ("Accept", "Decline"))]
    choices = Elicitation("caps", "Pick", (FORM.fields[1], FORM.fields[2]))
    editor = Editor(["green", "Skip"])
    answer = await lsp_elicitor(editor)(choices)
    assert answer == ElicitAnswer("accept", {"color": "green"})
    assert [a for _, a in editor.asked] == [("red", "green"), ("Yes", "No", "Skip")]
    typed = await lsp_elicitor(Editor([]))(FORM)
    assert typed.action == "decline" and "Your name, Age must be typed" in typed.reason
    dismissed = await lsp_elicitor(Editor([None]))(Elicitation("caps", "Go?"))
    assert dismissed.action == "cancel"


class AcpClient:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def create_elicitation(self, **kwargs: Any) -> Any:
        self.calls.append(("elicitation/create", kwargs))
        return self.reply

    async def request_permission(self, **kwargs: Any) -> Any:
        self.calls.append(("session/request_permission", kwargs))
        return self.reply


async def test_acp_forms_go_as_elicitation_create_to_a_client_that_takes_them() -> None:
    from acp.schema import (
        AcceptElicitationResponse,
        AllowedOutcome,
        ClientCapabilities,
        RequestPermissionResponse,
    )

    schema = form_schema(FORM)
    assert schema["required"] == ["name", "color"]
    assert schema["properties"]["color"] == {
        "type": "string",
        "title": "Color",
        "enum": ["red", "green"],
    }
    forms = ClientCapabilities.model_validate({"elicitation": {"form": {}}})
    client = AcpClient(
        AcceptElicitationResponse(
            action="accept", content={"name": "A", "color": "red", "age": 3.0}
        )
    )
    answer = await acp_elicitor(client, "s1", forms)(FORM)  # type: ignore[arg-type]
    assert answer == ElicitAnswer("accept", {"name": "A", "color": "red", "age": 3})
    assert client.calls[0][1]["mode"].session_id == "s1"
    no_forms = await acp_elicitor(client, "s1", ClientCapabilities())(FORM)  # type: ignore[arg-type]
    assert no_forms == ElicitAnswer("decline", reason=NO_FORMS)
    ok = RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="accept"))
    client = AcpClient(ok)
    confirm = await acp_elicitor(client, "s1", ClientCapabilities())(Elicitation("caps", "Go?"))  # type: ignore[arg-type]
    assert confirm.action == "accept" and client.calls[0][0] == "session/request_permission"


# ------------------------------------------------------ prompts as slash commands


class Prompts:
    """A `commands.PromptLookup` standing in for the extension registry."""

    def prompts(self) -> list[PromptInfo]:
        return [
            PromptInfo(
                "mcp:caps:review", "Review a piece of code", (("code", True), ("style", False))
            )
        ]

    async def render_prompt(self, name: str, args: list[str]) -> str:
        if name != "mcp:caps:review":
            raise PromptError(f"/{name}: no such prompt")
        return f"Please review: {' '.join(args)}"


class Router:
    extensions = Prompts()


class Chat:
    """Enough of a ChatSession for the turn driver: it records the text of each turn."""

    id = "c1"
    busy = False
    router = Router()

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.mcp = SessionMcp(None, lambda: None, Settings)  # type: ignore[arg-type,return-value]

    async def _turn(self, text: str) -> AsyncIterator[Event]:
        self.sent.append(text)
        yield TurnFinished("end_turn", Usage())

    def run_turn(self, text: str, context: Any) -> AsyncIterator[Event]:
        return self._turn(text)

    def cancel(self) -> None:
        return None

    def skill_enhance_on(self) -> bool:
        return False


async def test_a_prompt_line_is_expanded_before_the_turn_and_an_error_is_no_turn() -> None:
    chat = Chat()
    live = LiveChat(chat, None)  # type: ignore[arg-type]
    shown: list[Event] = []

    async def render(event: Event) -> None:
        shown.append(event)

    finished = await live.run("/mcp:caps:review 'x = 1' long", None, render)
    assert finished.stop_reason == "end_turn" and chat.sent == ["Please review: x = 1 long"]
    failed = await live.run("/mcp:caps:nope", None, render)
    assert failed.stop_reason == "error" and failed.error == "/mcp:caps:nope: no such prompt"
    assert chat.sent == ["Please review: x = 1 long"]  # nothing went to the model
    await live.run("/mcp:caps:review 'unclosed", None, render)
    assert len(chat.sent) == 1


async def test_prompts_are_listed_by_help_and_are_prompt_lines() -> None:
    class Host:
        def chat_session(self) -> Chat:
            return Chat()

    assert SESSION_COMMANDS.is_prompt(Host(), "/mcp:caps:review x")
    text = await SESSION_COMMANDS.run(Host(), "/help")  # type: ignore[arg-type]
    assert "MCP prompts (sent as your message):" in text
    assert "/mcp:caps:review code [style]  Review a piece of code" in text
    assert session_mcp.prompts(object()) == []


# ------------------------------------------------------ end to end: exec and chat -p


def config(home: Path) -> None:
    (home / "mcp").mkdir(parents=True, exist_ok=True)
    entry = {"command": sys.executable, "args": [str(SERVER)]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"caps": entry}}))


def synapse_exec(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "--trust", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=120,
    )  # fmt: skip


def test_exec_samples_only_with_yes_and_declines_forms(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    with FakeApiProcess([{"text": "forty-two"}], tmp_path / "api") as api:
        env = home_env(home, api.env())
        ask = "mcp:caps:ask_model --question 'what is 6*7?'"
        denied = synapse_exec([ask, "mcp:caps:ask_user --message hi"], env, workdir)
        assert denied.returncode != 0
        assert "sampling refused: denied: an MCP server asks to use the model" in denied.stdout
        assert "decline" in denied.stdout, denied.stdout
        allowed = synapse_exec(["--yes", ask, "mcp:caps:ask_user --message hi"], env, workdir)
        bodies = api.message_bodies()
    assert "said: forty-two" in allowed.stdout, allowed.stdout + allowed.stderr
    assert "decline" in allowed.stdout  # --yes answers no form: nobody is there
    assert len(bodies) == 1 and bodies[0]["system"] == "Answer in one short line."


def test_chat_p_denies_sampling_without_yes_and_declines_forms(
    tmp_path: Path, workdir: Path
) -> None:
    home = tmp_path / "home"
    config(home)
    script = [
        {"commands": ["mcp:caps:ask_model --question 'what?'", "mcp:caps:ask_user --message hi"]},
        {"text": "done"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        done = finish(spawn(["--trust", "-p", "go"], home_env(home, api.env()), workdir))
        bodies = api.message_bodies()
    assert done.returncode == 0, done.stderr
    results = json.dumps(bodies[-1]["messages"][-1])
    assert "synapse chat -p cannot ask" in results, results
    assert "decline" in results


def test_chat_p_yes_samples_on_its_model(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    script = [
        {"commands": ["mcp:caps:ask_model --question 'what?'"]},
        {"text": "sampled answer"},
        {"text": "done"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        done = finish(spawn(["--trust", "--yes", "-p", "go"], home_env(home, api.env()), workdir))
        bodies = api.message_bodies()
    assert done.returncode == 0, done.stderr
    assert bodies[1]["system"] == "Answer in one short line."
    assert "said: sampled answer" in json.dumps(bodies[-1]["messages"][-1])


def test_chat_p_sends_an_mcp_prompt_as_the_turn(tmp_path: Path, workdir: Path) -> None:
    home = tmp_path / "home"
    config(home)
    with FakeApiProcess([{"text": "looks fine"}], tmp_path / "api") as api:
        env = home_env(home, api.env())
        done = finish(spawn(["--trust", "-p", "/mcp:caps:review 'x = 1'"], env, workdir))
        bad = finish(spawn(["--trust", "-p", "/mcp:caps:nope"], env, workdir))
        bodies = api.message_bodies()
    assert done.returncode == 0, done.stderr
    assert bodies[0]["messages"][0]["content"][0]["text"] == (
        "Please review this code (short review):\nx = 1"
    )
    assert len(bodies) == 1  # the bad prompt sent nothing
    assert bad.returncode != 0 and "no prompt 'nope'" in bad.stdout + bad.stderr


_ = asyncio  # the async tests run on pytest-asyncio's loop
