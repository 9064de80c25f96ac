"""A pytest-lsp client that behaves like an editor: it holds documents, applies (or
refuses) `workspace/applyEdit`, answers permission asks and records session updates.

Used by tests/test_server*.py; the server runs as a real subprocess over stdio.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

_BREAK = re.compile(r"\r\n|\r|\n")


def _offset(text: str, pos: types.Position) -> int:
    """LSP position (UTF-16 units) -> offset into `text`."""
    starts = [0] + [m.end() for m in _BREAK.finditer(text)]
    if pos.line >= len(starts):
        return len(text)
    start = starts[pos.line]
    end = starts[pos.line + 1] if pos.line + 1 < len(starts) else len(text)
    units = 0
    i = start
    while i < end and units < pos.character:
        if text[i] in "\r\n":
            break
        units += 2 if ord(text[i]) > 0xFFFF else 1
        i += 1
    return i


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    spans = sorted(
        ((_offset(text, e.range.start), _offset(text, e.range.end), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@dataclass
class Doc:
    version: int
    text: str


@dataclass
class Editor:
    """The client-side state a test inspects."""

    client: LanguageClient
    docs: dict[str, Doc] = field(default_factory=dict)
    refuse: str | None = None  # a failure reason: refuse every applyEdit
    answer: str | None = "Allow once"  # reply to window/showMessageRequest
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    asks: list[types.ShowMessageRequestParams] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    edit_event: asyncio.Event = field(default_factory=asyncio.Event)
    init_result: types.InitializeResult | None = None
    saves: list[list[str]] = field(default_factory=list)  # synapse/saveDocuments asked
    # synapse/requestPermission: the questions asked (params as sent), the option chosen
    permission_requests: list[dict[str, Any]] = field(default_factory=list)
    option: str | None = "allow_once"

    def _save(self, params: Any) -> dict[str, Any]:
        """`synapse/saveDocuments`: write each open document's text to its file."""
        uris = list(params.uris if hasattr(params, "uris") else params["uris"])
        self.saves.append(uris)
        saved = []
        for uri in uris:
            doc = self.docs.get(uri)
            if doc is not None:
                Path(uri.removeprefix("file://")).write_text(doc.text)
                saved.append(uri)
        return {"saved": saved}

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        uri = path.as_uri()
        if text is None:
            text = path.read_text()
        self.docs[uri] = Doc(version, text)
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="plaintext", version=version, text=text
                )
            )
        )
        return uri

    def type_text(self, uri: str, text: str) -> None:
        """The user edits the buffer (unsaved): append `text`, sync incrementally."""
        doc = self.docs[uri]
        end = _end_position(doc.text)
        doc.text += text
        doc.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=doc.version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=end, end=end), text=text
                    )
                ],
            )
        )

    async def command(self, name: str, args: dict[str, Any] | None = None) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=[args or {}])
        )

    def session_updates(self, session_id: str) -> list[dict[str, Any]]:
        return [u["update"] for u in self.updates if u["sessionId"] == session_id]

    def _apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.edits.append(params)
        self.edit_event.set()
        if self.refuse is not None:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=self.refuse)
        for change in params.edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                self.created.append(change.uri)
                self.docs[change.uri] = Doc(0, "")
                continue
            if not isinstance(change, types.TextDocumentEdit):
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="unsupported")
            uri = change.text_document.uri
            doc = self.docs.get(uri)
            if doc is None:  # not open: the editor loads it from disk, unsaved
                doc = Doc(0, Path(uri.removeprefix("file://")).read_text())
                self.docs[uri] = doc
            version = change.text_document.version
            if version is not None and version != doc.version:
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason=f"version {version} != {doc.version}"
                )
            edits = [e for e in change.edits if isinstance(e, types.TextEdit)]
            doc.text = apply_edits(doc.text, edits)
            doc.version += 1
            if version is not None:  # an open document: tell the server, like an editor
                self.client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(
                            uri=uri, version=doc.version
                        ),
                        content_changes=[
                            types.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                            for e in sorted(
                                edits,
                                key=lambda e: (e.range.start.line, e.range.start.character),
                                reverse=True,
                            )
                        ],
                    )
                )
        return types.ApplyWorkspaceEditResult(applied=True)


