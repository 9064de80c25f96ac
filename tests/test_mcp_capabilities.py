"""The whole MCP client against a real stdio server (tests/mcp_servers/capabilities_server.py):
sampling and elicitation routed to the calling chat (`McpHost`), roots, progress shown
live, images attached for the model and audio saved, tool annotations feeding the
permission gate, list_changed refreshes, resources and prompts as commands and prompts
for the faces (`PromptLookup`), and the `--help` example of an array of objects.
Through the real router and a real bash session, in the default sandbox.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from synapse_lsp.agent.history import tool_result
from synapse_lsp.commands import Layer, PromptError, PromptLookup, Step
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.policy.gate import AskingGate
from synapse_lsp.question import (
    ElicitAnswer,
    Elicitation,
    Question,
    SamplingReply,
    SamplingRequest,
)
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession
from tests.mcp_router import extension_router

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).parent / "mcp_servers" / "capabilities_server.py"


class Host:
    """A chat session as an MCP server sees it: records what it was asked, answers as told."""

    def __init__(self) -> None:
        self.samples: list[SamplingRequest] = []
        self.forms: list[Elicitation] = []
        self.reply: SamplingReply | str = SamplingReply("42", "fake-model")
        self.answer = ElicitAnswer("accept", {"name": "Ann", "color": "green"})

    async def sample(self, request: SamplingRequest) -> SamplingReply | str:
        self.samples.append(request)
        return self.reply

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        self.forms.append(request)
        return self.answer


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("caps")
    home, work = root / "home", root / "work"
    (home / "mcp").mkdir(parents=True)
    work.mkdir()
    entry = {"command": sys.executable, "args": [str(SERVER)]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"caps": entry}}))
    return {"home": home, "work": work}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def registry(env: dict[str, Path]) -> AsyncIterator[ExtensionRegistry]:
    reg = ExtensionRegistry(Settings(synapse_home=env["home"], command_timeout=30.0), env["work"])
    await reg.start()
    await reg.wait_for_mcp(60)
    assert reg.mcp.servers["caps"].state == "ready", reg.mcp.servers["caps"].error
    try:
        yield reg
    finally:
        await reg.close()


@pytest.fixture(scope="module")
def host() -> Host:
    return Host()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def router(
    env: dict[str, Path], registry: ExtensionRegistry, host: Host
) -> AsyncIterator[BashRouter]:
    async with extension_router(registry, env["work"], host) as r:
        yield r


# ---------------------------------------------------------------- sampling, elicitation


async def test_sampling_goes_to_the_calling_chat_and_its_answer_back(
    router: BashRouter, host: Host
) -> None:
    host.reply = SamplingReply("42", "fake-model")
    result = await router.route("mcp:caps:ask_model 'what is 6*7?'")
    assert result.exit_code == 0, result.text
    assert "model fake-model said: 42" in result.stdout
    asked = host.samples[-1]
    assert (asked.server, asked.messages[-1].text) == ("caps", "what is 6*7?")
    assert asked.system == "Answer in one short line." and asked.max_tokens == 200


async def test_refused_sampling_fails_the_tool_with_the_reason(
    router: BashRouter, host: Host
) -> None:
    host.reply = "denied by the user"
    try:
        result = await router.route("mcp:caps:ask_model 'anything'")
    finally:
        host.reply = SamplingReply("42", "fake-model")
    assert result.exit_code != 0
    assert "denied by the user" in result.text


async def test_with_no_chat_to_ask_sampling_and_elicitation_are_declined(
    env: dict[str, Path], registry: ExtensionRegistry
) -> None:
    shell = ShellSession(env["work"], registry.settings)
    await shell.start()
    try:
        bare = BashRouter(shell, registry.settings, extensions=registry)  # no mcp_host
        sampled = await bare.route("mcp:caps:ask_model 'anything'")
        assert sampled.exit_code != 0 and "nobody to approve" in sampled.text
        form = await bare.route("mcp:caps:ask_user 'who?'")
        assert form.exit_code == 0 and form.stdout.strip() == "decline"
    finally:
        await shell.close()


async def test_elicitation_form_reaches_the_chat_as_fields_and_the_answer_goes_back(
    router: BashRouter, host: Host
) -> None:
    host.answer = ElicitAnswer("accept", {"name": "Ann", "color": "green", "subscribe": True})
    result = await router.route("mcp:caps:ask_user 'Who are you?'")
    assert result.exit_code == 0, result.text
    assert json.loads(result.stdout.split("accepted: ", 1)[1]) == {
        "age": None,
        "color": "green",
        "name": "Ann",
        "subscribe": True,
    }
    form = host.forms[-1]
    assert form.message == "Who are you?"
    fields = {f.name: f for f in form.fields}
    assert (fields["name"].kind, fields["name"].required, fields["name"].title) == (
        "string",
        True,
        "Your name",
    )
    assert fields["color"].choices == ("red", "green") and fields["color"].required
    assert fields["subscribe"].kind == "boolean" and fields["subscribe"].default is False


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (ElicitAnswer("decline"), "decline"),
        (ElicitAnswer("cancel"), "cancel"),
        # An answer that does not fit the form is never sent as accepted.
        (ElicitAnswer("accept", {"name": "Ann", "color": "blue"}), "cancel"),
        (ElicitAnswer("accept", {"color": "red"}), "cancel"),
    ],
)
async def test_declined_cancelled_or_malformed_answers(
    router: BashRouter, host: Host, answer: ElicitAnswer, said: str
) -> None:
    host.answer = answer
    result = await router.route("mcp:caps:ask_user 'Who?'")
    assert result.stdout.splitlines()[0] == said, result.text
    malformed = answer.action == "accept"  # never sent: the user and the model are told
    assert ("the answer was not sent" in result.stdout) == malformed, result.stdout


async def test_a_declined_forms_reason_is_told(router: BashRouter, host: Host) -> None:
    host.answer = ElicitAnswer("decline", reason="Your name must be typed")
    result = await router.route("mcp:caps:ask_user 'Who?'")
    assert result.stdout == (
        "decline\n[caps asked for input ('Who?'): decline: Your name must be typed]\n"
    )


async def test_a_question_with_no_fields_is_a_plain_confirmation(
    router: BashRouter, host: Host
) -> None:
    host.answer = ElicitAnswer("accept", {})
    result = await router.route("mcp:caps:confirm 'Deploy now?'")
    assert result.stdout.strip() == "accept"
    assert host.forms[-1].fields == () and host.forms[-1].message == "Deploy now?"


# ---------------------------------------------------------------- roots, progress, media


async def test_roots_are_the_workspace_folder(router: BashRouter, env: dict[str, Path]) -> None:
    result = await router.route("mcp:caps:list_roots")
    assert result.stdout.strip() == env["work"].resolve().as_uri()


async def test_progress_is_shown_live_and_not_given_to_the_model(router: BashRouter) -> None:
    live: list[tuple[str, float]] = []
    start = time.monotonic()
    result = await router.route(
        "mcp:caps:slow --steps 3 --delay 0.3",
        on_output=lambda _stream, text: live.append((text, time.monotonic() - start)),
    )
    assert result.stdout == "done after 3 steps\n"
    lines = [text for text, _ in live if text.startswith("[progress")]
    assert lines == [f"[progress {i}/3] step {i} of 3\n" for i in (1, 2, 3)]
    first = next(at for text, at in live if text.startswith("[progress 1/3]"))
    assert first < result.duration - 0.4  # it arrived while the tool still ran
    assert "[progress" not in result.text


async def test_an_image_is_attached_for_the_model(router: BashRouter) -> None:
    result = await router.route("mcp:caps:picture")
    assert result.stdout == "[image: image/png, 70 bytes, attached]\n"
    (image,) = result.attachments
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(b"\x89PNG")
    block = tool_result("t1", result.text, result.is_error, result.attachments)
    assert block["content"] == [{"type": "text", "text": result.text}, image]
    piped = await router.route("mcp:caps:picture | cat")
    assert piped.attachments == [] and "attached" in piped.stdout


async def test_audio_is_saved_to_a_file_and_named(router: BashRouter, env: dict[str, Path]) -> None:
    result = await router.route("mcp:caps:sound")
    assert result.attachments == []
    assert "[audio: audio/wav, 16 bytes, saved to " in result.stdout
    saved = Path(result.stdout.split("saved to ", 1)[1].split(";", 1)[0])
    assert saved.parent == env["home"] / "outputs"
    assert saved.read_bytes().startswith(b"RIFF")


# ---------------------------------------------------------------- annotations -> gate


async def test_tool_annotations_feed_the_permission_gate(
    env: dict[str, Path], registry: ExtensionRegistry
) -> None:
    assert registry.tool_hint("mcp:caps:look") == "read-only"
    assert registry.tool_hint("mcp:caps:wipe") == "destructive"
    assert registry.tool_hint("mcp:caps:echo_missing") is None
    asked: list[Question] = []

    async def ask(question: Question) -> str | None:
        asked.append(question)
        return "Deny"

    def gate(**settings: Any) -> AskingGate:
        chosen = Settings(synapse_home=env["home"], **settings)
        return AskingGate(chosen, env["work"], ask, tool_hints=registry.tool_hint)

    async def check(g: AskingGate, line: str) -> str | None:
        return await g.check(line, Layer.EXTENSION, env["work"], [Step(line, Layer.EXTENSION)])

    default = gate()
    assert await check(default, "mcp:caps:look x") is None
    assert await check(default, "mcp:caps:wipe x") is not None  # asked, and denied
    assert "destructive" in asked[-1].reason and "mcp:caps:wipe" in asked[-1].message
    assert await check(gate(permission="auto"), "mcp:caps:wipe x") is None
    asked.clear()
    read_only = gate(sandbox="read-only")
    assert await check(read_only, "mcp:caps:look x") is None and asked == []
    assert await check(read_only, "mcp:caps:ask_model x") is not None  # no hint: asked
    assert await check(gate(allow=["mcp:caps:wipe *"]), "mcp:caps:wipe x") is None


# ---------------------------------------------------------------- list_changed


async def test_a_tool_added_by_the_server_becomes_a_command(
    router: BashRouter, registry: ExtensionRegistry
) -> None:
    assert registry.get("mcp:caps:extra") is None
    result = await router.route("mcp:caps:grow")
    assert result.stdout.strip() == "added extra"
    for _ in range(200):
        if registry.get("mcp:caps:extra") is not None:
            break
        await asyncio.sleep(0.05)
    ran = await router.route("mcp:caps:extra")
    assert ran.stdout.strip() == "extra ran", ran.text


# ---------------------------------------------------------------- resources and prompts


async def test_resources_are_listed_and_read(router: BashRouter, env: dict[str, Path]) -> None:
    listing = await router.route("mcp:caps:resources")
    assert "memo://notes  notes - The team's notes (text/plain)" in listing.stdout
    assert "memo://notes/{note_id}  note - One note by number (template)" in listing.stdout
    text = await router.route("mcp:caps:resource memo://notes")
    assert text.stdout == "first note\nsecond note\n"
    templated = await router.route("mcp:caps:resource memo://notes/7")
    assert templated.stdout == "note number 7\n"
    logo = await router.route("mcp:caps:resource memo://logo")
    assert "[resource: memo://logo, image/png, 70 bytes, attached, saved to " in logo.stdout
    assert logo.attachments and logo.attachments[0]["type"] == "image"
    missing = await router.route("mcp:caps:resource memo://nothing")
    assert missing.exit_code != 0 and missing.stderr
    wrong = await router.route("mcp:caps:resource")
    assert wrong.exit_code == 2 and "expects one URI" in wrong.stderr


async def test_resources_and_prompts_are_found_by_command_search(router: BashRouter) -> None:
    found = await router.route("command:search resource --type mcp")
    assert "mcp:caps:resource" in found.stdout
    found = await router.route("command:search prompt --type mcp")
    assert "mcp:caps:prompt" in found.stdout


async def test_prompts_as_a_command(router: BashRouter) -> None:
    listing = await router.route("mcp:caps:prompt")
    assert "review code [style]  - Review a piece of code" in listing.stdout
    assert "greet  - Say hello" in listing.stdout
    got = await router.route("mcp:caps:prompt review 'x = 1' style=long")
    assert got.stdout == "Please review this code (long review):\nx = 1\n"
    missing = await router.route("mcp:caps:prompt review")
    assert missing.exit_code == 2 and "missing required argument(s): code" in missing.stderr
    unknown = await router.route("mcp:caps:prompt nope")
    assert unknown.exit_code == 2 and "has no prompt 'nope'" in unknown.stderr


async def test_prompts_for_the_faces_slash_commands(registry: ExtensionRegistry) -> None:
    assert isinstance(registry, PromptLookup)
    infos = {p.name: p for p in registry.prompts()}
    assert infos["mcp:caps:review"].usage == "/mcp:caps:review code [style]"
    assert infos["mcp:caps:review"].description == "Review a piece of code"
    text = await registry.render_prompt("mcp:caps:review", ["def f(): pass"])
    assert text == "Please review this code (short review):\ndef f(): pass"
    text = await registry.render_prompt("/mcp:caps:review", ["--style", "deep", "a", "b"])
    assert text == "Please review this code (deep review):\na b"
    with pytest.raises(PromptError, match="missing required argument"):
        await registry.render_prompt("mcp:caps:review", [])
    with pytest.raises(PromptError, match="no MCP server 'nope'"):
        await registry.render_prompt("mcp:nope:x", [])


# ---------------------------------------------------------------- --help


async def test_help_example_of_an_array_of_objects_runs_as_printed(router: BashRouter) -> None:
    page = (await router.route("mcp:caps:weigh --help")).stdout
    examples = page.split("Examples:\n", 1)[1].strip().splitlines()
    first = examples[0].strip()
    assert first == "mcp:caps:weigh " + shlex.quote(
        json.dumps([{"name": "name-value", "weight": 1}])
    ), page
    for example in examples:
        ran = await router.route(example.strip())
        assert ran.exit_code == 0, (example, ran.text)
        assert ran.stdout.strip() == "1 items weigh 1"


async def test_a_tool_named_like_a_resource_command_keeps_its_name(tmp_path: Path) -> None:
    """docs/extensions.md: a server's tool named `resource` stays that tool; the
    server's other resource command is still offered."""
    from synapse_lsp.extensions.mcp2bash import McpToolCommand
    from synapse_lsp.extensions.mcp_client import McpServer, ResourceSpec, ServerConfig, ToolSpec
    from synapse_lsp.extensions.mcp_commands import McpResourcesCommand

    settings = Settings(synapse_home=tmp_path / "home")
    server = McpServer(ServerConfig("s", tmp_path / "mcp_servers.json", command="x"), settings)
    server.state = "ready"
    server.tools = [ToolSpec("s", "resource", "a tool of that name", {})]
    server.resources = [ResourceSpec("memo://a", "a")]
    reg = ExtensionRegistry(
        settings, tmp_path, watch=False, install_wrappers=False, serve_socket=False
    )
    reg.mcp.servers["s"] = server
    reg._rebuild_mcp()
    assert isinstance(reg.get("mcp:s:resource"), McpToolCommand)
    assert isinstance(reg.get("mcp:s:resources"), McpResourcesCommand)
