"""`synapse acp` end to end: a real agent process on stdio, the SDK's client side, the real
anthropic SDK against the fake Messages API, real bash.

initialize -> session/new -> a prompt that streams text, runs `ls` and an `edit` whose
diff arrives and whose write lands in the client's buffer (disk untouched);
permissions answered reject (not run) and allow-always (not asked again); cancel
mid-command; an API failure as a JSON-RPC error with the history valid; modes;
load replaying a stored session in a new process; no API key; malformed input; end of
input ending the agent at once while the SDK still loads.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    McpServerStdio,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.test_acp_client import (
    SYNAPSE,
    AcpTestClient,
    acp_agent,
    agent_env,
    finished,
    kinds,
    texts,
)


def text(value: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=value)


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as fake:
        yield fake


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "a.py").write_text("x = 1\n")
    (path / "notes.txt").write_text("hello\n")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "synapse-home"


async def test_initialize_advertises_what_is_supported(home: Path, api: FakeAnthropic) -> None:
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (_conn, _proc, init):
        data = init.model_dump(by_alias=True, exclude_none=True)
    assert data["protocolVersion"] == 1
    assert data["agentInfo"]["name"] == "synapse"
    caps = data["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    assert caps["sessionCapabilities"]["list"] == {}
    assert data.get("authMethods", []) == []  # a key is set: nothing to log in to


async def test_prompt_streams_text_runs_ls_and_edits_the_client_buffer(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"text": "Let me look.", "commands": ["ls"]},
        {"commands": ["edit a.py 'y = 2' 'y = 3'"]},
        {"text": "Done: a.py now sets y to 3."},
    )
    a_py = str(proj / "a.py")
    client = AcpTestClient(buffers={a_py: "y = 2\n"})  # unsaved in the editor
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        new = await conn.new_session(cwd=str(proj), mcp_servers=[])
        sid = new.session_id
        # the mode a user gets (the leg's: workspace-write unless it says otherwise)
        mode = os.environ.get("SYNAPSE_SANDBOX") or "workspace-write"
        assert new.modes is not None and new.modes.current_mode_id == mode
        assert {m.id for m in new.modes.available_modes} == {
            "read-only",
            "workspace-write",
            "full-access",
        }
        result = await conn.prompt(session_id=sid, prompt=[text("Fix y")])
        await client.wait_for(
            lambda: any(u["sessionUpdate"] == "available_commands_update" for u in client.of(sid))
        )
    assert result.stop_reason == "end_turn"
    assert result.usage is not None and result.usage.output_tokens > 0
    updates = client.of(sid)
    assert kinds(updates) == [
        "agent_message_chunk",
        "tool_call",
        "tool_call_update:completed",
        "tool_call",
        "tool_call_update:completed",
        "agent_message_chunk",
    ]
    assert texts(updates) == "Let me look.Done: a.py now sets y to 3."
    starts = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert starts[0]["rawInput"]["command"] == "ls"
    assert starts[0]["kind"] in ("search", "read", "execute")
    assert starts[1]["kind"] == "edit"
    assert starts[1]["locations"] == [{"path": a_py}]
    done = finished(updates)
    ls_text = done[0]["content"][0]["content"]["text"]
    assert "a.py" in ls_text and "notes.txt" in ls_text
    diff = done[1]["content"][0]
    assert diff == {"type": "diff", "path": a_py, "oldText": "y = 2\n", "newText": "y = 3\n"}
    # The edit went through fs/write_text_file into the editor's buffer, not to disk.
    assert client.buffers == {a_py: "y = 3\n"}
    assert client.writes == [(a_py, "y = 3\n")]
    assert (proj / "a.py").read_text() == "x = 1\n"
    commands = next(u for u in updates if u["sessionUpdate"] == "available_commands_update")[
        "availableCommands"
    ]
    assert [c["name"] for c in commands][:2] == ["help", "sessions"]
    assert {"context", "rewind", "checkpoints"} <= {c["name"] for c in commands}


async def test_embedded_resources_and_links_reach_the_model(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"text": "Seen."})
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        result = await conn.prompt(
            session_id=sid,
            prompt=[
                text("Explain"),
                EmbeddedResourceContentBlock(
                    type="resource",
                    resource=TextResourceContents(
                        uri=(proj / "a.py").as_uri(), text="def secret_sauce(): pass\n"
                    ),
                ),
                text("and compare with"),
                ResourceContentBlock(
                    type="resource_link", uri=(proj / "notes.txt").as_uri(), name="notes.txt"
                ),
            ],
        )
    assert result.stop_reason == "end_turn"
    sent = json.dumps(api.message_requests[-1]["messages"][-1])
    assert "secret_sauce" in sent  # the embedded text itself
    assert str(proj / "notes.txt") in sent  # the link, named
    assert "Explain @a.py and compare with @notes.txt" in sent


async def test_permission_reject_is_not_run_and_allow_always_is_not_asked_again(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"commands": ["touch rejected.txt"]},
        {"text": "It was denied."},
        {"commands": ["touch allowed.txt"]},
        {"text": "Made it."},
        {"commands": ["touch again.txt"]},
        {"text": "Made another."},
    )
    client = AcpTestClient(answers=["reject_once", "allow_always"])
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (
            await conn.new_session(
                cwd=str(proj), mcp_servers=[], synapse={"permission": "ask-all-native"}
            )
        ).session_id
        first = await conn.prompt(session_id=sid, prompt=[text("make rejected.txt")])
        assert first.stop_reason == "end_turn"
        assert not (proj / "rejected.txt").exists()
        denied = finished(client.of(sid))[-1]
        assert denied["status"] == "failed" and denied["rawOutput"]["status"] == "denied"

        second = await conn.prompt(session_id=sid, prompt=[text("make allowed.txt")])
        assert second.stop_reason == "end_turn"
        assert (proj / "allowed.txt").exists()
        third = await conn.prompt(session_id=sid, prompt=[text("make again.txt")])
        assert third.stop_reason == "end_turn"
        assert (proj / "again.txt").exists()
    assert len(client.asked) == 2  # the third `touch` was not asked about
    tool_call, options = client.asked[0]
    starts = [u for u in client.of(sid) if u["sessionUpdate"] == "tool_call"]
    assert tool_call["toolCallId"] == starts[0]["toolCallId"]
    assert tool_call["rawInput"] == {"command": "touch rejected.txt"}
    offered = {o["optionId"]: (o["kind"], o["name"]) for o in options}
    assert offered == {
        "allow_once": ("allow_once", "Allow once"),
        "allow_always": ("allow_always", "Always allow `touch` here"),
        "allow_session": ("allow_always", "Allow for this session"),
        "reject_once": ("reject_once", "Deny"),
        "reject_always": ("reject_always", "Always deny `touch` here"),
    }


async def test_cancel_stops_the_running_command_and_the_history_stays_valid(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"commands": ["echo started; sleep 60; touch finished.txt"]},
        {"text": "after the cancel"},
    )
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text("wait")]))
        await client.wait_for(  # the command runs: its output has arrived
            lambda: any(u.get("status") == "in_progress" for u in client.of(sid)) or turn.done()
        )
        with pytest.raises(RequestError) as busy:
            await conn.prompt(session_id=sid, prompt=[text("me too")])
        assert busy.value.code == -32600
        await conn.cancel(session_id=sid)
        result = await turn
        assert result.stop_reason == "cancelled"
        assert not (proj / "finished.txt").exists()
        cancelled = finished(client.of(sid))[-1]
        assert cancelled["status"] == "failed"
        assert cancelled["rawOutput"]["status"] == "cancelled"
        again = await conn.prompt(session_id=sid, prompt=[text("go on")])
        assert again.stop_reason == "end_turn"
    assert texts(client.of(sid)).endswith("after the cancel")
    # Every tool_use of the cancelled turn got its tool_result.
    last = api.message_requests[-1]["messages"]
    uses = [b["id"] for m in last for b in _blocks(m) if b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for m in last for b in _blocks(m) if b.get("type") == "tool_result"]
    assert uses and uses == results


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


async def test_api_failure_is_a_jsonrpc_error_and_the_session_goes_on(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"error": {"status": 400, "type": "invalid_request_error", "message": "scripted failure"}},
        {"text": "fine now"},
    )
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=sid, prompt=[text("first")])
        assert failed.value.code == -32603
        assert "scripted failure" in str(failed.value)
        again = await conn.prompt(session_id=sid, prompt=[text("second")])
        assert again.stop_reason == "end_turn"
    assert texts(client.of(sid)) == "fine now"


async def test_max_turns_maps_to_max_turn_requests(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"commands": ["true"]}, {"commands": ["true"]}, {"text": "never reached"})
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (
            await conn.new_session(cwd=str(proj), mcp_servers=[], synapse={"maxTurns": 1})
        ).session_id
        result = await conn.prompt(session_id=sid, prompt=[text("loop")])
    assert result.stop_reason == "max_turn_requests"


async def test_modes_are_the_sandbox_modes(home: Path, proj: Path, api: FakeAnthropic) -> None:
    api.add({"commands": ["write made.txt hello"]}, {"text": "could not"})
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        result = await conn.prompt(session_id=sid, prompt=[text("write it")])
        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert bad.value.code == -32602
    assert result.stop_reason == "end_turn"
    assert not (proj / "made.txt").exists()
    updates = client.of(sid)
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "read-only"} in updates
    refused = finished(updates)[-1]
    assert refused["status"] == "failed"
    assert "read-only" in refused["content"][-1]["content"]["text"]


async def test_load_replays_a_stored_session_in_a_new_process(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"text": "Listing.", "commands": ["ls"]}, {"text": "Two files."})
    first = AcpTestClient()
    async with acp_agent(first, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("What is here?")])
    live = [u for u in first.of(sid) if u["sessionUpdate"] != "available_commands_update"]

    second = AcpTestClient()
    async with acp_agent(second, agent_env(home, api.base_url)) as (conn, _proc, _init):
        listed = await conn.list_sessions(cwd=str(proj))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "What is here?")]
        loaded = await conn.load_session(cwd=str(proj), session_id=sid, mcp_servers=[])
        assert loaded is not None and loaded.modes is not None
        replayed = list(second.of(sid))
        with pytest.raises(RequestError):
            await conn.load_session(cwd=str(proj), session_id="no-such-session", mcp_servers=[])
    assert kinds(replayed) == ["user_message_chunk", *kinds(live)]
    assert texts(replayed, "user_message_chunk") == "What is here?"
    assert texts(replayed) == texts(live) == "Listing.Two files."
    assert [u["toolCallId"] for u in replayed if u["sessionUpdate"] == "tool_call"] == [
        u["toolCallId"] for u in live if u["sessionUpdate"] == "tool_call"
    ]


async def test_without_an_api_key_prompts_answer_auth_required(home: Path, proj: Path) -> None:
    client = AcpTestClient()
    env = agent_env(home, None, ANTHROPIC_API_KEY="")
    async with acp_agent(client, env) as (conn, _proc, init):
        assert [m.id for m in init.auth_methods or []] == ["anthropic-api-key"]
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=sid, prompt=[text("hello")])
        assert failed.value.code == -32000
        with pytest.raises(RequestError) as still:
            await conn.authenticate(method_id="anthropic-api-key")
        assert still.value.code == -32000
        # A slash command needs no model.
        answer = await conn.prompt(session_id=sid, prompt=[text("/help")])
        assert answer.stop_reason == "end_turn"
    assert "/sessions" in texts(client.of(sid))


async def test_malformed_input_is_answered_and_the_agent_lives_on(home: Path, proj: Path) -> None:
    env = {**os.environ, **agent_env(home, None)}
    proc = await asyncio.create_subprocess_exec(
        SYNAPSE, "acp", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = [
        "this is not json",
        "[1, 2, 3]",
        '{"jsonrpc": "2.0", "id": 7, "method": 42}',
        '{"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}}',
        '{"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": 5}}',
        '{"jsonrpc": "2.0", "id": 10, "method": "session/prompt", '
        '"params": {"sessionId": "nope", "prompt": []}}',
        '{"jsonrpc": "2.0", "id": 11, "method": "session/new", '
        '"params": {"cwd": "relative/dir", "mcpServers": []}}',
        '{"jsonrpc": "2.0", "id": 12, "method": "initialize", "params": {"protocolVersion": 99}}',
    ]
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    await proc.stdin.drain()
    answers: dict[Any, dict[str, Any]] = {}
    nulls: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while len(answers) < 6 or len(nulls) < 2:
            line = await proc.stdout.readline()
            assert line, "the agent ended"
            message = json.loads(line)  # every line on stdout is protocol
            if message.get("id") is None:
                nulls.append(message)
            else:
                answers[message["id"]] = message
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert sorted(m["error"]["code"] for m in nulls) == [-32700, -32600]
    assert answers[7]["error"]["code"] == -32600
    assert answers[8]["error"]["code"] == -32601
    assert answers[9]["error"]["code"] == -32602
    assert answers[10]["error"]["code"] == -32602
    assert answers[11]["error"]["code"] == -32602
    assert answers[12]["result"]["protocolVersion"] == 1  # our latest, per the spec


@pytest.mark.parametrize("how", ["stdin-closed", "sigterm"])
async def test_the_end_disposes_shells(
    home: Path, proj: Path, api: FakeAnthropic, how: str
) -> None:
    api.add({"commands": ["echo shell=$$"]}, {"text": "ok"})
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("pid?")])
        shown = finished(client.of(sid))[0]["content"][0]["content"]["text"]
        shell_pid = int(shown.split("shell=")[1].split()[0])
        assert _alive(shell_pid)
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 128 + signal.SIGTERM
    if how == "stdin-closed":
        assert proc.returncode == 0
    assert not _alive(shell_pid)


# Imported first by the agent's interpreter (PYTHONPATH): the SDK (`acp`) takes 60 s to
# import, as it can take seconds on a loaded machine.
_SLOW_SDK = """\
import sys, time

