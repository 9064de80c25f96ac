"""A permission question is data (issue 30, item 2): the gate builds one
`question.Question` (the running tool call's id from the one context variable, the
line, its steps, the reason, the options with ids and kinds) and every face reads its
fields. The LSP server sends it as `synapse/requestPermission`, ACP asks about the tool
call it names and maps the options' kinds, the REPL numbers its buttons; none of them
parses the prose, so a changed wording matches the same tool call."""

from __future__ import annotations

import asyncio
import io
from collections import namedtuple
from pathlib import Path
from typing import Any, cast

from synapse_lsp.acp.agent import SynapseAcpAgent, permission_options
from synapse_lsp.acp.session import AcpFace
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.cli.asking import TerminalQuestions
from synapse_lsp.commands import Layer
from synapse_lsp.config import Settings
from synapse_lsp.events import RUNNING_TOOL_CALL
from synapse_lsp.lsp import questions
from synapse_lsp.lsp.names import REQUEST_PERMISSION
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.question import ALLOW_ONCE, DENY, Option, Question, gate_options
from tests.lsp_client import editor
from tests.test_acp_client import AcpTestClient

ALWAYS_TOUCH = "Always allow `touch` here"


class Recorder:
    """Answers every question with `answer`; keeps the questions as they came."""

    def __init__(self, answer: str | None = DENY) -> None:
        self.answer = answer
        self.questions: list[Question] = []

    async def __call__(self, question: Question) -> str | None:
        self.questions.append(question)
        return self.answer


def _question(call: str | None = "call-b", message: str = "Wholly new wording.") -> Question:
    return Question(
        tool_call_id=call,
        command="touch /tmp/x",
        cwd="/ws",
        steps=("touch /tmp/x",),
        reason="writes outside the workspace: /tmp/x",
        options=gate_options(once_only=False, with_path=False, always=ALWAYS_TOUCH),
        message=message,
    )


# ------------------------------------------------------------------ the gate


async def test_the_gate_asks_about_the_running_tool_call_as_data(tmp_path: Path) -> None:
    settings = Settings(synapse_home=tmp_path / "home", permission="ask-all-native")
    asker = Recorder(ALLOW_ONCE)
    gate = AskingGate(settings, tmp_path, asker)
    token = RUNNING_TOOL_CALL.set("toolu_42")
    try:
        allowed = await gate.check("echo a && touch b", Layer.NATIVE, tmp_path)
    finally:
        RUNNING_TOOL_CALL.reset(token)
    assert allowed is None
    (asked,) = asker.questions
    assert asked.tool_call_id == "toolu_42"
    assert asked.command == "echo a && touch b"
    assert asked.cwd == str(tmp_path)
    assert asked.steps == ("echo a", "touch b")
    assert asked.reason == "native command: echo a && touch b"
    assert [(o.id, o.kind) for o in asked.shown] == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("reject_once", "reject_once"),
    ]
    assert asked.actions == (ALLOW_ONCE, "Allow for this session", DENY)
    assert "echo a && touch b" in asked.message  # the prose, for faces that show text
    # Outside a chat turn's tool call (an editor's synapse.shell.run): about no call.
    await gate.check("touch c", Layer.NATIVE, tmp_path)
    assert asker.questions[-1].tool_call_id is None


def test_the_always_answer_has_a_hidden_deny_twin() -> None:
    question = _question()
    assert [(o.id, o.kind, o.hidden) for o in question.options] == [
        ("allow_once", "allow_once", False),
        ("allow_session", "allow_always", False),
        ("allow_always", "allow_always", False),
        ("reject_once", "reject_once", False),
        ("reject_always", "reject_always", True),
    ]
    assert question.actions == (ALLOW_ONCE, "Allow for this session", ALWAYS_TOUCH, DENY)
    assert question.title_of("reject_always") == "Always deny `touch` here"
    assert question.title_of("nonsense") is None


# ------------------------------------------------------------------- the REPL


class _TypeAhead:
    answer: asyncio.Future[str] | None = None


async def test_the_repl_renders_the_question_from_its_data() -> None:
    out = io.StringIO()
    terminal = TerminalQuestions(out)
    typeahead = _TypeAhead()
    terminal.typeahead = typeahead
    asking = asyncio.create_task(terminal.ask(_question(message="Run it, please?")))
    while typeahead.answer is None:
        await asyncio.sleep(0)
    typeahead.answer.set_result("3")
    assert await asking == ALWAYS_TOUCH
    shown = out.getvalue()
    assert "Run it, please?" in shown
    assert f"[1] Allow once  [2] Allow for this session  [3] {ALWAYS_TOUCH}  [4] Deny" in shown
    assert "Always deny" not in shown  # a hidden option is no button here


# -------------------------------------------------------------------- the LSP


class _Server:
    """The parts of the LSP server the asker uses."""

    def __init__(self, typed: bool, result: Any = None) -> None:
        experimental = {"synapse": {"requestPermission": True}} if typed else None
        self.client_capabilities = cast(Any, type("Caps", (), {"experimental": experimental}))
        self.sent: list[tuple[str, Any]] = []
        self.prose: list[tuple[str, tuple[str, ...]]] = []
        self.result = result
        self.protocol = self

    async def send_request_async(self, method: str, params: Any) -> Any:
        self.sent.append((method, params))
        return self.result

    async def ask_user(self, message: str, actions: tuple[str, ...]) -> str | None:
        self.prose.append((message, actions))
        return actions[0]


