"""The typed protocol at the LSP boundary, over real stdio: the protocol version in the
`initialize` result, malformed arguments answered as InvalidParams naming the command
and the field before any handler runs, null as absent, the negotiated position encoding,
and a cold start that loads none of the heavy modules."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from synapse_lsp.lsp.protocol import (
    COMMANDS,
    PROTOCOL_VERSION,
    SessionPromptResult,
    ShellRunParams,
    TokenUsage,
)
from synapse_lsp.lsp.wire import ArgumentError, from_wire, to_wire
from tests.lsp_client import Editor, editor, server_env

module_loop = pytest.mark.asyncio(loop_scope="module")  # the async tests share one server


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("protocol") / "proj"
    path.mkdir()
    (path / "a.py").write_text("é = 1\n")
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ed(proj: Path) -> AsyncIterator[Editor]:
    async with editor(proj.parent / "home", [proj], position_encodings=["utf-8"]) as ed:
        yield ed


@module_loop
async def test_initialize_reports_the_protocol_version(ed: Editor) -> None:
    assert ed.init_result is not None
    caps = ed.init_result.capabilities
    assert caps.experimental == {"synapse": {"protocolVersion": PROTOCOL_VERSION}}
    assert caps.position_encoding == types.PositionEncodingKind.Utf8  # what this client offered
    assert caps.execute_command_provider is not None
    assert sorted(caps.execute_command_provider.commands) == sorted(COMMANDS)


@pytest.mark.parametrize("offered", [None, []], ids=["no-positionEncodings", "empty-list"])
async def test_no_position_encoding_is_returned_to_a_client_that_offered_none(
    tmp_path: Path, offered: list[str] | None
) -> None:
    """LSP 3.17: a client that offers no `general.positionEncodings` gets UTF-16 without
    being told; the result leaves `positionEncoding` out (on the wire, not only parsed)."""
    client = pytest_lsp.make_test_lsp_client()
    raw: list[dict[str, Any]] = []
    structure = client.protocol.structure_message

    def record(data: dict[str, Any]) -> Any:
        if isinstance(data.get("result"), dict) and "capabilities" in data["result"]:
            raw.append(json.loads(json.dumps(data["result"]["capabilities"], default=str)))
        return structure(data)

    client.protocol.structure_message = record  # type: ignore[method-assign]
    (tmp_path / "home").mkdir()
    await client.start_io(sys.executable, "-m", "synapse_lsp", env=server_env(tmp_path / "home"))
    try:
        caps = pytest_lsp.client_capabilities("visual-studio-code")  # offers none
        if offered is not None:
            assert caps.general is not None
            caps.general.position_encodings = offered
        result = await client.initialize_session(
            types.InitializeParams(capabilities=caps, process_id=None, root_uri=tmp_path.as_uri())
        )
        assert result.capabilities.position_encoding is None
        [wire] = raw
        assert "positionEncoding" not in wire, wire
        assert wire["experimental"] == {"synapse": {"protocolVersion": PROTOCOL_VERSION}}
    finally:
        await client.shutdown_session()


MALFORMED: list[tuple[str, Any, str]] = [
    ("synapse.shell.run", [{}], "synapse.shell.run: missing required argument `command`"),
    (
        "synapse.shell.run",
        [{"command": 42}],
        "synapse.shell.run: `command` must be a string, not a number",
    ),
    (
        "synapse.shell.run",
        [{"command": "ls", "timeout": -1}],
        "synapse.shell.run: `timeout` must be a positive number",
    ),
    (
        "synapse.shell.run",
        [{"command": "ls", "timeout": "5"}],
        "synapse.shell.run: `timeout` must be a number, not a string",
    ),
    (
        "synapse.shell.run",
        [{"command": "ls", "workspaceUri": ["file:///x"]}],
        "synapse.shell.run: `workspaceUri` must be a string, not an array",
    ),
    (
        "synapse.tools.refresh",
        [{"what": "everything"}],
        'synapse.tools.refresh: `what` must be "mcp", "skills" or "all", not \'everything\'',
    ),
    (
        "synapse.tools.search",
        [{"type": True}],
        'synapse.tools.search: `type` must be "mcp" or "skill", not a boolean',
    ),
    # The session does not exist: the arguments are refused before any handler looks.
    (
        "synapse.session.prompt",
        [{"sessionId": "nope", "text": "hi", "context": "the file"}],
        "synapse.session.prompt: `context` must be an object, not a string",
    ),
    (
        "synapse.session.prompt",
        [{"sessionId": "nope", "text": "hi", "context": {"openFiles": ["file:///a", 1]}}],
        "synapse.session.prompt: `context.openFiles[1]` must be a string, not a number",
    ),
    (
        "synapse.session.prompt",
        [{"sessionId": "nope", "text": "hi", "context": {"selection": {"text": "x"}}}],
        "synapse.session.prompt: missing required argument `context.selection.uri`",
    ),
    (
        "synapse.session.prompt",
        [{"sessionId": "nope", "text": None}],
        "synapse.session.prompt: missing required argument `text`",
    ),
    (
        "synapse.session.cancel",
        [{"sessionId": "a"}, {"sessionId": "b"}],
        "synapse.session.cancel: expected exactly one argument, an object "
        '(e.g. [{"sessionId": "..."}]); got 2 arguments',
    ),
    (
        "synapse.session.cancel",
        ["a"],
        "synapse.session.cancel: expected exactly one argument, an object "
        '(e.g. [{"sessionId": "..."}]); got a string',
    ),
]


@module_loop
@pytest.mark.parametrize(("command", "arguments", "message"), MALFORMED)
async def test_malformed_arguments_name_the_command_and_the_field(
    ed: Editor, command: str, arguments: Any, message: str
) -> None:
    with pytest.raises(JsonRpcException) as bad:
        await ed.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=arguments)
        )
    assert (bad.value.code, bad.value.message) == (-32602, message)


@module_loop
async def test_null_is_absent_and_no_argument_is_an_empty_object(ed: Editor) -> None:
    ran = await ed.command(
        "synapse.shell.run", {"command": "echo hi", "timeout": None, "workspaceUri": None}
    )
    assert ran == {
        "exitCode": 0,
        "stdout": "hi\n",
        "stderr": "",
        "isError": False,
        "layer": "native",
        "category": None,  # null stays on the wire
        "text": None,  # not sent twice: it is just stdout
    }
    for arguments in (None, [], [None]):
        status: Any = await ed.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="synapse.status", arguments=arguments)
        )
        assert status["workspaces"][0]["sessions"] == 0
    # unknown keys are ignored (a newer client may send more)
    found = await ed.command("synapse.tools.search", {"query": "x", "since": "v9"})
    assert found == {"tools": []}


@module_loop
async def test_edits_use_the_negotiated_position_encoding(ed: Editor, proj: Path) -> None:
    ed.open(proj / "a.py")
    ed.refuse = "only looking"  # the test client applies UTF-16; keep the buffer as it is
    ran = await ed.command("synapse.shell.run", {"command": "edit a.py '= 1' '= 2'"})
    assert ran["isError"] is True and "only looking" in ran["text"]
    [params] = ed.edits
    [change] = params.edit.document_changes or []
    assert isinstance(change, types.TextDocumentEdit)
    [edit] = change.edits
    # "é" is two UTF-8 code units (one in UTF-16): the 1 is at character 5, not 4
    assert isinstance(edit, types.TextEdit)
    assert (edit.range.start.line, edit.range.start.character, edit.new_text) == (0, 5, "2")


def test_results_keep_nulls_and_leave_omitted_fields_off() -> None:
    usage = TokenUsage(
        input_tokens=1, output_tokens=2, cache_creation_input_tokens=0, cache_read_input_tokens=0
    )
    assert to_wire(SessionPromptResult(stop_reason="end_turn", usage=usage)) == {
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 1,
            "outputTokens": 2,
            "cacheCreationInputTokens": 0,
            "cacheReadInputTokens": 0,
        },
    }
    failed = SessionPromptResult(stop_reason="error", usage=usage, error="no key")
    assert to_wire(failed)["error"] == "no key"
    assert from_wire(to_wire(failed), SessionPromptResult) == failed


def test_structuring_is_strict_and_never_coerces() -> None:
    assert from_wire({"command": "ls", "timeout": 2}, ShellRunParams) == ShellRunParams(
        command="ls", timeout=2.0
    )
    for bad in ({"command": 1}, {"command": "ls", "timeout": True}, {"command": ["ls"]}):
        with pytest.raises(ArgumentError):
            from_wire(bad, ShellRunParams)


HEAVY = (
    "anthropic",
    "mcp",
    "synapse_lsp.router",
    "synapse_lsp.shell.session",  # the package itself is light: sandbox and procs
    "synapse_lsp.policy.gate",
    "synapse_lsp.agent.session",
    "synapse_lsp.lsp.updates",
    "synapse_lsp.lsp.editor_files",
    "synapse_lsp.lsp.protocol",
    "synapse_lsp.lsp.handlers",
    "synapse_lsp.extensions.registry",
)


def test_cold_start_loads_none_of_the_heavy_modules(tmp_path: Path) -> None:
    """What `initialize` needs (the server, its folders, the protocol's names) loads without
    the agent, the router, the model SDK, MCP or the typed protocol's classes."""
    script = f"""
import json, sys
from synapse_lsp.lsp.server import SynapseServer
server = SynapseServer()
server.add_folder({tmp_path.as_uri()!r})
server.workspace_for(None, "probe")
print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == []
