"""The protocol has one source: the server's classes (synapse_lsp/lsp/protocol.py). From
them `synapse_lsp.lsp.protocol_gen` generates the VS Code client's types
(vscode-client/src/protocol.ts), the Neovim plugin's names and field list
(nvim-client/lua/synapse/protocol.lua) and the tables of docs/protocol.md, each between
`BEGIN GENERATED` / `END GENERATED` markers. The committed regions must be what the
generator gives now (the failure shows the diff and the command that fixes it). Besides:
every command name and `synapse/sessionUpdate` kind of the server appears in each of the
other three, no client names a command the server lacks, and the protocol version is the
same number everywhere."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import attrs
import pytest

from synapse_lsp.lsp import protocol_gen, protocol_shapes
from synapse_lsp.lsp.protocol import (
    COMMANDS,
    PROTOCOL_VERSION,
    UPDATE_KINDS,
    DiffContent,
    TextContent,
    ToolContent,
)
from synapse_lsp.lsp.wire import Wire, omitted

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "vscode-client" / "src" / "protocol.ts"
NVIM = ROOT / "nvim-client" / "lua"
DOC = ROOT / "docs" / "protocol.md"

NAMES = sorted(COMMANDS) + sorted(UPDATE_KINDS)
COMMAND_NAME = re.compile(r"""["'`](synapse\.(?:session|shell|tools)\.\w+|synapse\.status)["'`]""")


def missing(names: list[str], text: str) -> list[str]:
    """The names that do not appear in `text` as a quoted string or a code span."""
    return [n for n in names if not re.search(rf"""["'`]{re.escape(n)}["'`]""", text)]


def lua_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(NVIM.rglob("*.lua")))


SOURCES: dict[str, Callable[[], str]] = {
    "vscode-client/src/protocol.ts": lambda: VSCODE.read_text(encoding="utf-8"),
    "nvim-client/lua": lua_text,
    "docs/protocol.md": lambda: DOC.read_text(encoding="utf-8"),
}


def test_the_server_declares_commands_and_update_kinds() -> None:
    assert len(COMMANDS) == 14 and "synapse.session.prompt" in COMMANDS
    assert len(UPDATE_KINDS) == 9 and "tool_call_update" in UPDATE_KINDS


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_command_and_update_kind_appears(source: str) -> None:
    assert missing(NAMES, SOURCES[source]()) == [], f"{source} lacks these protocol names"


@pytest.mark.parametrize("source", ["vscode-client/src/protocol.ts", "nvim-client/lua"])
def test_clients_name_no_command_the_server_lacks(source: str) -> None:
    named = set(COMMAND_NAME.findall(SOURCES[source]()))
    assert named - set(COMMANDS) == set()


def test_the_protocol_version_is_the_same_everywhere() -> None:
    ts = re.search(r"export const PROTOCOL_VERSION = (\d+);", VSCODE.read_text(encoding="utf-8"))
    lua = re.search(r"M\.VERSION = (\d+)", (NVIM / "synapse" / "protocol.lua").read_text())
    doc = re.search(r'"protocolVersion": (\d+)', DOC.read_text(encoding="utf-8"))
    assert ts and lua and doc
    assert [int(ts[1]), int(lua[1]), int(doc[1])] == [PROTOCOL_VERSION] * 3


def test_the_check_fails_when_a_name_is_missing() -> None:
    doc = DOC.read_text(encoding="utf-8")
    without = doc.replace("`synapse.tools.refresh`", "").replace('"synapse.tools.refresh"', "")
    assert missing(NAMES, without) == ["synapse.tools.refresh"]
    assert missing(["plan"], "the plan is ready") == ["plan"]  # prose is not a mention


# ------------------------------------------------------------ generated regions


def test_the_generated_regions_are_what_the_classes_give() -> None:
    diffs = protocol_gen.stale(ROOT)
    assert diffs == {}, f"stale generated regions; run `{protocol_gen.COMMAND}`:\n\n" + "\n".join(
        diffs.values()
    )