class _SlowAcp:
    def find_spec(self, name, path=None, target=None):
        if name == "acp":
            time.sleep(60)
        return None

sys.meta_path.insert(0, _SlowAcp())
"""


@pytest.mark.parametrize("input_ends", ["after-initialize", "before-any-message", "dev-null"])
async def test_end_of_input_ends_the_agent_at_once_while_the_sdk_still_loads(
    home: Path, tmp_path: Path, input_ends: str
) -> None:
    """Issue 27 item 10: `synapse acp` used to wait for the SDK's import (5-10 s under
    load) after its input closed, and never saw the end of /dev/null (epoll refuses
    it). With that import made to take 60 s, the agent still answers `initialize` and
    ends as soon as its input does (the 10 s bound only tells an exit from a hang; it
    takes ~0.1 s)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SLOW_SDK, encoding="utf-8")
    env = {**os.environ, **agent_env(home, None), "PYTHONPATH": str(site)}
    stdin = asyncio.subprocess.DEVNULL if input_ends == "dev-null" else asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        SYNAPSE, "acp", stdin=stdin, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    try:
        if proc.stdin is not None and input_ends == "after-initialize":
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip
            proc.stdin.write((json.dumps(request) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert json.loads(line)["result"]["agentInfo"]["name"] == "synapse"
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            code = await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            pytest.fail("synapse acp did not end within 10 s of the end of its input")
        assert code == 0
        assert await proc.stdout.read() == b""  # nothing more after the answer
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # noqa: PTH123
        return fh.read().split(")")[-1].split()[0] != "Z"


async def test_python_dash_m_acp_starts_the_agent(home: Path) -> None:
    env = {**os.environ, **agent_env(home, None)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "synapse_lsp",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    out, _ = await asyncio.wait_for(proc.communicate((json.dumps(request) + "\n").encode()), 60)
    answer = json.loads(out.splitlines()[0])
    assert answer["result"]["agentInfo"]["name"] == "synapse"


async def test_client_mcp_servers_are_session_commands(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    """Two sessions each get a server named `db` from the client: each runs its own."""
    server = str(Path(__file__).parent / "mcp_servers" / "demo_server.py")
    api.add(
        {"commands": ["mcp:db:pid"]},
        {"text": "one"},
        {"commands": ["mcp:db:pid"]},
        {"text": "two"},
    )
    client = AcpTestClient()
    db = McpServerStdio(name="db", command=sys.executable, args=[server, "--name", "db"], env=[])
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        first = (await conn.new_session(cwd=str(proj), mcp_servers=[db])).session_id
        second = (await conn.new_session(cwd=str(proj), mcp_servers=[db])).session_id
        await conn.prompt(session_id=first, prompt=[text("pid")])
        await conn.prompt(session_id=second, prompt=[text("pid")])
        pids = []
        for sid in (first, second):
            done = finished(client.of(sid))[0]
            assert done["status"] == "completed", done
            pids.append(int(done["content"][0]["content"]["text"].strip()))
        assert pids[0] != pids[1]
        assert all(_alive(pid) for pid in pids)
    assert not any(_alive(pid) for pid in pids)  # the agent's end ended them
    assert not (home / "acp").exists() or not any((home / "acp").iterdir())


async def test_plan_and_thinking_stream_as_acp_updates(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"thinking": "Let me plan.", "commands": ["plan set 'read it' 'fix it'"]},
        {"text": "Planned."},
        {"text": " Nothing more."},  # the answer to a reminder of the open steps, if sent
    )
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("plan")])
    updates = client.of(sid)
    thoughts = [u for u in updates if "_meta" not in u]  # notices carry _meta.synapse
    assert texts(thoughts, "agent_thought_chunk") == "Let me plan."
    plans = [u for u in updates if u["sessionUpdate"] == "plan"]
    assert plans[-1]["entries"] == [
        {"content": "read it", "priority": "medium", "status": "pending"},
        {"content": "fix it", "priority": "medium", "status": "pending"},
    ]


async def test_a_session_another_process_writes_is_read_only_here(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"text": "first answer"})
    writer, reader = AcpTestClient(), AcpTestClient()
    env = agent_env(home, api.base_url)
    async with (
        acp_agent(writer, env) as (conn, _proc, _init),
        acp_agent(reader, env) as (other, _proc2, _init2),
    ):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("hello")])
        await other.load_session(cwd=str(proj), session_id=sid, mcp_servers=[])
        assert texts(reader.of(sid)) == "first answer"  # replayed
        with pytest.raises(RequestError) as locked:
            await other.prompt(session_id=sid, prompt=[text("me too")])
        assert "another Synapse process" in str(locked.value)


