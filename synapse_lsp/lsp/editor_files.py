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
import contextlib
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
SAVE_TIMEOUT = 10.0  # how long a command waits for the editor to save the agent's edits
SYNC_TIMEOUT = 2.0  # how long to wait for the editor's didChange after an applied edit

# ------------------------------------------------------------------- gateway


def _same(one: str | None, other: str | None) -> bool:
    """Two texts of one file, the final newlines aside (an editor's end-of-line
    handling may add or drop one: Neovim's 'fixendofline')."""
    if one is None or other is None:
        return one is other
    return one.rstrip("\r\n") == other.rstrip("\r\n")


def _unsaved_note(
    unsaved: dict[Path, bool], can_save: bool, trouble: str, *, after_edit: bool = False
) -> str:
    """What the model is told about files whose editor text is not on disk."""
    if not unsaved:
        return ""
    theirs = sorted(str(p) for p, user_edits in unsaved.items() if user_edits)
    ours = sorted(str(p) for p, user_edits in unsaved.items() if not user_edits)
    parts: list[str] = []
    if ours:
        if after_edit and can_save:
            parts.append(
                f"{', '.join(ours)}: changed in the editor, not saved yet; the editor saves "
                "it before the next command runs"
            )
        else:
            why = trouble or (
                "the editor cannot save it for Synapse" if not can_save else "it was not saved"
            )
            parts.append(
                f"{', '.join(ours)}: your edits are in the editor but not on disk ({why}); "
                "programs read the old text from disk"
            )
    if theirs:
        parts.append(
            f"{', '.join(theirs)}: the editor also holds the user's own unsaved edits, so "
            "it is not saved unasked; programs read the old text from disk (ask the user "
            "to save it)"
        )
    return "\n[" + "; ".join(parts) + "]\n"


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
        # Files the agent changed in the editor that may not be on disk yet, and whether
        # the user had unsaved edits of their own in that buffer before (never saved
        # unasked): `reconcile` saves the others before a command reads the disk.
        self._agent_changed: dict[Path, bool] = {}
        self._agent_text: dict[Path, str] = {}  # what the agent's last edit left there
        self._sending: dict[Path, str] = {}  # an edit sent, not answered: its text
        self._told_cannot_save = False

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

    @property
    def can_save(self) -> bool:
        """The client saves documents when asked (`synapse/saveDocuments`): it says so
        in `capabilities.experimental.synapse.saveDocuments`."""
        try:
            caps = self._server.client_capabilities
        except Exception:
            return False
        experimental = caps.experimental if caps is not None else None
        ours = experimental.get("synapse") if isinstance(experimental, dict) else None
        return isinstance(ours, dict) and ours.get("saveDocuments") is True

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
        buffer_before = current if where == "in the editor" else None
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
        self._note_changed(path, buffer_before, after)

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
            self._note_changed(path, current, text)
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
        self._note_changed(path, None, text)

    # -- buffers and disk agree before a command runs (docs/protocol.md)

    def _note_changed(self, path: Path, buffer_before: str | None, after: str) -> None:
        """The agent changed `path` in the editor to `after`; `buffer_before` is what the
        buffer held (None: the file was not open), to tell the user's own unsaved edits."""
        real = Path(os.path.realpath(path))
        self._agent_text[real] = after
        if real in self._agent_changed:
            return  # the first edit decided whose unsaved text the buffer held
        user_edits = False
        if buffer_before is not None:
            try:
                user_edits = not _same(read_disk_text(real), buffer_before)
            except (FileError, OSError):
                user_edits = False  # a new file: nothing of the user's on disk
        self._agent_changed[real] = user_edits

    async def _unsaved(self) -> dict[Path, bool]:
        """The agent-changed files whose editor text differs from the disk."""
        unsaved: dict[Path, bool] = {}
        for real, user_edits in list(self._agent_changed.items()):
            await self._wait_synced(real)
            buffer = await self.document_text(real)
            try:
                disk: str | None = read_disk_text(real)
            except (FileError, OSError):
                disk = None
            if buffer is None or _same(buffer, disk):
                self._agent_changed.pop(real, None)  # on disk (or no longer in the editor)
                self._agent_text.pop(real, None)
                continue
            # The user typed in it since the agent's edit: their text, not saved unasked.
            unsaved[real] = user_edits or not _same(buffer, self._agent_text.get(real))
        return unsaved

    async def reconcile(self) -> str:
        """Before a command that reads the disk: the documents the agent changed are
        saved by the editor (`synapse/saveDocuments`, bounded) unless their buffers
        hold the user's own unsaved edits too. What still differs is returned as a note
        for the model ("" when the disk has everything)."""
        if not self._agent_changed:
            return ""
        unsaved = await self._unsaved()
        savable = [p for p, user_edits in unsaved.items() if not user_edits]
        trouble = ""
        if savable and self.can_save:
            trouble = await self._ask_to_save(savable)
            unsaved = await self._unsaved()
        elif savable and not self._told_cannot_save:
            self._told_cannot_save = True
            with contextlib.suppress(Exception):
                self._server.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Warning,
                        message="Synapse: this editor cannot save documents for Synapse "
                        "(synapse/saveDocuments), so the agent's commands read the disk, "
                        "not its unsaved edits; it is told which files differ.",
                    )
                )
        return _unsaved_note(unsaved, self.can_save, trouble)

    def unsaved_note(self) -> str:
        """After an edit: which of the agent's files are not on disk yet (a note for the
        model; "" when none)."""
        pending = dict(self._agent_changed)
        return _unsaved_note(pending, self.can_save, "", after_edit=True) if pending else ""

    async def _ask_to_save(self, paths: list[Path]) -> str:
        from pygls.exceptions import JsonRpcException

        from synapse_lsp.lsp.names import SAVE_DOCUMENTS
        from synapse_lsp.lsp.protocol import SaveDocumentsParams
        from synapse_lsp.lsp.wire import to_wire

        uris = []
        for path in paths:
            doc = self._document(path)
            uris.append(doc.uri if doc is not None else path_to_uri(path))
        try:
            async with asyncio.timeout(SAVE_TIMEOUT):
                await self._server.protocol.send_request_async(
                    SAVE_DOCUMENTS, to_wire(SaveDocumentsParams(uris=uris))
                )
        except TimeoutError:
            return f"the editor did not save them within {SAVE_TIMEOUT:g} s"
        except JsonRpcException as exc:
            return f"the editor did not save them ({exc.message})"
        return ""

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
        real = Path(os.path.realpath(path))
        self._sending[real] = after  # its didChange may come before the editor's answer
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
        finally:
            self._sending.pop(real, None)
        if result is None or not result.applied:
            reason = (result.failure_reason if result is not None else None) or "no reason given"
            raise FileError(f"{path}: the editor refused the edit ({reason}); nothing was written")
        self._shadows[real] = _Shadow(after, version)
        doc = self._document(path)
        if doc is not None and doc.version != version:
            del self._shadows[real]  # already reported
        elif doc is not None:
            await self._wait_synced(path)


def agent_wrote(files: EditorFiles, path: Path, text: str) -> bool:
    """`text` is what an edit of the agent's leaves in `path` (the editor's echo)."""
    real = Path(os.path.realpath(path))
    shadow = files._shadows.get(real)
    ours = (files._agent_text.get(real), files._sending.get(real), shadow and shadow.text)
    return any(isinstance(t, str) and _same(t, text) for t in ours)
