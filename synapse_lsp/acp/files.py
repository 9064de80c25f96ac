"""The ACP face's `FileGateway`: the client's buffers when it offers `fs/*`, else the disk.

With `fs.readTextFile`, `read` and `edit` see what the editor holds (unsaved text
included); with `fs.writeTextFile`, `edit` and `write` land in the editor (the
ACP analogue of the LSP face's `workspace/applyEdit`). `apply_change` keeps the
staleness check: the file is read again (through the client when it can) and
nothing is written unless it still holds what the edit was computed from. Without
the capabilities it is `DiskFiles`: atomic writes under the file lock.

The diff a tool call's update carries is not made here: the router records what
goes through any gateway (`files.ChangeRecorder`), for every face alike.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Protocol

from acp.schema import ReadTextFileResponse, WriteTextFileResponse

from synapse_lsp.files import DiskFiles, FileError, content_hash, make_parents, read_disk_text

log = logging.getLogger(__name__)

CLIENT_TIMEOUT = 60.0  # a client may show a dialog; never hang a turn forever


class FsClient(Protocol):
    """The part of the SDK's client connection the gateway uses."""

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None
    ) -> ReadTextFileResponse: ...

    async def write_text_file(
        self, session_id: str, path: str, content: str
    ) -> WriteTextFileResponse | None: ...


def _reason(exc: Exception) -> str:
    """A client's error as it said it: the JSON-RPC message and its `data` details
    (acpx: "Internal error: Permission denied for fs/write_text_file")."""
    reason = str(exc) or type(exc).__name__
    data = getattr(exc, "data", None)
    details = (data.get("details") or data.get("message")) if isinstance(data, dict) else data
    if isinstance(details, str) and details.strip() and details.strip() not in reason:
        reason = f"{reason}: {details.strip()}"
    return reason


class ClientFiles:
    """`FileGateway` for one ACP session."""

    def __init__(
        self,
        client: FsClient | None,
        session_id: str,
        *,
        can_read: bool,
        can_write: bool,
        timeout: float = CLIENT_TIMEOUT,
    ) -> None:
        self._client = client
        self.session_id = session_id
        self.can_read = bool(can_read and client is not None)
        self.can_write = bool(can_write and client is not None)
        self._timeout = timeout
        self._disk = DiskFiles()
        # What we last wrote into the client's buffers: ACP cannot list what an editor
        # holds, so a checkpoint keeps these texts for those files (`open_texts`).
        self._written: dict[Path, str] = {}

    def open_texts(self) -> dict[Path, str]:
        """The text of files the agent wrote through the client (perhaps unsaved there)."""
        return dict(self._written)

    async def _client_text(self, path: Path) -> str | None:
        """The client's text of `path`; None when it has none (no such file) or cannot say."""
        if not self.can_read or self._client is None:
            return None
        try:
            async with asyncio.timeout(self._timeout):  # not wait_for: it can drop a cancel
                response = await self._client.read_text_file(self.session_id, str(path))
        except TimeoutError:
            raise FileError(f"{path}: the editor did not answer fs/read_text_file") from None
        except Exception as exc:  # a RequestError (no such file...) or a broken connection
            log.info("fs/read_text_file %s: %s", path, exc)
            return None
        return response.content

    async def document_text(self, path: Path) -> str | None:
        return await self._client_text(path)

    async def _current(self, path: Path) -> str | None:
        text = await self._client_text(path)
        if text is not None:
            return text
        try:
            return read_disk_text(path)
        except FileError:
            return None

    async def _client_write(self, path: Path, text: str) -> None:
        assert self._client is not None
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.write_text_file(self.session_id, str(path), text)
        except TimeoutError:
            raise FileError(
                f"{path}: the editor did not answer fs/write_text_file; nothing changed"
            ) from None
        except Exception as exc:  # a RequestError (the client's refusal) or a broken connection
            raise FileError(
                f"{path}: the editor (the ACP client) refused to write it ({_reason(exc)})",
                hint="Hint: The user's ACP client refused the write (its reason is above), "
                "so `--help` cannot help: ask the user to allow file writes in their client "
                "(its permission prompt or settings; with acpx, `--approve-all` rather than "
                "`--approve-reads`), then retry.",
            ) from None

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        if not self.can_write:
            await self._disk.apply_change(path, before, after)
            return
        current = await self._current(path)
        if current is None or content_hash(current) != content_hash(before):
            raise FileError(
                f"{path}: changed since it was read (in the editor or on disk); "
                "nothing changed: read it again and redo the edit"
            )
        await self._client_write(path, after)
        self._written[path] = after

    async def write(self, path: Path, text: str) -> None:
        if not self.can_write:
            await self._disk.write(path, text)
        else:
            make_parents(path)  # an editor may not create directories
            await self._client_write(path, text)
            self._written[path] = text

    # -- buffers and disk (docs/acp.md "Buffers and disk")

    def _not_on_disk(self) -> list[Path]:
        """Files the agent wrote through the client whose disk text is not that text
        (the client kept them in an unsaved buffer); saved ones are forgotten here."""
        pending: list[Path] = []
        for path, text in list(self._written.items()):
            try:
                on_disk: str | None = read_disk_text(path)
            except FileError:
                on_disk = None
            if on_disk is not None and on_disk.rstrip("\r\n") == text.rstrip("\r\n"):
                continue  # the client put it on disk
            pending.append(path)
        return pending

    async def reconcile(self) -> str:
        """Before a command that reads the disk: ACP has no request to save a buffer,
        so the model is told which of its edits the client has not put on disk."""
        pending = self._not_on_disk()
        if not pending:
            return ""
        shown = ", ".join(str(p) for p in pending)
        return (
            f"\n[{shown}: your edits are in the editor but not on disk (the ACP client "
            "kept them unsaved); programs read the old text from disk]\n"
        )

    def unsaved_note(self) -> str:
        """After an edit: which files the client holds unsaved (none when it saved)."""
        pending = self._not_on_disk()
        if not pending:
            return ""
        return (
            f"\n[{', '.join(str(p) for p in pending)}: changed in the editor, not on disk; "
            "programs read the old text until the user saves it]\n"
        )
