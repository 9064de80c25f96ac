"""The protocol is written down four times: the server's types (synapse_lsp/lsp/protocol.py),
the VS Code client (vscode-client/src/protocol.ts), the Neovim plugin (nvim-client/lua) and
docs/protocol.md. Every command name and every `synapse/sessionUpdate` kind of the server
must appear in each of the other three, no client may name a command the server lacks, and
the protocol version must be the same number everywhere."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from synapse_lsp.lsp.protocol import COMMANDS, PROTOCOL_VERSION, UPDATE_KINDS

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
