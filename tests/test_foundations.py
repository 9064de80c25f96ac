"""Foundations every face builds on: one owner for background work (nothing left
after dispose), the one core assembly, and the slash-command registry."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from synapse_lsp.agent.slash import SESSION_COMMANDS, SlashCommand, SlashRegistry
from synapse_lsp.background import TaskOwner
from synapse_lsp.config import LiveSettings
from synapse_lsp.core import Workspace
from synapse_lsp.errors import SynapseError
from synapse_lsp.question import Question
from tests.lsp_client import alive, descendants

MCP_SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


async def test_task_owner_ends_what_it_owns_and_logs_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = TaskOwner("t")
    forever = owner.spawn(asyncio.sleep(3600), "forever")

    async def boom() -> None:
        raise RuntimeError("broken")

    failing = owner.spawn(boom(), "boom")
    await asyncio.wait([failing])
    await asyncio.sleep(0)
    assert "t:boom" in caplog.text and "broken" in caplog.text
    assert owner.running == [forever]
    await owner.aclose()
    assert forever.cancelled() and owner.running == []
    with pytest.raises(RuntimeError, match="closed"):
        owner.spawn(asyncio.sleep(0), "late")


async def test_nothing_is_left_after_a_workspace_is_disposed(tmp_path: Path) -> None:
    """Shells (with a background job each), a session shell, the registry's task and
    a real MCP server: after `close()`, no task and no process of ours is left."""
    home = tmp_path / "home"
    server = {"command": sys.executable, "args": [str(MCP_SERVER)]}
    (tmp_path / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"demo": server}}))
    before_tasks = asyncio.all_tasks()
    before_children = descendants(os.getpid())
    live = LiveSettings({"SYNAPSE_HOME": str(home), "PATH": os.environ["PATH"]})
    workspace = Workspace(tmp_path, live.for_folder(tmp_path), watch=True, trusted=True)
    router = await workspace.start()
    echoed = await workspace.run("mcp:demo:echo --text hi")
    assert "hi" in echoed.stdout, echoed.text
    assert (await router.route("sleep 300 &")).exit_code == 0
    tools = await workspace.session_tools()
    assert (await tools.router.route("sleep 301 &")).exit_code == 0
    ours = descendants(os.getpid()) - before_children
    assert len(ours) >= 5  # two bash, two sleeps, the MCP server
    await workspace.close()
    await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() - before_tasks if not t.done()]
    assert left == []
    for _ in range(50):
        if not [p for p in ours if alive(p)]:
            break
        await asyncio.sleep(0.1)
    assert [p for p in ours if alive(p)] == []
    with pytest.raises(SynapseError, match="closed"):
        await workspace.start()


async def test_the_same_assembly_serves_every_face(tmp_path: Path) -> None:
    """Built-ins and extension built-ins are there whichever face builds the folder."""
    live = LiveSettings({"SYNAPSE_HOME": str(tmp_path / "home")})
    workspace = Workspace(tmp_path, live, watch=False)
    try:
        router = await workspace.start()
        await workspace.registry_ready()
        for name in ("read", "write", "edit", "plan", "command:search", "skill:search"):
            assert name in router.builtins, name
        # a face that cannot ask: its gate denies what it would ask, saying why
        denied = await router.route(f"rm -f {tmp_path.parent}/elsewhere")
        assert denied.exit_code == 126 and "cannot ask" in denied.stderr
        asked: list[str] = []

        async def ask(question: Question) -> str | None:
            asked.append(question.message)
            return "Deny"

        gated = Workspace(tmp_path, live, ask=ask, extensions=False)
        try:
            live.set_face({"permission": "ask-all-native"})
            result = await gated.run("echo hi")
            assert result.exit_code == 126 and len(asked) == 1
        finally:
            await gated.close()
    finally:
        await workspace.close()


class Host:
    def __init__(self) -> None:
        self.current = "s1"
        self.stored = {"s1": "first", "s2": "second"}
        self.exited = False

    def list_sessions(self) -> list[tuple[str, str, str]]:
        return [(k, "2026-11-23T00:00:00Z", v) for k, v in self.stored.items()]

    async def new_session(self) -> str:
        self.current = "s3"
        return self.current

    async def resume(self, session_id: str) -> str:
        if session_id not in self.stored:
            raise SynapseError(f"no stored session {session_id!r}")
        self.current = session_id
        return self.stored[session_id]

    def request_exit(self) -> None:
        self.exited = True


async def test_slash_commands_one_table_case_insensitive_with_aliases() -> None:
    host = Host()
    assert await SESSION_COMMANDS.run(host, "/RESUME s2") == "Resumed s2: second"
    assert "no stored session 'nope'" in await SESSION_COMMANDS.run(host, "/resume nope")
    assert host.current == "s2"  # an unknown id leaves the current session as it was
    assert await SESSION_COMMANDS.run(host, "/resume") == "Usage: /resume ID (see /sessions)"
    assert "s1" in await SESSION_COMMANDS.run(host, "/Sessions")
    assert await SESSION_COMMANDS.run(host, "/new") == "New session s3."
    for alias in ("/h", "/?", "/HELP"):
        assert "/resume ID" in await SESSION_COMMANDS.run(host, alias)
    assert "Unknown command /nope" in await SESSION_COMMANDS.run(host, "/nope")
    await SESSION_COMMANDS.run(host, "/Q")
    assert host.exited
    names = [row["name"] for row in SESSION_COMMANDS.describe()]
    assert names == [
        *["help", "exit", "sessions", "resume", "clear", "tools", "skills", "model"],
        *["hooks", "skill", "context", "compact", "cost", "checkpoints", "rewind"],
    ]
    with pytest.raises(ValueError, match="twice"):
        SlashRegistry([*SESSION_COMMANDS.commands(), SlashCommand("quit", "/quit", "x", _noop)])


async def _noop(host: object, arg: str) -> str:
    return ""