async def test_client_mcp_servers_inside_bash_expansions_are_per_session(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    """Two sessions each pass a server `db`: inside a bash expansion (the wrapper on
    PATH, through the socket) each reaches its own live server, the one its direct
    `mcp:db:pid` call (in-process) reaches; no one-shot server is started."""
    server = str(Path(__file__).parent / "mcp_servers" / "demo_server.py")
    for _ in range(2):
        api.add(
            {"commands": ["echo $(mcp:db:pid)"]},
            {"commands": ["mcp:db:pid"]},
            {"text": "done"},
        )
    client = AcpTestClient()
    db = McpServerStdio(name="db", command=sys.executable, args=[server, "--name", "db"], env=[])
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        first = (await conn.new_session(cwd=str(proj), mcp_servers=[db])).session_id
        second = (await conn.new_session(cwd=str(proj), mcp_servers=[db])).session_id
        runs = list((home / "run").iterdir())
        assert len(runs) == 2  # one folder (wrappers, socket) per session
        await conn.prompt(session_id=first, prompt=[text("pid")])
        await conn.prompt(session_id=second, prompt=[text("pid")])
        assert not (home / "bin" / "mcp:db:pid").exists()  # a session's server is its own
    shown = {}
    for sid in (first, second):
        via_bash, direct = (
            u["content"][0]["content"]["text"].strip() for u in finished(client.of(sid))
        )
        assert via_bash == direct and via_bash.isdigit()
        shown[sid] = via_bash
    assert shown[first] != shown[second]
    assert not [p for p in runs if p.exists()]  # removed when the sessions closed


async def test_cancel_while_a_permission_question_is_open(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"commands": ["touch asked.txt"]}, {"text": "after"})
    client = AcpTestClient()
    client.hold = True
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (
            await conn.new_session(
                cwd=str(proj), mcp_servers=[], synapse={"permission": "ask-all-native"}
            )
        ).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text("touch it")]))
        await client.wait_for(lambda: bool(client.asked) or turn.done())
        await conn.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"
        client.hold = False
        again = await conn.prompt(session_id=sid, prompt=[text("go on")])
        assert again.stop_reason == "end_turn"
    assert not (proj / "asked.txt").exists()
    assert finished(client.of(sid))[0]["status"] == "failed"


