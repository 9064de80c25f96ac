"""The LSP server end to end over real stdio (pytest-lsp): workspaces, direct shell
commands, edits landing in the editor's buffers, permissions, settings, robustness."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import Future
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.lsp_client import (
    Editor,
    add_folder,
    alive,
    descendants,
    editor,
    folder_uris,
    remove_folder,
    reset,
)

# Tests that need no particular settings share one server (`ed`): each gets its own
# folder, added before and removed after it, as the server's only folder. Tests that
# need other options, capabilities or a fresh process start their own (`editor(...)`).
pytestmark = pytest.mark.asyncio(loop_scope="module")

MCP_SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "synapse-home"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    (path / "sub").mkdir(parents=True)
    (path / "a.py").write_text("x = 1\n")
    return path


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared") / "synapse-home"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(shared_home: Path) -> AsyncIterator[Editor]:
    start = shared_home.parent / "start"
    start.mkdir()
    async with editor(shared_home, [start]) as ed:
        await remove_folder(ed, start)
        yield ed


@pytest_asyncio.fixture(loop_scope="module")
async def ed(shared: Editor, proj: Path) -> AsyncIterator[Editor]:
    """The shared server with `proj` as its only workspace folder."""
    reset(shared)
    await add_folder(shared, proj)
    assert await folder_uris(shared) == [proj.as_uri()]
    yield shared
    await remove_folder(shared, proj)


async def test_initialize_two_folders_each_with_its_own_shell(
    home: Path, proj: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with editor(home, [proj, other]) as ed:
        assert ed.init_result is not None
        caps = ed.init_result.capabilities
        assert caps.text_document_sync is not None
        assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental  # type: ignore[union-attr]
        assert caps.execute_command_provider is not None
        assert "synapse.session.prompt" in caps.execute_command_provider.commands
        status = await ed.command("synapse.status")
        assert [w["uri"] for w in status["workspaces"]] == [proj.as_uri(), other.as_uri()]
        assert status["apiKey"] is False

        one = await ed.command(
            "synapse.shell.run", {"workspaceUri": proj.as_uri(), "command": "pwd"}
        )
        two = await ed.command(
            "synapse.shell.run", {"workspaceUri": other.as_uri(), "command": "pwd"}
        )
        assert one["stdout"].strip() == str(proj.resolve())
        assert two["stdout"].strip() == str(other.resolve())
        # A file URI selects the folder that contains it.
        three = await ed.command(
            "synapse.shell.run", {"workspaceUri": (proj / "a.py").as_uri(), "command": "pwd"}
        )
        assert three["stdout"].strip() == str(proj.resolve())
        with pytest.raises(JsonRpcException) as missing:
            await ed.command("synapse.shell.run", {"command": "pwd"})
        assert missing.value.code == -32602
        assert "workspaceUri" in missing.value.message


async def test_shell_run_ls_and_cd_persist(ed: Editor, proj: Path) -> None:
    listing = await ed.command("synapse.shell.run", {"command": "ls"})
    assert listing == {
        "exitCode": 0,
        "stdout": "a.py\nsub\n",
        "stderr": "",
        "isError": False,
        "layer": "native",
        "category": None,
        "text": None,  # not sent twice: it is just stdout
    }
    await ed.command("synapse.shell.run", {"command": "cd sub && export X=42"})
    where = await ed.command("synapse.shell.run", {"command": 'pwd; echo "$X"'})
    assert where["stdout"] == f"{(proj / 'sub').resolve()}\n42\n"
    failed = await ed.command("synapse.shell.run", {"command": "ls nope"})
    assert failed["isError"] is True and failed["exitCode"] != 0
    assert "Hint: A file or folder the command names does not exist" in failed["text"]
    await ed.command("synapse.shell.restart", {})
    after = await ed.command("synapse.shell.run", {"command": "pwd"})
    assert after["stdout"].strip() == str(proj.resolve())


async def test_a_big_read_arrives_once(ed: Editor, proj: Path) -> None:
    """`read` of 2,000 lines used to answer 150 KB: the file in `stdout` and in `text`."""
    (proj / "big.txt").write_text("".join(f"line {i} of the file\n" for i in range(2000)))
    result = await ed.command("synapse.shell.run", {"command": "read big.txt"})
    assert result["exitCode"] == 0 and "line 1999 of the file" in result["stdout"]
    assert result["text"] is None
    assert len(json.dumps(result)) < 1.2 * len(json.dumps(result["stdout"]))


async def test_edit_lands_in_the_open_buffer_with_unsaved_text(ed: Editor, proj: Path) -> None:
    uri = ed.open(proj / "a.py")
    ed.type_text(uri, "y = 2  # unsaved, ünïcode 😀 here\nz = 3\n")
    result = await ed.command(
        "synapse.shell.run", {"command": "edit a.py 'here\nz = 3' 'there\nz = 4'"}
    )
    assert result["isError"] is False, result
    assert len(ed.edits) == 1
    change = ed.edits[0].edit.document_changes[0]  # type: ignore[index]
    assert isinstance(change, types.TextDocumentEdit)
    assert change.text_document.uri == uri
    assert change.text_document.version == 2  # the version the server synced
    assert ed.docs[uri].text == "x = 1\ny = 2  # unsaved, ünïcode 😀 there\nz = 4\n"
    assert (proj / "a.py").read_text() == "x = 1\n"  # disk untouched
    # The edit is minimal: only what differs, in UTF-16 columns.
    spans = [
        (e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character)
        for e in change.edits
        if isinstance(e, types.TextEdit)
    ]
    assert spans == [(1, 29, 2, 5)]
    # The server follows the buffer: read sees the edited, unsaved text.
    read = await ed.command("synapse.shell.run", {"command": "read a.py"})
    assert "there" in read["stdout"] and "z = 4" in read["stdout"]


async def test_refused_edit_is_an_error_and_nothing_is_written(ed: Editor, proj: Path) -> None:
    uri = ed.open(proj / "a.py")
    ed.refuse = "buffer changed"
    result = await ed.command("synapse.shell.run", {"command": "edit a.py 'x = 1' 'x = 2'"})
    assert result["isError"] is True
    assert "refused" in result["stderr"] and "buffer changed" in result["stderr"]
    assert ed.docs[uri].text == "x = 1\n"
    assert (proj / "a.py").read_text() == "x = 1\n"
    # A file that is not open is edited in the editor too (version null), not on disk.
    (proj / "b.txt").write_text("alpha\nbeta\n")
    ed.refuse = None
    ok = await ed.command("synapse.shell.run", {"command": "edit b.txt beta gamma"})
    assert ok["isError"] is False
    change = ed.edits[-1].edit.document_changes[0]  # type: ignore[index]
    assert isinstance(change, types.TextDocumentEdit)
    assert change.text_document.version is None
    assert (proj / "b.txt").read_text() == "alpha\nbeta\n"
    assert ed.docs[(proj / "b.txt").as_uri()].text == "alpha\ngamma\n"


async def test_write_sends_create_file_and_full_text(ed: Editor, proj: Path) -> None:
    result = await ed.command("synapse.shell.run", {"command": "write notes/todo.md '- ship it\n'"})
    assert result["isError"] is False, result
    target = (proj / "notes" / "todo.md").as_uri()
    changes = ed.edits[0].edit.document_changes
    assert changes is not None
    assert isinstance(changes[0], types.CreateFile) and changes[0].uri == target
    assert changes[0].options is not None and changes[0].options.overwrite is True
    assert ed.created == [target]
    assert ed.docs[target].text == "- ship it\n"
    assert not (proj / "notes" / "todo.md").exists()
    # write to an open buffer: one full replacement of what the editor holds
    uri = ed.open(proj / "a.py", "unsaved buffer\nline two\n", version=5)
    await ed.command("synapse.shell.run", {"command": "write a.py 'new'"})
    last = ed.edits[-1].edit.document_changes
    assert last is not None and len(last) == 1
    assert isinstance(last[0], types.TextDocumentEdit)
    assert last[0].text_document.version == 5
    assert ed.docs[uri].text == "new"
    assert (proj / "a.py").read_text() == "x = 1\n"


async def test_without_apply_edit_capability_the_disk_is_written(home: Path, proj: Path) -> None:
    async with editor(home, [proj], apply_edit=False) as ed:
        result = await ed.command("synapse.shell.run", {"command": "edit a.py 'x = 1' 'x = 5'"})
        assert result["isError"] is False
        assert (proj / "a.py").read_text() == "x = 5\n"
        assert ed.edits == []


async def test_permission_ask_deny_is_not_run_and_session_memory(home: Path, proj: Path) -> None:
    async with editor(home, [proj], init_options={"permission": "ask-all-native"}) as ed:
        ed.answer = "Deny"
        denied = await ed.command("synapse.shell.run", {"command": "touch made.txt"})
        assert denied["exitCode"] == 126 and denied["isError"] is True
        assert "Not run: denied by the user" in denied["stderr"]
        assert denied["category"] == "permission_denied"
        assert not (proj / "made.txt").exists()
        assert len(ed.asks) == 1
        ask = ed.asks[0]
        assert "touch made.txt" in ask.message
        assert [a.title for a in ask.actions or []] == [
            "Allow once",
            "Allow for this session",
            "Always allow `touch` here",
            "Deny",
        ]
        ed.answer = "Allow for this session"
        await ed.command("synapse.shell.run", {"command": "touch made.txt"})
        assert (proj / "made.txt").exists()
        ed.answer = "Deny"  # remembered: not asked again for this exact line
        again = await ed.command("synapse.shell.run", {"command": "touch made.txt"})
        assert again["exitCode"] == 0 and len(ed.asks) == 2
        # built-ins are not native: no ask under ask-all-native
        await ed.command("synapse.shell.run", {"command": "read a.py"})
        assert len(ed.asks) == 2


async def test_default_policy_asks_only_for_writes_outside(
    home: Path, proj: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    async with editor(home, [proj], init_options={"deny": ["rm -rf*"]}) as ed:
        ed.answer = None  # dismissed = Deny
        inside = await ed.command("synapse.shell.run", {"command": "echo hi > in.txt"})
        assert inside["exitCode"] == 0 and ed.asks == []
        out = await ed.command("synapse.shell.run", {"command": f"echo hi > {outside}"})
        assert out["exitCode"] == 126 and not outside.exists()
        out2 = await ed.command("synapse.shell.run", {"command": f"write {outside} hi"})
        assert out2["exitCode"] == 126 and not outside.exists()
        assert len(ed.asks) == 2
        denied = await ed.command("synapse.shell.run", {"command": "rm -rf sub"})
        assert "deny" in denied["stderr"] and (proj / "sub").is_dir()


async def test_bad_settings_are_reported_and_defaults_kept(home: Path, proj: Path) -> None:
    options = {"permission": "sometimes", "commandTimeout": -1, "bogus": 1}
    async with editor(home, [proj], init_options=options) as ed:
        deadline = time.monotonic() + 10
        while not ed.client.messages and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        text = " ".join(m.message for m in ed.client.messages)
        assert "permission" in text and "commandTimeout" in text and "bogus" in text
        ok = await ed.command("synapse.shell.run", {"command": "echo fine"})
        assert ok["stdout"] == "fine\n"


async def test_malformed_requests_get_errors_and_the_server_lives_on(
    ed: Editor, proj: Path
) -> None:
    client = ed.client
    with pytest.raises(JsonRpcException) as two_args:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="synapse.shell.run", arguments=[1, 2])
        )
    assert two_args.value.code == -32602
    with pytest.raises(JsonRpcException) as no_command:
        await ed.command("synapse.shell.run", {"command": 42})
    assert no_command.value.code == -32602 and "`command`" in no_command.value.message
    with pytest.raises(JsonRpcException) as unknown:
        await ed.command("synapse.nope")
    assert unknown.value.code == -32601
    with pytest.raises(JsonRpcException) as session:
        await ed.command("synapse.session.prompt", {"sessionId": "missing", "text": "hi"})
    assert session.value.code == -32602 and "missing" in session.value.message
    # Params that do not even match the LSP schema: still an answer.
    pending: Future[object] = Future()
    client.protocol._request_futures["bad-1"] = pending
    client.protocol._send_data(
        {
            "jsonrpc": "2.0",
            "id": "bad-1",
            "method": "workspace/executeCommand",
            "params": {"arguments": [{"command": "ls"}]},
        }
    )
    with pytest.raises(JsonRpcException) as raw:
        await asyncio.wait_for(asyncio.wrap_future(pending), 10)
    assert raw.value.code == -32602
    status = await ed.command("synapse.status")
    assert status["version"]


async def test_an_exception_in_a_handler_is_an_error_reply_and_the_next_request_works(
    ed: Editor, shared_home: Path
) -> None:
    # A stored session whose log is a directory: loading it raises inside the handler
    # (the store skips lines it cannot read, but not a log it cannot open).
    broken = shared_home / "sessions" / "broken-1"
    (broken / "events.jsonl").mkdir(parents=True, exist_ok=True)
    header = {
        "format": 2,
        "id": "broken-1",
        "title": "Broken",
        "created_at": "2026-01-01T00:00:00Z",
    }
    (broken / "session.json").write_text(json.dumps(header))
    with pytest.raises(JsonRpcException) as failed:
        await ed.command("synapse.session.load", {"sessionId": "broken-1"})
    # (the store now names the damage itself: a refusal, not an internal error)
    assert failed.value.code == -32803
    assert "events.jsonl: is not a regular file" in failed.value.message
    server = ed.client._server
    assert server is not None and server.returncode is None
    ran = await ed.command("synapse.shell.run", {"command": "echo next"})
    assert ran["stdout"] == "next\n"
    created = await ed.command("synapse.session.new", {})
    assert created["sessionId"]


def _mcp_config(folder: Path) -> None:
    """A workspace `mcp_servers.json` with one real stdio MCP server, tagged by folder."""
    server = {"command": sys.executable, "args": [str(MCP_SERVER), "--name", f"tag-{folder.name}"]}
    (folder / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"demo": server}}))


def _mcp_children(server_pid: int, folder: Path) -> list[int]:
    """Live descendants of the LSP server that run the demo MCP server of `folder`."""
    found = []
    for pid in descendants(server_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(MCP_SERVER).encode() in argv and f"tag-{folder.name}".encode() in argv:
            found.append(pid)
    return found


async def _gone(pids: list[int] | set[int]) -> list[int]:
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return [p for p in pids if alive(p)]


async def test_folder_removal_and_shutdown_leave_no_bash_or_mcp_child(
    home: Path, proj: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    _mcp_config(proj)
    _mcp_config(other)
    async with editor(home, [proj, other], init_options={"trustedWorkspace": True}) as ed:
        server = ed.client._server
        assert server is not None
        # `other`: its shell runs a background job, and its MCP server connects via search.
        await ed.command(
            "synapse.shell.run", {"workspaceUri": other.as_uri(), "command": "sleep 300 &"}
        )
        print("MARK 'found = await ed.com'", time.monotonic())
        found = await ed.command(
            "synapse.tools.search", {"workspaceUri": other.as_uri(), "query": "echo"}
        )
        assert "mcp:demo:echo" in [t["name"] for t in found["tools"]]
        # `proj`: its MCP server connects when an `mcp:` command runs.
        print("MARK 'echoed = await ed.co'", time.monotonic())
        echoed = await ed.command(
            "synapse.shell.run",
            {"workspaceUri": proj.as_uri(), "command": "mcp:demo:echo --text hi"},
        )
        assert echoed["isError"] is False and "hi" in echoed["stdout"], echoed
        other_mcp, proj_mcp = _mcp_children(server.pid, other), _mcp_children(server.pid, proj)
        assert len(other_mcp) == 1 and len(proj_mcp) == 1, (other_mcp, proj_mcp)
        other_children = descendants(other_mcp[0]) | set(other_mcp)
        before_removal = descendants(server.pid)
        # The sleep job of `other`'s shell is a descendant too.
        sleeps = [p for p in before_removal if b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(sleeps) == 1

        ed.client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[], removed=[types.WorkspaceFolder(uri=other.as_uri(), name="other")]
                )
            )
        )
        status = await ed.command("synapse.status")  # served after the notification
        assert [w["uri"] for w in status["workspaces"]] == [proj.as_uri()]
        assert await _gone(other_children | set(sleeps)) == []
        # `proj` keeps its shell and MCP server.
        assert all(alive(p) for p in proj_mcp)
        again = await ed.command("synapse.shell.run", {"command": "mcp:demo:echo --text again"})
        assert "again" in again["stdout"]

        remaining = descendants(server.pid)
        assert set(proj_mcp) <= remaining
        await ed.client.shutdown_session()
        assert server.returncode == 0
    assert await _gone(remaining) == []


async def test_workspace_configuration_applies_before_commands(home: Path, proj: Path) -> None:
    """Editor settings apply before the first command, over the server's environment."""
    env = {"SYNAPSE_MODEL": "env-model", "SYNAPSE_MAX_TOKENS": "3000"}
    configuration = {
        "permission": "ask-all-native",
        "model": "editor-model",
        "thinkingBudget": 2048,
    }
    async with editor(home, [proj], configuration=configuration, env=env) as ed:
        ed.answer = "Deny"
        denied = await ed.command("synapse.shell.run", {"command": "echo hi"})
        assert denied["exitCode"] == 126 and len(ed.asks) == 1
        status = await ed.command("synapse.status")
        assert status["model"] == "editor-model"  # the editor wins over SYNAPSE_MODEL
        assert status["maxTokens"] == 3000  # from the environment
        assert status["thinkingBudget"] == 2048


