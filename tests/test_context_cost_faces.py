"""Context and cost in the editor faces: the LSP prompt result's `sessionUsage` and `cost`,
`synapse.session.context` over pytest-lsp, and ACP's `usage_update` after a turn — real
server processes, the real SDK against the fake Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from acp.schema import TextContentBlock

from synapse_lsp.agent.pricing import price_of, usage_cost
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.events import Usage
from tests.lsp_client import editor
from tests.test_acp_client import AcpTestClient, acp_agent, agent_env

KEY = "sk-ant-fake-context-faces"
MODEL = "claude-sonnet-5-5"  # the default model, in the table
USAGE = {
    "input_tokens": 2100,
    "output_tokens": 150,
    "cache_creation_input_tokens": 800,
    "cache_read_input_tokens": 12000,
}


def expected() -> float:
    price = price_of(MODEL)
    assert price is not None
    return usage_cost(Usage(**USAGE), price)


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as fake:
        yield fake


async def test_lsp_prompt_result_has_cost_and_session_context_counts_parts(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url, "SYNAPSE_MODEL": MODEL}
    api.add({"commands": ["echo context-faces"], "usage": USAGE}, {"text": "ok", "usage": USAGE})
    async with editor(tmp_path / "home", [proj], env=env) as ed:
        created = await ed.command("synapse.session.new", {"workspaceUri": proj.as_uri()})
        sid = created["sessionId"]
        result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
        assert result["stopReason"] == "end_turn"
        assert result["usage"]["inputTokens"] == 2 * USAGE["input_tokens"]
        assert result["sessionUsage"] == result["usage"]
        assert result["cost"]["currency"] == "USD" and result["cost"]["unpriced"] == []
        assert result["cost"]["turn"] == pytest.approx(2 * expected())
        assert result["cost"]["session"] == pytest.approx(2 * expected())
        context = await ed.command("synapse.session.context", {"sessionId": sid})
    assert context["model"] == MODEL and context["contextWindow"] == 200_000
    assert context["source"] == "counted" and "note" not in context
    parts = context["parts"]
    assert sum(parts.values()) == context["total"] > 0
    assert parts["system"] > 0 and parts["tools"] > 0 and parts["toolOutputs"] > 0
    assert context["cost"]["session"] == pytest.approx(2 * expected())
    assert context["lastTurnUsage"] == context["sessionUsage"] == result["usage"]
    assert len(api.count_requests) == 4 and api.calls == 2


async def test_acp_sends_usage_update_with_context_and_cost_after_a_turn(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    api.add({"text": "hello", "usage": USAGE})
    client = AcpTestClient()
    env = agent_env(tmp_path / "home", api.base_url, SYNAPSE_MODEL=MODEL)
    async with acp_agent(client, env) as (conn, _proc, _init):
        new = await conn.new_session(cwd=str(proj), mcp_servers=[])
        sid = new.session_id
        answer = await conn.prompt(
            session_id=sid, prompt=[TextContentBlock(type="text", text="hi")]
        )
        assert answer.stop_reason == "end_turn"
        await client.wait_for(
            lambda: any(u["sessionUpdate"] == "usage_update" for u in client.of(sid))
        )
    update = next(u for u in client.of(sid) if u["sessionUpdate"] == "usage_update")
    assert update["size"] == 200_000
    assert update["used"] == sum(USAGE.values())  # the context the last call used
    assert update["cost"]["currency"] == "USD"
    assert update["cost"]["amount"] == pytest.approx(expected())
