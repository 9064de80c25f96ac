"""Chat over LSP against the fake Anthropic server: streamed updates in order, edits in
the editor, cancel (command and $/cancelRequest), concurrency, busy sessions,
permissions, a missing API key and stored sessions (list / load replay / delete).

Most tests share one server process (and one fake API): each gets its own workspace
folder, added with `workspace/didChangeWorkspaceFolders` and removed afterwards, and
passes its `workspaceUri`; tests that need other settings or environment start their own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.checkpoints import store_dir
from tests.lsp_client import Editor, add_folder, editor, remove_folder, reset

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAKE_KEY = "sk-ant-fake-lsp-test"


def fake_env(api: FakeAnthropic) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": api.base_url}


async def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def new_session(ed: Editor, folder: Path | None = None) -> str:
    args = {"workspaceUri": folder.as_uri()} if folder is not None else {}
    created = await ed.command("synapse.session.new", args)
    sid: str = created["sessionId"]
    return sid


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    """Update kinds with consecutive duplicates collapsed (streams coalesce variably)."""
    out: list[str] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind == "tool_call_update":
            kind += ":" + ("output" if "output" in u else u["status"])
        if kind in ("usage_update", "tool_call_update:output"):
            continue
        if not out or out[-1] != kind:
            out.append(kind)
    return out


@dataclass
class Shared:
    ed: Editor
    api: FakeAnthropic
    home: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    base = tmp_path_factory.mktemp("chat")
    first = base / "first"
    first.mkdir()
    async with (
        FakeAnthropic([]) as api,
        editor(base / "home", [first], env=fake_env(api)) as ed,
    ):
        yield Shared(ed, api, base / "home")


@pytest_asyncio.fixture(loop_scope="module")
async def proj(shared: Shared, tmp_path: Path) -> AsyncIterator[Path]:
    """A fresh folder of this test in the shared server, with an empty fake API queue."""
    path = tmp_path / "proj"
    path.mkdir()
    (path / "a.py").write_text("x = 1\n")
    (path / "notes.txt").write_text("hello\n")
    shared.api._queue.clear()
    shared.api.requests.clear()
    reset(shared.ed)
    await add_folder(shared.ed, path)
    yield path
    await remove_folder(shared.ed, path)  # disposes the folder's sessions and shells


@pytest.fixture
def ed(shared: Shared) -> Editor:
    return shared.ed


@pytest.fixture
def api(shared: Shared) -> FakeAnthropic:
    return shared.api


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """SYNAPSE_HOME of a test that starts its own server."""
    return tmp_path / "synapse-home"


async def test_prompt_streams_text_runs_ls_and_edits_the_open_buffer(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"text": "Let me look.", "commands": ["ls"]},
        {"commands": ["edit a.py 'y = 2' 'y = 3'"]},
        {"text": "Done: a.py now sets y to 3."},
    )
    uri = ed.open(proj / "a.py")
    ed.type_text(uri, "y = 2\n")  # unsaved in the editor
    sid = await new_session(ed, proj)
    result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "Fix y"})
    assert result["stopReason"] == "end_turn"
    assert result["usage"]["outputTokens"] > 0
    updates = ed.session_updates(sid)
    assert kinds(updates) == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update:completed",
        "tool_call",
        "tool_call_update:completed",
        "agent_message_chunk",
        "turn_finished",
    ]
    assert updates[0]["content"] == {"type": "text", "text": "Fix y"}
    text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text == "Let me look.Done: a.py now sets y to 3."
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert calls[0]["rawInput"] == {"command": "ls", "restart": False}
    assert calls[0]["status"] == "in_progress" and calls[0]["kind"]
    ls_out = "".join(
        u["output"]["text"]
        for u in updates
        if "output" in u and u["toolCallId"] == calls[0]["toolCallId"]
    )
    assert ls_out == "a.py\nnotes.txt\n"
    done = [u for u in updates if u.get("status") == "completed"]
    assert done[1]["rawOutput"]["edit"] == {"path": str(proj / "a.py"), "applied": True}
    # The core's diff, ACP's shape: from the unsaved buffer to the edited one.
    assert done[1]["content"][0] == {
        "type": "diff",
        "path": str(proj / "a.py"),
        "oldText": "x = 1\ny = 2\n",
        "newText": "x = 1\ny = 3\n",
    }
    assert [c["type"] for c in done[0]["content"]] == ["content"]  # `ls` changed nothing
    assert ed.docs[uri].text == "x = 1\ny = 3\n"
    assert (proj / "a.py").read_text() == "x = 1\n"
    assert updates[-1]["stopReason"] == "end_turn"
    # The model saw the unsaved buffer through the edit's success, and got 3 calls.
    assert len(api.message_requests) == 3


async def test_one_line_that_writes_and_edits_sends_a_diff_per_file(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"commands": ["write new.txt 'hello\n' && edit notes.txt 'hello' 'bye' && echo ok"]},
        {"commands": ["edit notes.txt 'nothing like this' 'x'"]},
        {"text": "done"},
    )
    before = (proj / "notes.txt").read_text()
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
    finished = [
        u
        for u in ed.session_updates(sid)
        if u["sessionUpdate"] == "tool_call_update" and "status" in u
    ]
    diffs = [c for c in finished[0]["content"] if c["type"] == "diff"]
    assert diffs == [
        {"type": "diff", "path": str(proj / "new.txt"), "oldText": None, "newText": "hello\n"},
        {
            "type": "diff",
            "path": str(proj / "notes.txt"),
            "oldText": before,
            "newText": before.replace("hello", "bye"),
        },
    ]
    # A failed edit changed nothing and has no diff.
    assert finished[1]["status"] == "failed"
    assert [c["type"] for c in finished[1]["content"]] == ["content"]


async def _configure(ed: Editor, settings: dict[str, Any]) -> None:
    ed.client.set_configuration(settings, section="synapse")  # type: ignore[no-untyped-call]
    ed.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    for _ in range(500):
        status = await ed.command("synapse.status")
        if status["thinkingBudget"] == settings.get("thinkingBudget", 0):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"settings {settings} never applied")


async def test_thinking_setting_asks_for_thinking_and_streams_thoughts(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    await _configure(ed, {"thinkingBudget": 2048})
    try:
        api.add({"thinking": "First list the files.", "text": "Nothing to do."})
        sid = await new_session(ed, proj)
        result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "Hi"})
    finally:
        await _configure(ed, {})
    assert result["stopReason"] == "end_turn"
    assert api.message_requests[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    updates = ed.session_updates(sid)
    assert kinds(updates)[1:3] == ["agent_thought_chunk", "agent_message_chunk"]
    thought = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"
    )
    assert thought == "First list the files."


async def test_cancel_by_command_and_by_cancel_request(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    api.add(
        {"commands": ["sleep 30"]},
        {"commands": ["sleep 31"]},
        "after the cancels",
    )
    sid = await new_session(ed, proj)

    def started(command: str) -> bool:
        return any(
            u["sessionUpdate"] == "tool_call" and u["rawInput"]["command"] == command
            for u in ed.session_updates(sid)
        )

    prompt = asyncio.create_task(
        ed.command("synapse.session.prompt", {"sessionId": sid, "text": "wait"})
    )
    await wait_for(lambda: started("sleep 30"))
    assert await ed.command("synapse.session.cancel", {"sessionId": sid}) == {"cancelled": True}
    result = await asyncio.wait_for(prompt, 20)
    assert result["stopReason"] == "cancelled"
    ended = [u for u in ed.session_updates(sid) if u.get("status") == "cancelled"]
    assert len(ended) == 1

    # $/cancelRequest for the prompt request does the same.
    protocol = ed.client.protocol
    future = asyncio.ensure_future(
        protocol.send_request_async(  # type: ignore[no-untyped-call]  # pygls
            "workspace/executeCommand",
            types.ExecuteCommandParams(
                command="synapse.session.prompt",
                arguments=[{"sessionId": sid, "text": "again"}],
            ),
            msg_id="prompt-2",
        )
    )
    await wait_for(lambda: started("sleep 31"))
    protocol.notify("$/cancelRequest", types.CancelParams(id="prompt-2"))
    with pytest.raises(JsonRpcException) as cancelled:
        await asyncio.wait_for(future, 20)
    assert cancelled.value.code == -32800
    await wait_for(
        lambda: [u.get("stopReason") for u in ed.session_updates(sid)].count("cancelled") == 2
    )
    # The session is usable afterwards and its history stayed valid.
    final = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go on"})
    assert final["stopReason"] == "end_turn"
    assert await ed.command("synapse.session.cancel", {"sessionId": sid}) == {"cancelled": False}


async def test_concurrent_sessions_and_busy_rejection(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    # Each session's command waits until both sessions' commands are running.
    both = (
        "touch started.$$; for i in $(seq 400); do "
        '[ "$(ls started.* | wc -l)" -ge 2 ] && break; sleep 0.05; done; '
        'if [ "$(ls started.* | wc -l)" -ge 2 ]; then echo both; else echo alone; fi'
    )
    api.add({"commands": [both]}, {"commands": [both]}, "finished", "finished")
    one, two = await new_session(ed, proj), await new_session(ed, proj)
    first = asyncio.create_task(
        ed.command("synapse.session.prompt", {"sessionId": one, "text": "go"})
    )
    await wait_for(lambda: any(u["sessionUpdate"] == "tool_call" for u in ed.session_updates(one)))
    with pytest.raises(JsonRpcException) as busy:
        await ed.command("synapse.session.prompt", {"sessionId": one, "text": "again"})
    assert busy.value.code == -32803
    assert busy.value.data == {"reason": "session_busy"}
    second = asyncio.create_task(
        ed.command("synapse.session.prompt", {"sessionId": two, "text": "go"})
    )
    results = await asyncio.wait_for(asyncio.gather(first, second), 60)
    assert [r["stopReason"] for r in results] == ["end_turn", "end_turn"]
    for sid in (one, two):
        outputs = "".join(u["output"]["text"] for u in ed.session_updates(sid) if "output" in u)
        assert outputs == "both\n"
    status = await ed.command("synapse.status")
    (mine,) = [w for w in status["workspaces"] if w["uri"] == proj.as_uri()]
    assert mine["sessions"] == 2 and mine["busySessions"] == 0


async def test_permission_denied_tool_call_is_not_run(
    home: Path, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"commands": ["touch made-by-agent"]}, "I could not.")
    options = {"permission": "ask-all-native"}
    async with editor(home, [proj], env=fake_env(api), init_options=options) as ed:
        ed.answer = "Deny"
        sid = await new_session(ed)
        result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "touch"})
        assert result["stopReason"] == "end_turn"
        assert len(ed.asks) == 1 and "touch made-by-agent" in ed.asks[0].message
        finished = [u for u in ed.session_updates(sid) if u.get("status") == "denied"]
        assert len(finished) == 1
        assert finished[0]["rawOutput"]["exitCode"] == 126
        assert "Not run: denied by the user" in finished[0]["content"][0]["content"]["text"]
        assert not (proj / "made-by-agent").exists()


async def test_no_api_key_ends_the_turn_with_a_clear_error(home: Path, proj: Path) -> None:
    # The configured key variable is unset; another variable holds a secret that must
    # not be used as the key nor appear anywhere the editor (or the log file) sees.
    secret = "sk-ant-decoy-secret-0123456789"
    options = {"apiKeyEnv": "SYNAPSE_TEST_KEY"}
    async with editor(home, [proj], init_options=options, env={"ANTHROPIC_API_KEY": secret}) as ed:
        sid = await new_session(ed)
        for attempt in ("hi", "hi again"):
            result = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": attempt})
            assert result["stopReason"] == "error"
            assert "SYNAPSE_TEST_KEY" in result["error"]  # how to fix it: which variable
            assert "export SYNAPSE_TEST_KEY=" in result["error"]
        finished = [u for u in ed.session_updates(sid) if u["sessionUpdate"] == "turn_finished"]
        assert [u["stopReason"] for u in finished] == ["error", "error"]
        # The server lives on: direct commands and new sessions still work.
        echoed = await ed.command("synapse.shell.run", {"command": "echo alive"})
        assert echoed["stdout"] == "alive\n"
        assert await new_session(ed)
        seen = repr((ed.updates, ed.client.messages, ed.client.log_messages, result, ed.asks))
    logs = "".join(f.read_text(errors="replace") for f in (home / "logs").glob("*"))
    assert secret not in seen and secret not in logs


async def test_sessions_list_load_replay_and_delete(
    shared: Shared, proj: Path, api: FakeAnthropic
) -> None:
    api.add({"text": "Listing.", "commands": ["ls"]}, "There are two files.")
    ed, mine = shared.ed, {"workspaceUri": proj.as_uri()}
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "What is here?"})
    listed = await ed.command("synapse.session.list", mine)
    assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    row = listed["sessions"][0]
    assert row["title"] == "What is here?" and row["workspaceUri"] == proj.as_uri()
    assert row["busy"] is False
    # A new server process on the same SYNAPSE_HOME: the session is stored and replays.
    async with editor(shared.home, [proj], env=fake_env(api)) as ed:
        loaded = await ed.command("synapse.session.load", {"sessionId": sid})
        assert loaded == {"sessionId": sid, "title": "What is here?", "workspaceUri": proj.as_uri()}
        replayed = [u for u in ed.updates if u["sessionId"] == sid]
        assert replayed and all(u.get("replay") is True for u in replayed)
        updates = [u["update"] for u in replayed]
        assert kinds(updates) == [
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update:completed",
            "agent_message_chunk",
            "turn_finished",
        ]
        assert updates[0]["content"]["text"] == "What is here?"
        # Its checkpoints (snapshots of the folder: old file versions) go with it.
        store = store_dir(shared.home, proj)
        assert (store / "refs" / "synapse" / sid).is_dir() and (store / f"index-{sid}").exists()
        assert await ed.command("synapse.session.delete", {"sessionId": sid}) == {"deleted": True}
        assert (await ed.command("synapse.session.list", mine))["sessions"] == []
        assert not (store / "refs" / "synapse" / sid).exists()
        assert not (store / f"index-{sid}").exists()
        with pytest.raises(JsonRpcException) as gone:
            await ed.command("synapse.session.load", {"sessionId": sid})
        assert gone.value.code == -32602


async def test_a_session_follows_its_folders_live_settings(
    ed: Editor, api: FakeAnthropic, tmp_path: Path
) -> None:
    """A chat reads its folder's settings (`.synapse/settings.json` over the editor's),
    and an editor change made after the session was created reaches its next call."""
    folder = tmp_path / "configured"
    (folder / ".synapse").mkdir(parents=True)
    (folder / ".synapse" / "settings.json").write_text(json.dumps({"maxTokens": 1234}))
    api._queue.clear()
    api.requests.clear()
    reset(ed)
    await add_folder(ed, folder)
    try:
        sid = await new_session(ed, folder)
        api.add({"text": "one"}, {"text": "two"})
        first = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "1"})
        ed.client.set_configuration({"model": "claude-other"}, section="synapse")  # type: ignore[no-untyped-call]
        ed.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None)
        )
        for _ in range(500):
            if (await ed.command("synapse.status"))["model"] == "claude-other":
                break
            await asyncio.sleep(0.01)
        second = await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "2"})
    finally:
        await _configure(ed, {})
        for _ in range(500):
            if (await ed.command("synapse.status"))["model"] != "claude-other":
                break
            await asyncio.sleep(0.01)
        await remove_folder(ed, folder)
    assert first["stopReason"] == second["stopReason"] == "end_turn"
    requests = api.message_requests
    assert [r["max_tokens"] for r in requests] == [1234, 1234]
    assert requests[0]["model"] != "claude-other"
    assert requests[1]["model"] == "claude-other"


async def test_rewind_restores_a_turn_through_the_editor_and_asks_about_later_changes(
    ed: Editor, proj: Path, api: FakeAnthropic
) -> None:
    """Checkpoints over the LSP face: the open buffer (with unsaved text) gets its old text
    back through applyEdit, shell changes are undone on disk, a file the user changed
    after the turn is asked about (and kept), the user's `.git` is untouched."""
    (proj / "b.txt").write_text("bee\n")
    (proj / "c.txt").write_text("sea\n")
    (proj / "mine.txt").write_text("mine\n")
    (proj / ".git").mkdir()
    (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    uri = ed.open(proj / "a.py")
    ed.type_text(uri, "y = 2\n")  # unsaved: the buffer holds "x = 1\ny = 2\n"
    api.add(
        {
            "commands": [
                "edit a.py 'y = 2' 'y = 3'",
                "sed -i s/bee/BEE/ b.txt && rm c.txt && echo new > made.txt",
                "echo changed > mine.txt",
            ]
        },
        {"text": "done"},
    )
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "change it"})
    assert ed.docs[uri].text == "x = 1\ny = 3\n"
    for _ in range(500):  # the snapshot after the turn runs in the background
        listed = await ed.command("synapse.session.checkpoints", {"sessionId": sid})
        if listed["checkpoints"] and listed["checkpoints"][0]["finished"]:
            break
        await asyncio.sleep(0.02)
    (checkpoint,) = listed["checkpoints"]
    assert checkpoint["turn"] == 1 and checkpoint["prompt"] == "change it"
    assert {(c["path"], c["status"]) for c in checkpoint["changed"]} == {
        ("a.py", "modified"),
        ("b.txt", "modified"),
        ("c.txt", "deleted"),
        ("made.txt", "added"),
        ("mine.txt", "modified"),
    }
    (proj / "mine.txt").write_text("the user's later edit\n")
    ed.answer = "Keep current"
    ed.asks.clear()
    edits_before = len(ed.edits)
    report = await ed.command("synapse.session.rewind", {"sessionId": sid, "turn": 1})
    assert sorted(report["restored"]) == ["a.py", "b.txt", "c.txt"]
    assert report["deleted"] == ["made.txt"] and report["skipped"] == ["mine.txt"]
    assert report["truncated"] is True
    assert [a.message for a in ed.asks] == [
        "Rewind: mine.txt was changed by you or another program (not only by the agent) "
        "during or after the turn. Put back the version from before the turn anyway?"
    ]
    # The buffer got its unsaved pre-turn text back as an edit; the disk was not written.
    assert len(ed.edits) > edits_before
    assert ed.docs[uri].text == "x = 1\ny = 2\n"
    assert (proj / "a.py").read_text() == "x = 1\n"
    assert (proj / "b.txt").read_text() == "bee\n" and (proj / "c.txt").read_text() == "sea\n"
    assert not (proj / "made.txt").exists()
    assert (proj / "mine.txt").read_text() == "the user's later edit\n"
    assert sorted(p.name for p in (proj / ".git").iterdir()) == ["HEAD"]
    listed = await ed.command("synapse.session.checkpoints", {"sessionId": sid})
    assert listed["checkpoints"] == []
    with pytest.raises(JsonRpcException, match="no checkpoint before turn 1"):
        await ed.command("synapse.session.rewind", {"sessionId": sid, "turn": 1})
