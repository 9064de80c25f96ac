"""Where file built-ins read and write: the disk, or (in the LSP face) the editor's buffers.

`FileGateway` is the seam: `read`/`edit`/`write` call it and never open files
for writing themselves. `DiskFiles` writes atomically (temp file + rename, mode
kept, a symlink's target written and the link kept) and does every
read-compare-write under `file_lock`, an advisory lock that other Synapse
processes honour too. The LSP server supplies a gateway that answers from open
documents and sends `workspace/applyEdit` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fcntl
import hashlib
import os
import stat
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from synapse_lsp.errors import SynapseError
from synapse_lsp.events import FileDiff


class FileError(SynapseError):
    """A file operation failed; the message is written for the model to read, `hint`
    (when given) is what the model can do about it (the tool result's `Hint:` line)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


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


def read_regular(path: Path, limit: int | None = None, *, follow: bool = True) -> bytes:
    """The bytes of a regular file, never blocking: a FIFO, a device (`/dev/zero`, also
    behind a link) or a socket is refused instead of read forever, and with `limit` a
    bigger file too (OSError; FileNotFoundError, IsADirectoryError... as usual).
    `follow=False` refuses a symbolic link itself."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file (a pipe, device or socket)")
        if limit is not None and info.st_size > limit:
            raise OSError(f"larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:  # it grew while we read
                raise OSError(f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_disk_text(path: Path) -> str:
    """Whole file as UTF-8 text, with errors a model can act on."""
    try:
        data = read_regular(path)
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


LOCK_SUFFIX = ".synapse-lock"
LOCK_TIMEOUT = 30.0  # a lock held longer than this belongs to a stuck process
_LOCK_POLL_MIN = 0.001
_LOCK_POLL_MAX = 0.02
# The lock files this task holds (`file_lock` is re-entrant within one task).
_held: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "synapse_file_locks", default=frozenset()
)


def write_target(path: Path) -> Path:
    """The file a write to `path` really replaces: symlinks followed (a dangling one to
    the file it names), so the rename lands on the target and the link survives."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def lock_path(path: Path) -> Path:
    """The side lock file for `path`: `.<name>.synapse-lock` beside the real target.

    Beside the file, not under $SYNAPSE_HOME, so that every process agrees on it
    whatever its settings (and the two names of a symlinked file share one lock);
    `file_lock` removes it on release, so the folder is left as it was found.
    """
    real = Path(os.path.realpath(path))
    name = real.name
    if len(name.encode("utf-8", "surrogateescape")) > 200:  # keep under NAME_MAX
        name = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return real.parent / f".{name}{LOCK_SUFFIX}"


def _try_lock(lock: Path) -> int | None:
    """One non-blocking attempt: the fd holding an exclusive flock on the file now at
    `lock`, or None if another holder has it (or it was replaced under us)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # The previous holder unlinks the file before it lets go: a lock won on an
        # unlinked (or since re-created) inode guards nothing, so try again.
        mine = os.fstat(fd)
        try:
            there = lock.stat()
        except FileNotFoundError:
            os.close(fd)
            return None
        if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
            os.close(fd)
            return None
        return fd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


@contextlib.asynccontextmanager
async def file_lock(path: Path, *, timeout: float = LOCK_TIMEOUT) -> AsyncIterator[None]:
    """Hold the advisory lock of `path` (see `lock_path`) across processes.

    Every flock is taken on its own open file, so two tasks of one process exclude
    each other as two processes do; a task already holding the lock re-enters
    freely. Waiting polls (never blocks the event loop) and is cancellable; after
    `timeout` seconds it gives up with a FileError naming the lock file.
    """
    lock = lock_path(path)
    key = str(lock)
    held = _held.get()
    if key in held:
        yield
        return
    deadline = time.monotonic() + timeout
    delay = _LOCK_POLL_MIN
    while True:
        try:
            fd = _try_lock(lock)
        except FileNotFoundError:  # no parent directory, so no such file either
            raise FileError(f"{path}: no such file") from None
        except NotADirectoryError:
            raise FileError(f"{lock.parent}: exists and is not a directory") from None
        except PermissionError:
            raise FileError(f"{lock.parent}: permission denied") from None
        except OSError as exc:
            raise FileError(f"{lock}: cannot lock: {exc.strerror or exc}") from None
        if fd is not None:
            break
        if time.monotonic() >= deadline:
            raise FileError(
                f"{path}: still locked by another process after {timeout:g} s ({lock}); "
                "nothing changed"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, _LOCK_POLL_MAX)
    token = _held.set(held | {key})
    try:
        yield
    finally:
        _held.reset(token)
        with contextlib.suppress(OSError):
            lock.unlink()  # while still holding it: see _try_lock
        os.close(fd)


def make_parents(path: Path) -> None:
    """Create the directories `path` needs (of its real target, for a symlink)."""
    parent = write_target(path).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise FileError(f"{parent}: exists and is not a directory") from None
    except PermissionError:
        raise FileError(f"{parent}: permission denied") from None


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so a crash leaves either the old or the new file, never half.

    Parent directories are created; an existing file's permission bits are kept. A
    symlink is followed: its target is replaced and the link stays a link. This is the
    bare write: callers that read first hold `file_lock` (as `DiskFiles` does).
    """
    path = write_target(path)
    make_parents(path)
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
    """The gateway with no editor: atomic disk writes, each under `file_lock`.

    `apply_change` compares and writes under the lock, so of two processes editing
    one file neither can overwrite a change it has not seen: the later one fails
    ("changed on disk since it was read") instead of silently losing the other's
    edit. A caller that also reads under the lock (the `edit` built-in) never sees
    that failure from another Synapse process, only from writers that take no lock.
    """

    async def document_text(self, path: Path) -> str | None:
        return None

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        async with file_lock(path):
            current = read_disk_text(path)
            if content_hash(current) != content_hash(before):
                raise FileError(
                    f"{path}: changed on disk since it was read (by another program); "
                    "nothing changed: read it again and redo the edit"
                )
            atomic_write(path, after)

    async def write(self, path: Path, text: str) -> None:
        make_parents(path)  # the lock file lives in the parent
        async with file_lock(path):
            atomic_write(path, text)


# A diff keeps both whole texts; past this many characters on either side a change is
# made as usual but carries no diff (the result still names the file).
MAX_DIFF_CHARS = 512 * 1024
_UNRECORDED = "\0unrecorded"  # a side too big or not text: the file gets no diff


class ChangeRecorder:
    """A `FileGateway` that passes every call on and remembers what changed.

    The router puts one around the session's gateway (disk, editor buffers, an ACP
    client) for each tool call, so every face gets the same diffs from the one place
    changes go through (`diffs()`, carried by `ToolCallFinished`)."""

    def __init__(self, inner: FileGateway) -> None:
        self.inner = inner
        self._changes: dict[str, tuple[str | None, str]] = {}

    async def document_text(self, path: Path) -> str | None:
        return await self.inner.document_text(path)

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        await self.inner.apply_change(path, before, after)
        self._record(path, before, after)

    async def write(self, path: Path, text: str) -> None:
        old = await self._old_text(path)
        await self.inner.write(path, text)
        self._record(path, old, text)

    async def _old_text(self, path: Path) -> str | None:
        """What `path` held before a write: the editor's text, else the disk's (None:
        no such file)."""
        try:
            held = await self.inner.document_text(path)
        except FileError:
            held = None
        if held is not None:
            return held
        if not path.exists():
            return None
        try:
            data = read_regular(path, 4 * MAX_DIFF_CHARS)  # never a FIFO or a device
            return data.decode("utf-8") if b"\0" not in data[:8192] else _UNRECORDED
        except (OSError, UnicodeDecodeError):
            return _UNRECORDED

    def _record(self, path: Path, old: str | None, new: str) -> None:
        key = str(path)
        if key in self._changes:  # a second change of the file: keep the first old text
            old = self._changes[key][0]
        self._changes[key] = (old, new)

    def diffs(self) -> tuple[FileDiff, ...]:
        out: list[FileDiff] = []
        for path, (old, new) in self._changes.items():
            if old == _UNRECORDED or max(len(old or ""), len(new)) > MAX_DIFF_CHARS:
                continue
            out.append(FileDiff(path, old, new))
        return tuple(out)
