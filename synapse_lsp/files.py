"""Where file built-ins read and write: the disk, or (in the LSP face) the editor's buffers.

`FileGateway` is the seam: `read`/`edit`/`write` call it and never open files
for writing themselves. `DiskFiles` writes atomically (temp file + rename, mode
kept). The LSP server supplies a gateway that answers from open documents and
sends `workspace/applyEdit` instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from synapse_lsp.errors import SynapseError


class FileError(SynapseError):
    """A file operation failed; the message is written for the model to read."""


class FileGateway(Protocol):
    async def document_text(self, path: Path) -> str | None:
        """The text an editor holds for `path` (unsaved changes included), or None."""
        ...

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        """Change `path` from `before` to `after`.

        `before` is what the caller read; if the file (or buffer) no longer
        holds it, raise FileError and change nothing.
        """
        ...

    async def write(self, path: Path, text: str) -> None:
        """Create or fully replace `path`, creating parent directories."""
        ...


def uri_to_path(uri: str, *, resolve: bool = True) -> Path | None:
    """The path of a `file:` URI (percent-decoding, `localhost`), symlinks resolved unless
    `resolve=False`; None for any other scheme (`untitled:`, `https:`...)."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return None
    path = unquote(parts.path)
    if parts.netloc and parts.netloc != "localhost":
        path = f"//{parts.netloc}{path}"  # a UNC share
    elif os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
        path = path[1:]  # /C:/x -> C:/x
    if not path:
        return None
    return Path(os.path.realpath(path)) if resolve else Path(path)


def path_to_uri(path: Path | str) -> str:
    """A `file:` URI for a path (made absolute, percent-encoded as editors expect)."""
    return Path(os.path.abspath(path)).as_uri()  # noqa: PTH100 (normalises `..`, unlike absolute())


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_disk_text(path: Path) -> str:
    """Whole file as UTF-8 text, with errors a model can act on."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FileError(f"{path}: is a directory") from None
    except PermissionError:
        raise FileError(f"{path}: permission denied") from None
    except OSError as exc:
        raise FileError(f"{path}: {exc.strerror or exc}") from None
    if b"\0" in data[:8192]:
        raise FileError(f"{path}: binary file, not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileError(f"{path}: not valid UTF-8 (byte {exc.start})") from None


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so a crash leaves either the old or the new file, never half.

    Parent directories are created; an existing file's permission bits are kept.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise FileError(f"{path.parent}: exists and is not a directory") from None
    except PermissionError:
        raise FileError(f"{path.parent}: permission denied") from None
    if path.is_dir():
        raise FileError(f"{path}: is a directory")
    mode: int | None = None
    with contextlib.suppress(FileNotFoundError):
        mode = stat.S_IMODE(path.stat().st_mode)
    if path.exists() and not os.access(path, os.W_OK):
        raise FileError(f"{path}: permission denied (file is not writable)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".synapse-tmp", dir=path.parent)
    except PermissionError:
        raise FileError(f"{path.parent}: permission denied") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


class DiskFiles:
    """The gateway with no editor: plain, atomic disk writes."""

    async def document_text(self, path: Path) -> str | None:
        return None

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        current = read_disk_text(path)
        if content_hash(current) != content_hash(before):
            raise FileError(f"{path}: changed on disk since it was read; read it again")
        atomic_write(path, after)

    async def write(self, path: Path, text: str) -> None:
        atomic_write(path, text)
