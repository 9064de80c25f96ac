"""Issue 31, "cancel always wins", in every face: `synapse chat -p` (SIGINT, SIGTERM),
the REPL (Ctrl-C), `synapse lsp` (`synapse.session.cancel`, `$/cancelRequest`) and
`synapse acp` (`session/cancel`), each a real process, each cancelled at a stage of
its turn (tests/faults/test_cancel_table.py cancels at every stage in-process).

The process stops at the stage named in its environment (agent/stages.py:
`SYNAPSE_TEST_STAGE`) and writes `<stage>.reached`; the test then cancels the way the
face's user does, and the process goes on from that stage once it has taken the
cancel. The scripted model's command touches `marker`: it must never exist; the
session must be resumable (its next prompt answered, its history valid).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.fake_api import FakeApiProcess
from tests.lsp_client import Editor, editor
from tests.test_repl import home_env
from tests.test_repl_bang import PtyChat

TOUCH = "touch marker"
GUARD = 60.0  # seconds: a hang guard only, never what a test measures
# Every new prompt starts the script over: a cancelled turn leaves nothing of it behind.
SCRIPT = {
    "responses": [{"text": "Touching it now.", "chunk_size": 4, "commands": [TOUCH]}, "done"],
    "restart_on_prompt": True,
}


def stage_env(folder: Path, stage: str) -> dict[str, str]:
    return {"SYNAPSE_TEST_STAGE": stage, "SYNAPSE_TEST_STAGE_DIR": str(folder)}


def wait_until(condition: Callable[[], bool], alive: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert alive(), f"the process ended before {what}"
        assert time.monotonic() < deadline, f"hang guard: {what}"
        time.sleep(0.01)


def valid_history(body: dict[str, Any]) -> None:
    """Every tool_use of a request's history is answered in the next message."""
    messages = body["messages"]
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if uses:
            nxt = messages[i + 1]["content"]
            assert set(uses) <= {b.get("tool_use_id") for b in nxt}, messages


# ------------------------------------------------------------------ chat -p


def chat_p(
    tmp: Path, api: FakeApiProcess, work: Path, *args: str, extra: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {**api.env(), "SYNAPSE_HOME": str(tmp / "home"), **(extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "--yes", *args],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


P_STAGES = [
    ("sdk_import", signal.SIGINT),
    ("sdk_import", signal.SIGTERM),
    ("startup", signal.SIGINT),
    ("prepare", signal.SIGINT),
    ("snapshot", signal.SIGINT),
    ("request", signal.SIGINT),
    ("request", signal.SIGTERM),
    ("streaming", signal.SIGINT),
    ("response", signal.SIGINT),
    ("tool_use", signal.SIGINT),
    ("tool_use", signal.SIGTERM),
]


@pytest.mark.parametrize(("stage", "sig"), P_STAGES, ids=[f"{s}-{g.name}" for s, g in P_STAGES])
def test_chat_p_signal_is_a_cancel(tmp_path: Path, stage: str, sig: signal.Signals) -> None:
    """SIGINT / SIGTERM at `stage` (the SDK import is cli/preload.py's thread): the
    turn ends before its command, the process exits 130 / 143, and the stored session
    goes on with `--resume`."""
    work, stages = tmp_path / "work", tmp_path / "stages"
    work.mkdir()
    with FakeApiProcess(SCRIPT, tmp_path / "api") as api:
        proc = chat_p(tmp_path, api, work, "-p", "go", extra=stage_env(stages, stage))
        reached = stages / f"{stage}.reached"
        wait_until(reached.exists, lambda: proc.poll() is None, f"{stage} was reached")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=GUARD)
        assert proc.returncode == 128 + sig, (proc.returncode, out, err)
        assert not (work / "marker").exists(), err
        assert "Traceback" not in err, err
        listed = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "--list"],
            env={**os.environ, "SYNAPSE_HOME": str(tmp_path / "home")},
            capture_output=True, text=True, timeout=GUARD,
        )  # fmt: skip
        ids = [line.split()[0] for line in listed.stdout.splitlines() if "  " in line]
        again = chat_p(tmp_path, api, work, "-p", "again", *(["--resume", ids[0]] if ids else []))
        out, err = again.communicate(timeout=GUARD)
        assert again.returncode == 0, err
        assert out == "done\n"
        bodies = api.message_bodies()
    valid_history(bodies[-1])


# --------------------------------------------------------------------- REPL


