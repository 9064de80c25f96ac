"""The MCP client against @modelcontextprotocol/server-everything (npm), the reference
server that exercises every capability: `./dev everything` installs it and runs this.
The same checks as tests/test_mcp_capabilities.py, on a real third-party server that
speaks the 2025 protocol (server-to-client requests in the middle of a call)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from synapse_lsp.commands import PromptLookup
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.question import ElicitAnswer, Elicitation, SamplingReply, SamplingRequest
from synapse_lsp.router import BashRouter
from tests.mcp_router import extension_router

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Host:
    def __init__(self) -> None:
        self.samples: list[SamplingRequest] = []
        self.forms: list[Elicitation] = []

    async def sample(self, request: SamplingRequest) -> SamplingReply | str:
        self.samples.append(request)
        return SamplingReply("sampled-answer", "fake-model")

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        self.forms.append(request)
        values = {"boolean": True, "integer": 3, "number": 1.5}
        content = {
            f.name: f.choices[0] if f.choices else values.get(f.kind, "x") for f in request.fields
        }
        return ElicitAnswer("accept", content)


@pytest.fixture(scope="module")
def host() -> Host:
    return Host()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def router(tmp_path_factory: pytest.TempPathFactory, host: Host) -> AsyncIterator[BashRouter]:
    root = tmp_path_factory.mktemp("everything")
    home, work = root / "home", root / "work"
    (home / "mcp").mkdir(parents=True)
    work.mkdir()
    entry = {"command": "node", "args": [os.environ["SYNAPSE_EVERYTHING"]]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"ev": entry}}))
    registry = ExtensionRegistry(Settings(synapse_home=home, command_timeout=30.0), work)
    await registry.start()
    await registry.wait_for_mcp(60)
    try:
        async with extension_router(registry, work, host) as r:
            yield r
    finally:
        await registry.close()


async def test_the_server_offers_the_client_side_tools(router: BashRouter) -> None:
    found = await router.route("command:search '' --type mcp")
    for tool in ("get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"):
        assert f"mcp:ev:{tool}" in found.stdout, found.stdout


async def test_roots(router: BashRouter) -> None:
    result = await router.route("mcp:ev:get-roots-list")
    assert router.shell.cwd.resolve().as_uri() in result.stdout


async def test_sampling(router: BashRouter, host: Host) -> None:
    result = await router.route("mcp:ev:trigger-sampling-request 'say hi'")
    assert result.exit_code == 0 and "sampled-answer" in result.stdout
    assert "say hi" in host.samples[-1].messages[-1].text


async def test_elicitation(router: BashRouter, host: Host) -> None:
    result = await router.route("mcp:ev:trigger-elicitation-request")
    assert result.exit_code == 0 and '"action": "accept"' in result.stdout
    assert any(f.required for f in host.forms[-1].fields)


async def test_progress(router: BashRouter) -> None:
    live: list[str] = []
    result = await router.route(
        "mcp:ev:trigger-long-running-operation --duration 1 --steps 2",
        on_output=lambda _s, text: live.append(text),
    )
    assert result.exit_code == 0
    assert [t for t in live if t.startswith("[progress")] == [
        "[progress 1/2]\n",
        "[progress 2/2]\n",
    ]


async def test_image_is_attached(router: BashRouter) -> None:
    result = await router.route("mcp:ev:get-tiny-image")
    assert "attached]" in result.stdout
    assert result.attachments[0]["source"]["media_type"] == "image/png"


async def test_resources_and_prompts(router: BashRouter) -> None:
    listing = await router.route("mcp:ev:resources")
    uri = listing.stdout.split()[0]
    read = await router.route(f"mcp:ev:resource {uri}")
    assert read.exit_code == 0 and read.stdout.strip()
    prompt = await router.route("mcp:ev:prompt args-prompt Paris")
    assert "Paris" in prompt.stdout
    registry = router.extensions
    assert isinstance(registry, PromptLookup)
    assert "mcp:ev:args-prompt" in {p.name for p in registry.prompts()}


async def test_annotations_are_read(router: BashRouter) -> None:
    registry = router.extensions
    assert isinstance(registry, ExtensionRegistry)
    assert registry.tool_hint("mcp:ev:echo") == "read-only"
