"""The LSP face's `FileGateway`: reads the editor's buffers, writes with `workspace/applyEdit`.

`edit` becomes minimal `TextEdit`s computed against the text the editor holds
(the synced document, unsaved changes included), sent as a versioned
`TextDocumentEdit` so an editor whose buffer moved on rejects it; `write`
becomes `CreateFile` + a full replacement. A refused edit is a `FileError`
(the tool result is an error) and nothing is written to disk behind the
editor's back. A client without `workspace.applyEdit` gets atomic disk writes.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from synapse_lsp.files import DiskFiles, FileError, atomic_write, read_disk_text

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import TextDocument

log = logging.getLogger(__name__)

APPLY_TIMEOUT = 60.0  # the editor may show a dialog; do not hang a turn forever
SYNC_TIMEOUT = 2.0  # how long to wait for the editor's didChange after an applied edit
_BLOCK = 4096
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

# (start offset, end offset, new text), offsets into the old text, sorted, disjoint
OffsetEdit = tuple[int, int, str]


# --------------------------------------------------------------------- diffing


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i + _BLOCK <= n and a[i : i + _BLOCK] == b[i : i + _BLOCK]:
        i += _BLOCK
    lo, hi = i, min(i + _BLOCK, n)
    while lo < hi:  # a[i:lo] == b[i:lo] holds; find the largest such lo
        mid = (lo + hi + 1) // 2
        if a[i:mid] == b[i:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most `limit` characters."""
    la, lb = len(a), len(b)
    n = min(limit, la, lb)
    i = 0
    while i + _BLOCK <= n and a[la - i - _BLOCK : la - i] == b[lb - i - _BLOCK : lb - i]:
        i += _BLOCK
    lo, hi = i, min(i + _BLOCK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - i] == b[lb - mid : lb - i]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _trimmed(a: str, b: str, a_start: int) -> OffsetEdit | None:
    """One edit turning a into b (a starts at `a_start` in the document), trimmed tight."""
    if a == b:
        return None
    p = _common_prefix(a, b)
    s = _common_suffix(a, b, min(len(a), len(b)) - p)
    return (a_start + p, a_start + len(a) - s, b[p : len(b) - s])


def offset_edits(old: str, new: str) -> list[OffsetEdit]:
    """Minimal-ish edits turning `old` into `new`.

    Common prefix and suffix are found in C-speed slices (a 20,000-line buffer
    costs well under a millisecond); what differs in between is diffed line by
    line with difflib, and each changed block is trimmed to the characters that
    differ — so `edit --all` touching ten places sends ten small edits.
    """
    if old == new:
        return []
    p = _common_prefix(old, new)
    s = _common_suffix(old, new, min(len(old), len(new)) - p)
    mid_old = old[p : len(old) - s]
    mid_new = new[p : len(new) - s]
    if mid_old.count("\n") <= 1 and mid_new.count("\n") <= 1:
        return [_whole_crlf(old, (p, p + len(mid_old), mid_new))]
    # Diff whole lines: widen the middle to line boundaries on both sides.
    start = old.rfind("\n", 0, p) + 1
    end_old = old.find("\n", len(old) - s)
    end_old = len(old) if end_old < 0 else end_old + 1
    tail = len(old) - end_old
    a_lines = old[start:end_old].splitlines(keepends=True)
    b_lines = new[start : len(new) - tail].splitlines(keepends=True)
    a_offsets = [start]
    for line in a_lines:
        a_offsets.append(a_offsets[-1] + len(line))
    import difflib

    edits: list[OffsetEdit] = []
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edit = _trimmed("".join(a_lines[i1:i2]), "".join(b_lines[j1:j2]), a_offsets[i1])
        if edit is not None:
            edits.append(edit)
    return [_whole_crlf(old, e) for e in edits]


def _whole_crlf(old: str, edit: OffsetEdit) -> OffsetEdit:
    """Never split a \\r\\n pair: a position between them does not exist in LSP."""
    start, end, text = edit
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start, text = start - 1, "\r" + text
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end, text = end + 1, text + "\n"
    return start, end, text


def apply_offset_edits(old: str, edits: list[OffsetEdit]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, text in edits:
        out.append(old[pos:start])
        out.append(text)
        pos = end
    out.append(old[pos:])
    return "".join(out)


class _Positions:
    """Offsets -> LSP positions (lines end at \\n, \\r\\n or \\r, as LSP says)."""

    def __init__(self, text: str, units: Callable[[str], int]) -> None:
        self.text = text
        self.units = units
        self._starts: list[int] | None = None
        if "\r" in text:
            self._starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]
        self._line = 0
        self._pos = 0

    def position(self, offset: int) -> types.Position:
        """Offsets must be asked in increasing order."""
        text = self.text
        if self._starts is None:
            self._line += text.count("\n", self._pos, offset)
            self._pos = offset
            line_start = text.rfind("\n", 0, offset) + 1
        else:
            self._line = bisect.bisect_right(self._starts, offset) - 1
            line_start = self._starts[self._line]
        segment = text[line_start:offset]
        column = len(segment) if segment.isascii() else self.units(segment)
        return types.Position(line=self._line, character=column)


def to_text_edits(
    old: str, edits: list[OffsetEdit], units: Callable[[str], int]
) -> list[types.TextEdit]:
    positions = _Positions(old, units)
    out: list[types.TextEdit] = []
    for start, end, text in edits:
        begin = positions.position(start)
        finish = positions.position(end)
        out.append(types.TextEdit(range=types.Range(start=begin, end=finish), new_text=text))
    return out


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


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
        # Set for tests and benchmarks: when the last applyEdit was sent (perf_counter).
        self.last_sent: float | None = None

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

    def _units(self) -> Callable[[str], int]:
        try:
            codec = self._server.workspace.position_codec
        except Exception:
            return utf16_units

        def count(text: str) -> int:
            return int(codec.client_num_units(text))

        return count

    # -- document lookup

    def _path_of(self, uri: str) -> Path | None:
        if uri not in self._paths:
            path: Path | None = None
            if uri.startswith("file:"):
                from pygls.uris import to_fs_path

                fs = to_fs_path(uri)
                path = Path(os.path.realpath(fs)) if fs else None
            self._paths[uri] = path
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
                await asyncio.wait_for(self._changed.wait(), remaining)
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
        uri = doc.uri if doc is not None else path.as_uri()
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
            end = to_text_edits(current, [(len(current), len(current), "")], units)[0].range.end
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
        uri = path.as_uri()
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
        self.last_sent = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                self._server.workspace_apply_edit_async(params), self._apply_timeout
            )
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