@pytest.mark.parametrize("stage", ["streaming", "tool_use"])
def test_repl_ctrl_c_is_a_cancel(tmp_path: Path, stage: str) -> None:
    work, stages = tmp_path / "work", tmp_path / "stages"
    work.mkdir()
    with FakeApiProcess(SCRIPT, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env(**stage_env(stages, stage)))
        chat = PtyChat(env, work, ["--yes"], no_color=True)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("go\r")
            reached = stages / f"{stage}.reached"
            wait_until(reached.exists, chat.proc.isalive, f"{stage} was reached")
            chat.type("\x03")  # Ctrl-C
            at = chat.wait_for("(turn cancelled)", at)
            assert not (work / "marker").exists()
            at = chat.wait_for("You (2)> ", at)
            chat.type("again\r")
            at = chat.wait_for("done", at)
            chat.wait_for("You (3)> ", at)
            chat.type("/exit\r")
            assert chat.wait_exit() == 0
        finally:
            chat.close()
        valid_history(api.message_bodies()[-1])


# ---------------------------------------------------------------------- LSP


FAKE_KEY = "sk-ant-fake-cancel-faces"


@contextlib.asynccontextmanager
async def lsp_editor(
    tmp: Path, api: FakeAnthropic, stage: str | None = None
) -> AsyncIterator[tuple[Editor, str, Path]]:
    """A server with one folder and one session; (editor, session id, folder)."""
    work = tmp / "work"
    work.mkdir()
    env = {"ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": api.base_url}
    if stage is not None:
        env.update(stage_env(tmp / "stages", stage))
    async with editor(tmp / "home", [work], env=env) as ed:
        created = await ed.command("synapse.session.new", {"workspaceUri": work.as_uri()})
        yield ed, created["sessionId"], work


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while not condition():
        assert loop.time() < deadline, f"hang guard: {what}"
        await asyncio.sleep(0.01)


def prompt_request(ed: Editor, sid: str, msg_id: str, text: str = "go") -> asyncio.Future[Any]:
    protocol = ed.client.protocol
    return asyncio.ensure_future(
        protocol.send_request_async(  # type: ignore[no-untyped-call]  # pygls
            "workspace/executeCommand",
            types.ExecuteCommandParams(
                command="synapse.session.prompt", arguments=[{"sessionId": sid, "text": text}]
            ),
            msg_id=msg_id,
        )
    )


def turn_ends(ed: Editor, sid: str) -> list[str]:
    return [u["stopReason"] for u in ed.session_updates(sid) if u.get("stopReason")]


async def lsp_goes_on(ed: Editor, api: FakeAnthropic, sid: str, work: Path) -> None:
    assert not (work / "marker").exists()
    api._queue.clear()
    api.add("resumed")
    again = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "again"})
    assert again["stopReason"] == "end_turn"
    valid_history(api.message_requests[-1])
    assert await ed.command("synapse.session.cancel", {"sessionId": sid}) == {"cancelled": False}


@pytest.mark.parametrize("how", ["session.cancel", "cancelRequest"])
@pytest.mark.parametrize("stage", ["prepare", "request", "tool_use"])
async def test_lsp_cancel_at_a_stage(tmp_path: Path, stage: str, how: str) -> None:
    async with FakeAnthropic([]) as api, lsp_editor(tmp_path, api, stage) as (ed, sid, work):
        api.add({"commands": [TOUCH]})
        prompt = prompt_request(ed, sid, "prompt-1")
        await until((tmp_path / "stages" / f"{stage}.reached").exists, stage)
        if how == "session.cancel":
            cancelled = await ed.command("synapse.session.cancel", {"sessionId": sid})
            assert cancelled == {"cancelled": True}
            result = await asyncio.wait_for(prompt, GUARD)
            assert result["stopReason"] == "cancelled"
        else:
            ed.client.protocol.notify("$/cancelRequest", types.CancelParams(id="prompt-1"))
            with pytest.raises(JsonRpcException) as refused:
                await asyncio.wait_for(prompt, GUARD)
            assert refused.value.code == -32800
            await until(lambda: turn_ends(ed, sid) == ["cancelled"], "the turn's end")
        await lsp_goes_on(ed, api, sid, work)


@pytest.mark.parametrize("how", ["session.cancel", "cancelRequest"])
async def test_lsp_cancel_while_the_api_hangs(tmp_path: Path, how: str) -> None:
    """Issue 31 item 2: a cancel once the request is out (the API then never answers)
    cancels the turn: `cancelled: true`, the prompt returns, the command never runs."""
    async with FakeAnthropic([]) as api, lsp_editor(tmp_path, api) as (ed, sid, work):
        api.add({"text": "never finished", "commands": [TOUCH], "hang_after": 2})
        prompt = prompt_request(ed, sid, "prompt-1")
        await until(lambda: len(api.message_requests) == 1, "the request")
        if how == "session.cancel":
            cancelled = await ed.command("synapse.session.cancel", {"sessionId": sid})
            assert cancelled == {"cancelled": True}
            result = await asyncio.wait_for(prompt, GUARD)
            assert result["stopReason"] == "cancelled"
        else:
            ed.client.protocol.notify("$/cancelRequest", types.CancelParams(id="prompt-1"))
            with pytest.raises(JsonRpcException):
                await asyncio.wait_for(prompt, GUARD)
            await until(lambda: turn_ends(ed, sid) == ["cancelled"], "the turn's end")
        await lsp_goes_on(ed, api, sid, work)