class SavingClient(AcpTestClient):
    """A client whose fs/write_text_file puts the text in its buffer and on disk."""

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        result = await super().write_text_file(session_id, path, content, **kwargs)
        Path(path).write_text(content)
        return result


@pytest.mark.parametrize("saving", [False, True], ids=["keeps-unsaved", "saves"])
async def test_a_command_after_an_edit_is_told_when_the_client_kept_it_unsaved(
    home: Path, proj: Path, api: FakeAnthropic, saving: bool
) -> None:
    """Issue 29 item 3: ACP has no request to save a buffer. A client that saves what
    fs/write_text_file wrote leaves nothing to say; one that keeps it unsaved is named
    in the next command's result, so the model knows the disk is older."""
    api.add(
        {"commands": ["edit a.py 'x = 1' 'x = 2'"]},
        {"commands": ["cat a.py"]},
        {"text": "done"},
    )
    a_py = str(proj / "a.py")
    kind = SavingClient if saving else AcpTestClient
    client = kind(buffers={a_py: (proj / "a.py").read_text()})
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        sid = (await conn.new_session(cwd=str(proj), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text("bump x")])
    done = finished(client.of(sid))
    edited, catted = (d["content"][-1]["content"]["text"] for d in done[:2])
    if saving:
        assert catted.strip() == "x = 2" and "not on disk" not in edited + catted
    else:
        assert "changed in the editor, not on disk" in edited
        assert "x = 1" in catted and "kept them unsaved" in catted


async def test_a_refused_restrictive_setting_fails_session_new_with_its_reason(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    """Issue 27 item 5 in ACP: a misspelt `sandbox` in the home settings is refused as
    `chat` and `exec` refuse it: `session/new` fails, naming the key and the file."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text('{"sandbx": "read-only"}')
    client = AcpTestClient()
    async with acp_agent(client, agent_env(home, api.base_url)) as (conn, _proc, _init):
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(proj), mcp_servers=[])
    details = str(refused.value.data)
    assert "did you mean 'sandbox'?" in details and str(home / "settings.json") in details