async def test_the_lsp_sends_the_question_as_typed_fields() -> None:
    # pygls hands an unknown method's result over as a namedtuple
    server = _Server(typed=True, result=namedtuple("Object", ["optionId"])("allow_always"))
    answer = await questions.asker(server)(_question())
    assert answer == ALWAYS_TOUCH
    ((method, params),) = server.sent
    assert method == REQUEST_PERMISSION
    assert params == {
        "toolCallId": "call-b",
        "command": "touch /tmp/x",
        "cwd": "/ws",
        "steps": ["touch /tmp/x"],
        "reason": "writes outside the workspace: /tmp/x",
        "options": [
            {"optionId": "allow_once", "title": ALLOW_ONCE, "kind": "allow_once"},
            {
                "optionId": "allow_session",
                "title": "Allow for this session",
                "kind": "allow_always",
            },
            {"optionId": "allow_always", "title": ALWAYS_TOUCH, "kind": "allow_always"},
            {"optionId": "reject_once", "title": DENY, "kind": "reject_once"},
        ],
        "message": "Wholly new wording.",
    }
    assert server.prose == []
    # An option that was not offered (or none: dismissed) answers nothing.
    for result in ({"optionId": "reject_always"}, {"optionId": None}, None):
        assert await questions.asker(_Server(typed=True, result=result))(_question()) is None


async def test_a_client_without_the_request_gets_the_prose() -> None:
    server = _Server(typed=False)
    assert await questions.asker(server)(_question()) == ALLOW_ONCE
    assert server.sent == []
    assert server.prose == [("Wholly new wording.", _question().actions)]


async def test_an_editor_matches_the_question_to_the_tool_call_by_id(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    async with FakeAnthropic([]) as api:
        api.add({"commands": ["echo first", "touch made.txt"]}, {"text": "done"})
        env = {"ANTHROPIC_API_KEY": "sk-ant-fake", "ANTHROPIC_BASE_URL": api.base_url}
        options = {"permission": "ask-all-native"}
        async with editor(
            tmp_path / "home", [proj], env=env, init_options=options, request_permission=True
        ) as ed:
            ed.option = "allow_once"
            sid = (await ed.command("synapse.session.new", {"workspaceUri": proj.as_uri()}))[
                "sessionId"
            ]
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            starts = {
                u["rawInput"]["command"]: u["toolCallId"]
                for u in ed.session_updates(sid)
                if u["sessionUpdate"] == "tool_call"
            }
    assert (proj / "made.txt").exists()
    assert ed.asks == []  # no prose question: the typed request only
    asked = {q["command"]: q for q in ed.permission_requests}
    assert set(asked) == {"echo first", "touch made.txt"}
    for command, question in asked.items():
        assert question["toolCallId"] == starts[command]
        assert question["steps"] == [command]
        assert question["reason"] == f"native command: {command}"
        assert [o["kind"] for o in question["options"]][0] == "allow_once"
        assert command in question["message"]


# -------------------------------------------------------------------- ACP


def _face() -> AcpFace:
    """A session's face with only its tool-call bookkeeping (no workspace, no files)."""
    return AcpFace("s1", Path("/ws"), cast(Any, None), cast(Any, None), cast(Any, None))


async def test_acp_asks_about_the_call_the_question_names_once_it_went_out() -> None:
    client = AcpTestClient(answers=["reject_always"])
    agent = SynapseAcpAgent()
    agent.on_connect(cast(Any, client))
    face = _face()
    # The call asked about is not the latest, and the wording names neither command.
    face.open_calls.update({"call-a": "echo a", "call-b": "touch /tmp/x", "call-c": "ls"})
    asking = asyncio.create_task(agent._ask(face, _question("call-b")))
    for _ in range(50):
        await asyncio.sleep(0)
    assert client.asked == []  # its `tool_call` update has not gone out yet
    face.announced("call-b").set()
    assert await asking == "Always deny `touch` here"
    ((tool_call, options),) = client.asked
    assert tool_call["toolCallId"] == "call-b"
    assert tool_call["rawInput"] == {"command": "touch /tmp/x"}
    assert tool_call["content"][0]["content"]["text"] == "Wholly new wording."
    assert [(o["optionId"], o["kind"]) for o in options] == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
        ("reject_always", "reject_always"),
    ]


async def test_acp_asks_about_no_call_with_an_id_of_its_own() -> None:
    client = AcpTestClient(answers=["allow_once"])
    agent = SynapseAcpAgent()
    agent.on_connect(cast(Any, client))
    face = _face()
    face.open_calls["call-a"] = "echo a"
    assert await agent._ask(face, _question(None)) == ALLOW_ONCE
    assert client.asked[0][0]["toolCallId"] == "permission-1"
    assert client.asked[0][0]["rawInput"] == {"command": "touch /tmp/x"}


def test_acp_options_are_the_questions_own() -> None:
    once = Question(
        None, "x", "/", ("x",), "why", (Option("allow_once", ALLOW_ONCE, "allow_once"),), "m"
    )
    assert [(o.option_id, o.name, o.kind) for o in permission_options(once)] == [
        ("allow_once", ALLOW_ONCE, "allow_once")
    ]