def _end_position(text: str) -> types.Position:
    lines = _BREAK.split(text)
    last = lines[-1]
    return types.Position(line=len(lines) - 1, character=len(last.encode("utf-16-le")) // 2)


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["SYNAPSE_HOME"] = str(home)
    env.update(extra or {})
    return env


@asynccontextmanager
async def editor(
    home: Path,
    folders: list[Path],
    *,
    apply_edit: bool = True,
    init_options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    capabilities: str = "visual-studio-code",
    configuration: dict[str, Any] | None = None,
    position_encodings: list[str] | None = None,
    save_documents: bool = False,
    request_permission: bool = False,
) -> AsyncIterator[Editor]:
    """Start `python -m synapse_lsp` and initialize it with `folders` (`position_encodings`:
    what the client offers; the test client itself applies edits in UTF-16)."""
    client = pytest_lsp.make_test_lsp_client()
    if configuration is not None:
        client.set_configuration(configuration, section="synapse")
    state = Editor(client)

    @client.feature(types.WORKSPACE_APPLY_EDIT)  # type: ignore[untyped-decorator]  # pygls
    def _apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return state._apply(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)  # type: ignore[untyped-decorator]  # pygls
    def _ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        state.asks.append(params)
        return types.MessageActionItem(title=state.answer) if state.answer else None

    @client.feature("synapse/sessionUpdate")  # type: ignore[untyped-decorator]  # pygls
    def _update(params: Any) -> None:
        state.updates.append(_plain(params))

    if save_documents:

        @client.feature("synapse/saveDocuments")  # type: ignore[untyped-decorator]  # pygls
        def _save(params: Any) -> dict[str, Any]:
            return state._save(params)

    if request_permission:

        @client.feature("synapse/requestPermission")  # type: ignore[untyped-decorator]  # pygls
        def _permission(params: Any) -> dict[str, Any]:
            state.permission_requests.append(_plain(params))
            return {"optionId": state.option}

    await client.start_io(sys.executable, "-m", "synapse_lsp", env=server_env(home, env))
    caps = pytest_lsp.client_capabilities(capabilities)
    if not apply_edit and caps.workspace is not None:
        caps.workspace.apply_edit = False
    ours = {"saveDocuments": save_documents, "requestPermission": request_permission}
    if any(ours.values()):
        caps.experimental = {"synapse": {k: True for k, on in ours.items() if on}}
    if position_encodings is not None:
        caps.general = types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind(e) for e in position_encodings]
        )
    state.init_result = await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            process_id=os.getpid(),
            root_uri=folders[0].as_uri() if folders else None,
            workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
            initialization_options=init_options,
        )
    )
    try:
        yield state
    finally:
        if client._server is not None and client._server.returncode is None:
            await client.shutdown_session()


def _plain(value: Any) -> Any:
    """Notification params arrive as dicts or attrs-like objects; make them plain."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "_asdict"):  # pygls turns unknown JSON objects into namedtuples
        return _plain(value._asdict())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


def descendants(pid: int) -> set[int]:
    """All live descendant process ids of `pid` (from /proc)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def change_folders(ed: Editor, added: list[Path], removed: list[Path]) -> None:
    ed.client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in added],
                removed=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in removed],
            )
        )
    )


async def folder_uris(ed: Editor) -> list[str]:
    status = await ed.command("synapse.status")
    return [w["uri"] for w in status["workspaces"]]


async def add_folder(ed: Editor, path: Path) -> None:
    """Open `path` as a workspace folder of a running server; return once it is listed."""
    change_folders(ed, [path], [])
    for _ in range(500):
        if path.as_uri() in await folder_uris(ed):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"folder {path} was not added")


async def remove_folder(ed: Editor, path: Path) -> None:
    """Close `path` (its sessions, shells and MCP children); return once it is gone."""
    change_folders(ed, [], [path])
    for _ in range(500):
        if path.as_uri() not in await folder_uris(ed):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"folder {path} was not removed")


def reset(ed: Editor) -> None:
    """Forget what earlier tests on a shared server did to the client-side state."""
    ed.refuse = None
    ed.answer = "Allow once"
    ed.edits.clear()
    ed.created.clear()
    ed.asks.clear()
    ed.edit_event.clear()
