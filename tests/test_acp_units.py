"""The ACP face's parts on their own: the file gateway (client buffers and disk, the
staleness check, recorded diffs), prompt blocks -> text and context, the permission
options, client MCP servers -> our config, the per-session settings layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    ImageContentBlock,
    McpServerStdio,
    ReadTextFileResponse,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
    WriteTextFileResponse,
)

from synapse_lsp.acp.agent import permission_options, prompt_text
from synapse_lsp.acp.files import ClientFiles
from synapse_lsp.acp.session import AcpChatSettings, mcp_config
from synapse_lsp.agent.turn_context import context_text
from synapse_lsp.config import Settings
from synapse_lsp.events import FileDiff
from synapse_lsp.files import ChangeRecorder, FileError
from synapse_lsp.question import Question, gate_options
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


class Editor:
    """An editor's buffers behind `fs/*` (a path it has no buffer for: not found)."""

    def __init__(self, buffers: dict[str, str]) -> None:
        self.buffers = buffers
        self.writes: list[tuple[str, str]] = []

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None
    ) -> ReadTextFileResponse:
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str
    ) -> WriteTextFileResponse | None:
        self.buffers[path] = content
        self.writes.append((path, content))
        return WriteTextFileResponse()


async def test_edits_go_to_the_client_buffer_with_a_staleness_check(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("on disk\n")
    editor = Editor({str(path): "in the buffer\n"})
    files = ChangeRecorder(ClientFiles(editor, "s1", can_read=True, can_write=True))
    assert await files.document_text(path) == "in the buffer\n"
    with pytest.raises(FileError, match="changed since it was read"):
        await files.apply_change(path, "what we read earlier\n", "new\n")
    assert editor.writes == [] and files.diffs() == ()
    await files.apply_change(path, "in the buffer\n", "changed\n")
    await files.apply_change(path, "changed\n", "changed twice\n")
    assert editor.buffers[str(path)] == "changed twice\n"
    assert path.read_text() == "on disk\n"  # the editor saves, not us
    # Two changes of one file in one command: one diff from the first old text.
    assert files.diffs() == (FileDiff(str(path), "in the buffer\n", "changed twice\n"),)


async def test_a_new_file_is_written_through_the_client_with_no_old_text(tmp_path: Path) -> None:
    editor = Editor({})
    files = ChangeRecorder(ClientFiles(editor, "s1", can_read=True, can_write=True))
    target = tmp_path / "sub" / "new.txt"
    await files.write(target, "hello\n")
    assert editor.writes == [(str(target), "hello\n")]
    assert target.parent.is_dir() and not target.exists()
    assert files.diffs() == (FileDiff(str(target), None, "hello\n"),)


class RefusingEditor(Editor):
    """An editor that answers fs/write_text_file with an error, as acpx --approve-reads."""

    async def write_text_file(
        self, session_id: str, path: str, content: str
    ) -> WriteTextFileResponse | None:
        raise RequestError.internal_error({"details": "Permission denied for fs/write_text_file"})


async def test_a_refused_write_names_the_client_its_reason_and_what_to_do(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    files = ClientFiles(RefusingEditor({}), "s1", can_read=True, can_write=True)
    with pytest.raises(FileError) as refused:
        await files.apply_change(path, "x = 1\n", "x = 2\n")
    assert refused.value.message == (
        f"{path}: the editor (the ACP client) refused to write it "
        "(Internal error: Permission denied for fs/write_text_file)"
    )
    assert refused.value.hint is not None
    assert "allow file writes in their client" in refused.value.hint
    assert path.read_text() == "x = 1\n"


async def test_a_refused_write_reaches_the_model_with_the_client_hint_not_help(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    files = ClientFiles(RefusingEditor({}), "s1", can_read=True, can_write=True)
    router = BashRouter(shell, settings, files=files)
    result = await router.route("write notes.txt hello")
    assert result.is_error
    assert "write: " in result.text and "refused to write it" in result.text
    assert result.text.endswith(
        "with acpx, `--approve-all` rather than `--approve-reads`), then retry.\n"
    )
    assert "write --help" not in result.text
    assert not (workdir / "notes.txt").exists()


async def test_without_fs_capabilities_the_disk_is_written(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    client_files = ClientFiles(None, "s1", can_read=True, can_write=True)  # no client: disk
    assert not client_files.can_read and not client_files.can_write
    files = ChangeRecorder(client_files)
    assert await files.document_text(path) is None
    await files.apply_change(path, "x = 1\n", "x = 2\n")
    assert path.read_text() == "x = 2\n"
    with pytest.raises(FileError, match="changed on disk"):
        await files.apply_change(path, "x = 1\n", "x = 3\n")
    await files.write(tmp_path / "b.py", "y\n")
    assert sorted(files.diffs(), key=lambda d: d.path) == [
        FileDiff(str(path), "x = 1\n", "x = 2\n"),
        FileDiff(str(tmp_path / "b.py"), None, "y\n"),
    ]


def test_prompt_blocks_become_text_and_context(tmp_path: Path) -> None:
    a_py = (tmp_path / "a.py").as_uri()
    text, context = prompt_text(
        [
            TextContentBlock(type="text", text="Fix"),
            ResourceContentBlock(type="resource_link", uri=a_py, name="a.py"),
            TextContentBlock(type="text", text=" using"),
            EmbeddedResourceContentBlock(
                type="resource",
                resource=TextResourceContents(uri=(tmp_path / "b.py").as_uri(), text="B = 2\n"),
            ),
            ImageContentBlock(type="image", data="AAAA", mime_type="image/png"),
        ]
    )
    assert text == "Fix @a.py using @b.py [an image, not supported by this agent]"
    assert context is not None
    shown = context_text(context)
    assert shown is not None
    assert f"Referenced: {tmp_path / 'a.py'} (a.py)" in shown
    assert f"Attached {tmp_path / 'b.py'}:\n```\nB = 2\n\n```" in shown
    assert prompt_text([TextContentBlock(type="text", text="just text")]) == ("just text", None)


def test_permission_options_map_the_gate_answers() -> None:
    always = "Always allow `git push` here"

    def offered(always: str | None) -> list[tuple[str, str]]:
        options = gate_options(once_only=False, with_path=False, always=always)
        question = Question(None, "git push", "/", ("git push",), "why", options, "m")
        return [(o.option_id, o.kind) for o in permission_options(question)]

    assert offered(always) == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
        ("reject_always", "reject_always"),
    ]
    # Without a prefix to remember, allow_always is "Allow for this session".
    assert offered(None) == [
        ("allow_once", "allow_once"),
        ("allow_session", "allow_always"),
        ("reject_once", "reject_once"),
    ]


def test_client_mcp_servers_become_config_entries() -> None:
    table, problems = mcp_config(
        [
            McpServerStdio(
                name="db", command="/bin/db", args=["--ro"], env=[EnvVariable(name="K", value="v")]
            ),
            HttpMcpServer(
                type="http",
                name="web",
                url="https://example.test/mcp",
                headers=[HttpHeader(name="Authorization", value="Bearer t")],
            ),
            SseMcpServer(type="sse", name="old", url="https://example.test/sse", headers=[]),
        ]
    )
    assert table == {
        "db": {"command": "/bin/db", "args": ["--ro"], "env": {"K": "v"}},
        "web": {
            "type": "http",
            "url": "https://example.test/mcp",
            "headers": {"Authorization": "Bearer t"},
        },
    }
    assert problems == ["MCP server 'old': transport 'sse' is not supported"]


def test_session_settings_layer_follows_its_base(tmp_path: Path) -> None:
    base: dict[str, Any] = {"value": Settings(synapse_home=tmp_path, max_turns=7)}
    layer = AcpChatSettings(lambda: base["value"], {"sandbox": "read-only"})
    assert layer().sandbox == "read-only" and layer().max_turns == 7
    base["value"] = Settings(synapse_home=tmp_path, max_turns=9)
    assert layer().max_turns == 9 and layer().sandbox == "read-only"
    problems = layer.update({"synapseHome": "/elsewhere", "sandbox": "nope"})
    assert layer().synapse_home == tmp_path and layer().sandbox == "read-only"
    assert any("synapseHome" in p for p in problems) and any("nope" in p for p in problems)
    layer.update({"sandbox": "full-access"})
    assert layer().sandbox == "full-access"


def test_the_early_initialize_answer_is_the_sdk_answer(tmp_path: Path) -> None:
    import acp
    from acp.schema import InitializeResponse

    from synapse_lsp.acp import handshake

    assert handshake.PROTOCOL_VERSION == acp.PROTOCOL_VERSION
    for has_key in (True, False):
        plain = handshake.initialize_result(Settings(synapse_home=tmp_path), has_key=has_key)
        model = InitializeResponse.model_validate(plain)
        # As the SDK puts it on the wire (acp.connection: exclude_none, exclude_unset).
        wire = model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
        assert wire == plain
    assert handshake.early_initialize({"id": 1, "method": "initialize", "params": {}}) is None
    assert (
        handshake.early_initialize(
            {"id": 1, "method": "initialize", "params": {"protocolVersion": True}}
        )
        is None
    )
    assert handshake.early_initialize(
        {"id": 1, "method": "initialize", "params": {"protocolVersion": 7}}
    ) == {"protocolVersion": 7}