async def test_tools_search_and_refresh_with_progress(home: Path, proj: Path) -> None:
    scripts = home / "skills" / "demo" / "scripts"
    scripts.mkdir(parents=True)
    (home / "skills" / "demo" / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A demo skill\n---\nSay hello.\n"
    )
    (scripts / "hello.sh").write_text("#!/bin/sh\n# Say hello to someone.\necho hello $1\n")
    async with editor(home, [proj]) as ed:
        found = await ed.command("synapse.tools.search", {"query": "hello"})
        assert [t["name"] for t in found["tools"]] == ["skill:demo:hello"]
        assert found["tools"][0]["type"] == "skill"
        assert (await ed.command("synapse.tools.search", {"query": "hello", "type": "mcp"})) == {
            "tools": []
        }
        refreshed = await ed.command("synapse.tools.refresh", {"what": "skills"})
        assert refreshed["tools"] == 1
        assert ed.client.progress_reports, "expected work-done progress for the refresh"
        ran = await ed.command("synapse.shell.run", {"command": "skill:demo:hello world"})
        assert ran["stdout"] == "hello world\n"
        with pytest.raises(JsonRpcException) as bad:
            await ed.command("synapse.tools.refresh", {"what": "everything"})
        assert bad.value.code == -32602
        # The skills watcher runs with the server: a script added now is found, no refresh.
        (scripts / "bye.sh").write_text("#!/bin/sh\n# Wave goodbye.\necho bye\n")
        for _ in range(500):
            watched = await ed.command("synapse.tools.search", {"query": "goodbye"})
            if watched["tools"]:
                break
            await asyncio.sleep(0.02)
        assert [t["name"] for t in watched["tools"]] == ["skill:demo:bye"]


