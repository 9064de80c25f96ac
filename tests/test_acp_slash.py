"""The slash commands over ACP: the registry's commands that mean something to an ACP
client are announced and answered without the model — among them `/checkpoints` and
`/rewind`, whose restore goes through the client's `fs/write_text_file` for a file
it holds (the editor's buffer), and `/context`, `/cost`, `/hooks`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from acp.schema import TextContentBlock

from synapse_lsp.acp.agent import ACP_SLASH
from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.test_acp_client import AcpTestClient, acp_agent, agent_env, texts


def text(value: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=value)


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as fake:
        yield fake


async def test_rewind_checkpoints_and_context_over_acp(tmp_path: Path, api: FakeAnthropic) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("x = 1\n")
    a_py = str(proj / "a.py")
    api.add(
        {"commands": ["edit a.py 'x = 1' 'x = 2'", "echo made > made.txt"]},
        {"text": "Changed it."},
    )
    client = AcpTestClient(buffers={a_py: "x = 1\n"})
    async with acp_agent(client, agent_env(tmp_path / "home", api.base_url)) as (conn, _p, _i):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("change it")])
        buffers = client.buffers
        assert buffers is not None
        assert buffers[a_py] == "x = 2\n" and (proj / "made.txt").exists()
        requests = len(api.message_requests)

        async def answer(line: str) -> str:
            before = len(client.of(sid))
            result = await conn.prompt(session_id=sid, prompt=[text(line)])
            assert result.stop_reason == "end_turn"
            return texts(client.of(sid)[before:])

        listing = await answer("/checkpoints")
        assert "turn 1" in listing and "+made.txt" in listing and "~a.py" in listing
        context = await answer("/context")
        assert "of 200,000" in context and "Last tool outputs" in context
        assert "$" in await answer("/cost")
        hooks = await answer("/hooks")
        assert "hook" in hooks.lower() and "not available" not in hooks
        report = await answer("/rewind 1")
        assert "Rewound the files to before turn 1." in report
        # The buffer the client holds got its old text through fs/write_text_file.
        assert buffers[a_py] == "x = 1\n" and client.writes[-1] == (a_py, "x = 1\n")
        assert not (proj / "made.txt").exists()
        assert len(api.message_requests) == requests  # no model call for any of them
    announced = next(
        u for u in client.of(sid) if u["sessionUpdate"] == "available_commands_update"
    )["availableCommands"]
    assert [c["name"] for c in announced] == [*ACP_SLASH, "init"]  # then the prompt commands