def test_every_region_is_in_its_file() -> None:
    for region in protocol_gen.REGIONS:
        begin, end = region.markers()
        text = (ROOT / region.path).read_text(encoding="utf-8")
        assert text.count(begin) == 1 and text.count(end) == 1, region


def copy_of_the_generated_files(tmp_path: Path) -> Path:
    for region in protocol_gen.REGIONS:
        (tmp_path / region.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / region.path, tmp_path / region.path)
    return tmp_path


def test_the_check_shows_a_hand_edit_inside_a_region_and_write_undoes_it(tmp_path: Path) -> None:
    root = copy_of_the_generated_files(tmp_path)
    ts = root / "vscode-client" / "src" / "protocol.ts"
    lua = root / "nvim-client" / "lua" / "synapse" / "protocol.lua"
    ts.write_text(ts.read_text().replace("  isError: boolean;\n", "  isError?: boolean;\n", 1))
    lua.write_text(lua.read_text() + "-- hand-written, outside the region: kept\n")
    diffs = protocol_gen.stale(root)
    assert list(diffs) == ["vscode-client/src/protocol.ts"]
    assert "-  isError?: boolean;\n+  isError: boolean;" in diffs["vscode-client/src/protocol.ts"]
    assert protocol_gen.main(["--root", str(root)]) == 1
    assert protocol_gen.main(["--root", str(root), "--write"]) == 0
    assert protocol_gen.stale(root) == {}
    assert lua.read_text().endswith("-- hand-written, outside the region: kept\n")


def test_a_file_without_its_markers_is_an_error(tmp_path: Path) -> None:
    root = copy_of_the_generated_files(tmp_path)
    doc = root / "docs" / "protocol.md"
    doc.write_text(doc.read_text().replace("<!-- END GENERATED updates -->", ""))
    with pytest.raises(ValueError, match="END GENERATED updates"):
        protocol_gen.stale(root)


@attrs.define(kw_only=True)
class Sample(Wire):
    name: str
    note: str | None = omitted()
    size: int | None
    mode: Literal["a", "b"] = "a"
    items: list[TextContent]
    blocks: list[ToolContent | DiffContent] | None = omitted()
    ratio: float | None = None


def test_how_a_field_is_written() -> None:
    sent_by_server = {f.key: f.ts() for f in protocol_shapes.shape(Sample, "server").fields}
    assert sent_by_server == {
        "name": "name: string",
        "note": "note?: string",  # omitted: absent, never null
        "size": "size: number | null",
        "mode": "mode: 'a' | 'b'",  # a default the server still sends
        "items": "items: TextContent[]",
        "blocks": "blocks?: (ToolContent | DiffContent)[]",
        "ratio": "ratio: number | null",
    }
    sent_by_client = {f.key: f.ts() for f in protocol_shapes.shape(Sample, "client").fields}
    assert sent_by_client["mode"] == "mode?: 'a' | 'b'"  # a default: the client may leave it
    assert sent_by_client["ratio"] == "ratio?: number"  # null counts as absent
    assert sent_by_client["size"] == "size: number | null"


def test_classes_are_sent_one_way_and_aliases_keep_their_names() -> None:
    sent_by = {cls.__name__: d for cls, d in protocol_shapes.directions().items()}
    assert sent_by["PromptContext"] == sent_by["SaveDocumentsResult"] == "client"
    assert sent_by["TokenUsage"] == sent_by["SaveDocumentsParams"] == "server"
    ts = protocol_gen.typescript()
    assert "  stopReason: StopReason;" in ts
    assert "  kind: ToolKind;" in ts  # shown_as(ToolKind): a str in Python
    assert "  update: SessionUpdate;" in ts
    assert "/** the system prompt */\n  system: number;" in ts  # the classes' comments go along