async def test_tools_refresh_mcp_picks_up_the_config_and_rewrites_wrappers(
    home: Path, proj: Path
) -> None:
    def configure(name: str) -> None:
        server = {"command": sys.executable, "args": [str(MCP_SERVER)]}
        (proj / "mcp_servers.json").write_text(json.dumps({"mcpServers": {name: server}}))

    bin_dir = home / "bin"
    async with editor(home, [proj], init_options={"trustedWorkspace": True}) as ed:
        assert (await ed.command("synapse.tools.search", {"query": "", "type": "mcp"})) == {
            "tools": []
        }
        configure("first")
        refreshed = await ed.command("synapse.tools.refresh", {"what": "mcp"})
        assert refreshed["errors"] == [] and refreshed["tools"] >= 2
        found = await ed.command("synapse.tools.search", {"query": "add", "type": "mcp"})
        assert [t["name"] for t in found["tools"]] == ["mcp:first:add"]
        assert (bin_dir / "mcp:first:add").is_file()
        ran = await ed.command("synapse.shell.run", {"command": "mcp:first:add 2 3"})
        assert ran["stdout"] == "5\n"
        configure("second")  # renamed: the old server's commands and wrappers go
        await ed.command("synapse.tools.refresh", {"what": "mcp"})
        found = await ed.command("synapse.tools.search", {"query": "add", "type": "mcp"})
        assert [t["name"] for t in found["tools"]] == ["mcp:second:add"]
        assert (bin_dir / "mcp:second:add").is_file()
        assert not list(bin_dir.glob("mcp:first:*"))
