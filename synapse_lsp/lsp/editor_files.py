"""The LSP face's `FileGateway`: reads the editor's buffers, writes with `workspace/applyEdit`.

`edit` becomes minimal `TextEdit`s (text_edits.py) computed against the text the editor holds
(the synced document, unsaved changes included), sent as a versioned
`TextDocumentEdit` so an editor whose buffer moved on rejects it; `write`
becomes `CreateFile` + a full replacement. A refused edit is a `FileError`
(the tool result is an error) and nothing is written to disk behind the
editor's back. A client without `workspace.applyEdit` gets atomic disk writes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from synapse_lsp.files import (
    DiskFiles,
    FileError,
    atomic_write,
    path_to_uri,
    read_disk_text,
    uri_to_path,
)
from synapse_lsp.lsp.text_edits import Units, end_position, offset_edits, to_text_edits, units_for

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import TextDocument

log = logging.getLogger(__name__)

APPLY_TIMEOUT = 60.0  # the editor may show a dialog; do not hang a turn forever
SYNC_TIMEOUT = 2.0  # how long to wait for the editor's didChange after an applied edit

# ------------------------------------------------------------------- gateway


@dataclass
class _Shadow:
    """What we expect the editor to hold after an applied edit it has not reported yet."""

    text: str
    version: int | None  # the synced version when we sent it; None for unopened files


class EditorFiles:
    """`FileGateway` over an LSP client; falls back to `DiskFiles` without applyEdit."""

    def __init__(
        self,
        server: LanguageServer,
        *,
        apply_timeout: float = APPLY_TIMEOUT,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self._server = server
        self._disk = DiskFiles()
        self._apply_timeout = apply_timeout
        self._sync_timeout = sync_timeout
        self._shadows: dict[Path, _Shadow] = {}
        self._paths: dict[str, Path | None] = {}
        self._changed = asyncio.Event()

    # -- client capabilities

    def _workspace_caps(self) -> types.WorkspaceClientCapabilities | None:
        try:
            caps = self._server.client_capabilities
        except Exception:
            return None
        return caps.workspace if caps is not None else None

    @property
    def can_apply(self) -> bool:
        ws = self._workspace_caps()
        return bool(ws is not None and ws.apply_edit)

    def _edit_caps(self) -> tuple[bool, bool]:
        """(documentChanges supported, CreateFile supported)."""
        ws = self._workspace_caps()
        wse = ws.workspace_edit if ws is not None else None
        if wse is None:
            return False, False
        doc_changes = bool(wse.document_changes)
        ops = wse.resource_operations or []
        create = doc_changes and any(str(getattr(o, "value", o)) == "create" for o in ops)
        return doc_changes, create

    def _units(self) -> Units:
        try:
            encoding = self._server.workspace.position_encoding
        except Exception:
            encoding = None
        return units_for(encoding)

    # -- document lookup

    def _path_of(self, uri: str) -> Path | None:
        if uri not in self._paths:
            self._paths[uri] = uri_to_path(uri)
        return self._paths[uri]

    def _document(self, path: Path) -> TextDocument | None:
        try:
            docs: dict[str, TextDocument] = self._server.workspace.text_documents
        except Exception:
            return None
        if not docs:
            return None
        real = Path(os.path.realpath(path))
        for uri, doc in docs.items():
            if self._path_of(uri) == real:
                return doc
        return None

    def open_texts(self) -> dict[Path, str]:
        """The text of every open `file:` document (unsaved changes included): what a
        checkpoint keeps for those files instead of the disk's."""
        if not self.can_apply:
            return {}
        try:
            docs: dict[str, TextDocument] = self._server.workspace.text_documents
        except Exception:
            return {}
        out: dict[Path, str] = {}
        for uri, doc in list(docs.items()):
            path = self._path_of(uri)
            if path is None:
                continue
            shadow = self._shadows.get(path)
            out[path] = (
                shadow.text if shadow is not None and doc.version == shadow.version else doc.source
            )
        return out

    def documents_changed(self, uri: str | None = None) -> None:
        """Called by the server on didOpen/didChange/didClose: wakes waiters."""
        if uri is not None:
            path = self._path_of(uri)
            if path is not None:
                shadow = self._shadows.get(path)
                doc = self._document(path)
                if shadow is not None and (doc is None or doc.version != shadow.version):
                    del self._shadows[path]
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_synced(self, path: Path) -> None:
        """Wait (bounded) until the editor reported the last applied edit of `path`."""
        deadline = time.monotonic() + self._sync_timeout
        while (shadow := self._shadows.get(Path(os.path.realpath(path)))) is not None:
            doc = self._document(path)
            if doc is None or shadow.version is None or doc.version != shadow.version:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                return

    async def document_text(self, path: Path) -> str | None:
        if not self.can_apply:
            return None
        real = Path(os.path.realpath(path))
        doc = self._document(path)
        shadow = self._shadows.get(real)
        if shadow is not None and doc is not None and doc.version == shadow.version:
            await self._wait_synced(path)
            doc = self._document(path)
            shadow = self._shadows.get(real)
        if doc is not None:
            if shadow is not None and doc.version == shadow.version:
                return shadow.text  # the editor has not reported our edit yet
            return doc.source
        return shadow.text if shadow is not None else None

    # -- changes

    def _label(self, verb: str, path: Path) -> str:
        shown = str(path)
        try:
            folders = self._server.workspace.folders
        except Exception:
            folders = {}
        for uri in folders:
            root = self._path_of(uri)
            if root is not None:
                try:
                    shown = str(Path(os.path.realpath(path)).relative_to(root))
                    break
                except ValueError:
                    continue
        return f"Synapse: {verb} {shown}"

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        if not self.can_apply:
            await self._disk.apply_change(path, before, after)
            return
        current = await self.document_text(path)
        doc = self._document(path)
        version: int | None = None
        if doc is not None and current is not None:
            version = doc.version
            if self._shadows.get(Path(os.path.realpath(path))) is not None:
                raise FileError(
                    f"{path}: the editor has not confirmed the previous edit yet; read it again"
                )
            where = "in the editor"
        else:
            current = current if current is not None else read_disk_text(path)
            where = "on disk"
        if current != before:
            raise FileError(f"{path}: changed {where} since it was read; read it again")
        edits = offset_edits(current, after)
        if not edits:
            return
        text_edits = to_text_edits(current, edits, self._units())
        uri = doc.uri if doc is not None else path_to_uri(path)
        doc_changes, _ = self._edit_caps()
        edit: types.WorkspaceEdit
        if doc_changes:
            edit = types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(
                            uri=uri, version=version
                        ),
                        edits=list(text_edits),
                    )
                ]
            )
        else:
            edit = types.WorkspaceEdit(changes={uri: text_edits})
        await self._send(edit, self._label("edit", path), path, after, version)

    async def write(self, path: Path, text: str) -> None:
        if not self.can_apply:
            await self._disk.write(path, text)
            return
        if path.is_dir():
            raise FileError(f"{path}: is a directory")
        current = await self.document_text(path)
        doc = self._document(path)
        doc_changes, can_create = self._edit_caps()
        units = self._units()
        if doc is not None and current is not None:
            if current == text:
                return
            end = end_position(current, units)
            full = types.TextEdit(
                range=types.Range(start=types.Position(line=0, character=0), end=end),
                new_text=text,
            )
            version: int | None = doc.version
            changes: list[Any] = [
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=doc.uri, version=version
                    ),
                    edits=[full],
                )
            ]
            if doc_changes:
                edit = types.WorkspaceEdit(document_changes=changes)
            else:
                edit = types.WorkspaceEdit(changes={doc.uri: [full]})
            await self._send(edit, self._label("write", path), path, text, version)
            return
        if not can_create:
            # Nobody has this file open and the editor cannot create files: a new
            # file on disk clobbers nothing the editor holds.
            atomic_write(path, text)
            return
        uri = path_to_uri(path)
        origin = types.Position(line=0, character=0)
        edit = types.WorkspaceEdit(
            document_changes=[
                types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=True)),
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=None
                    ),
                    edits=[
                        types.TextEdit(range=types.Range(start=origin, end=origin), new_text=text)
                    ],
                ),
            ]
        )
        await self._send(edit, self._label("write", path), path, text, None)

    async def _send(
        self,
        edit: types.WorkspaceEdit,
        label: str,
        path: Path,
        after: str,
        version: int | None,
    ) -> None:
        from pygls.exceptions import JsonRpcException

        params = types.ApplyWorkspaceEditParams(edit=edit, label=label)
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that comes
            # as the editor answers, and the cancelled turn would go on.
            async with asyncio.timeout(self._apply_timeout):
                result = await self._server.workspace_apply_edit_async(params)
        except TimeoutError:
            raise FileError(
                f"{path}: the editor did not answer the edit within {self._apply_timeout:g} s; "
                "check the editor before retrying"
            ) from None
        except JsonRpcException as exc:
            raise FileError(
                f"{path}: the editor refused the edit ({exc.message}); nothing was written"
            ) from None
        if result is None or not result.applied:
            reason = (result.failure_reason if result is not None else None) or "no reason given"
            raise FileError(f"{path}: the editor refused the edit ({reason}); nothing was written")
        real = Path(os.path.realpath(path))
        self._shadows[real] = _Shadow(after, version)
        doc = self._document(path)
        if doc is not None and doc.version != version:
            del self._shadows[real]  # already reported
        elif doc is not None:
            await self._wait_synced(path)