async def test_lsp_cancel_request_sent_with_the_prompt(tmp_path: Path) -> None:
    """`$/cancelRequest` right behind its prompt (the server may read both at once,
    before the prompt's handler began): the prompt never runs its command."""
    async with FakeAnthropic([]) as api, lsp_editor(tmp_path, api) as (ed, sid, work):
        api.add({"commands": [TOUCH]})
        prompt = prompt_request(ed, sid, "prompt-1")
        await asyncio.sleep(0)  # the request is written, then at once its cancel
        ed.client.protocol.notify("$/cancelRequest", types.CancelParams(id="prompt-1"))
        with pytest.raises(JsonRpcException) as refused:
            await asyncio.wait_for(prompt, GUARD)
        assert refused.value.code == -32800

        async def busy() -> bool:
            listed = await ed.command("synapse.session.list", {})
            return any(s["busy"] for s in listed["sessions"] if s["sessionId"] == sid)

        while await busy():
            await asyncio.sleep(0.05)
        await lsp_goes_on(ed, api, sid, work)


# ---------------------------------------------------------------------- ACP


@contextlib.asynccontextmanager
async def acp_agent_process(
    tmp_path: Path, base_url: str, extra: dict[str, str]
) -> AsyncIterator[tuple[Any, Any]]:
    """`synapse acp` as a real process on the ACP SDK's client side, initialized."""
    from acp import PROTOCOL_VERSION, spawn_agent_process

    from tests.test_acp_client import AcpTestClient, agent_env, caps

    client = AcpTestClient()
    env = agent_env(tmp_path / "home", base_url, **extra)
    if os.environ.get("PYTHONPATH"):  # the interpreter's packages (a non-root run)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    async with spawn_agent_process(
        client,  # type: ignore[arg-type]
        sys.executable, "-m", "synapse_lsp.cli.entry", "acp",
        env=env, transport_kwargs={"stderr": None, "shutdown_timeout": 20.0},
    ) as (conn, proc):  # fmt: skip
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps(client))
        yield conn, proc


@pytest.mark.parametrize(
    "stage", ["request", "tool_use", None], ids=["request", "tool_use", "hang"]
)
async def test_acp_cancel(tmp_path: Path, stage: str | None) -> None:
    from acp.schema import TextContentBlock

    def text(value: str) -> TextContentBlock:
        return TextContentBlock(type="text", text=value)

    work = tmp_path / "work"
    work.mkdir()
    extra = stage_env(tmp_path / "stages", stage) if stage is not None else {}
    async with FakeAnthropic([]) as api:
        if stage is None:
            api.add({"text": "never finished", "commands": [TOUCH], "hang_after": 2})
        else:
            api.add({"commands": [TOUCH]})
        async with acp_agent_process(tmp_path, api.base_url, extra) as (conn, _proc):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text("go")]))
            if stage is None:
                await until(lambda: len(api.message_requests) == 1, "the request")
            else:
                await until((tmp_path / "stages" / f"{stage}.reached").exists, stage)
            await conn.cancel(session_id=sid)
            result = await asyncio.wait_for(turn, GUARD)
            assert result.stop_reason == "cancelled"
            assert not (work / "marker").exists()
            api._queue.clear()
            api.add("resumed")
            again = await conn.prompt(session_id=sid, prompt=[text("again")])
            assert again.stop_reason == "end_turn"
        valid_history(api.message_requests[-1])
    assert not (work / "marker").exists()


async def test_acp_session_new_waits_for_the_sdk_and_end_of_input_still_ends_it(
    tmp_path: Path,
) -> None:
    """`session/new` answers once a prompt can go out at once (acp/warm.py): never while
    the model SDK's import is held at its stage; ending input meanwhile ends the agent
    (the import is a daemon thread) with status 0, without waiting for the import."""

    work = tmp_path / "work"
    work.mkdir()
    reached = tmp_path / "stages" / "sdk_import.reached"
    async with FakeAnthropic([]) as api:
        extra = stage_env(tmp_path / "stages", "sdk_import")
        async with acp_agent_process(tmp_path, api.base_url, extra) as (conn, proc):
            new = asyncio.create_task(conn.new_session(cwd=str(work), mcp_servers=[]))
            await until(reached.exists, "the SDK import's stage")
            done, _ = await asyncio.wait({new}, timeout=1.0)
            assert not done, "session/new answered while the SDK import was held"
            new.cancel()
        assert proc.returncode == 0
        assert api.message_requests == []
