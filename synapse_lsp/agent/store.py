"""Chat sessions on disk (format 2): a folder per session, one live writer each.

Layout under `root` (faces use `$SYNAPSE_HOME/sessions`):

    <id>/session.json   the header: {"format": 2, "id", "title", "created_at",
                        "workspace"} (+ "forked_from": ID, "migrated_from": "v1");
                        written whole to a temp file and renamed into place
    <id>/events.jsonl   the append-only log, one JSON record per line, each written with
                        a single `write` (O_APPEND) as it happens; no fsync, so a crash
                        loses at most the record in flight
    <id>/lock           the writer lock (flock); holds the holder's pid, for messages
    <id>/checkpoints/   one record per turn (`<turn>.json`, checkpoints/) naming the
                        shadow-git trees of the folder before and after it; a
                        session with one from the last 7 days is never pruned
                        (`has_checkpoints`)
    <id>/offload/       large tool outputs moved out of the history at a compaction
                        (`<tool_use_id>.txt`, compaction.py); the history names them
    .migrate.lock       serialises the migration of format-1 files between processes
    .tmp-*              folders being built or removed (create, fork, migration, delete);
                        never listed, swept after an hour

Records (unchanged from format 1):

- `{"kind": "meta", "id", "title", "created_at", "workspace"}` — first line; a later
  meta record (a new title) overrides it. The header holds the same, newest values;
  it wins, and the meta records are the fallback when it is unreadable;
- `{"kind": "message", "message": {...}}` — one API message added to the history;
- `{"kind": "compaction", "messages": [...]}` — the history was compacted and replaced
  by these messages (the records before it stay: the full record);
- `{"kind": "event", "event": {...}}` — an event for transcript replay
  (`events.event_to_dict`; text deltas are stored coalesced);
- `{"kind": "rewind", "messages": [...], "events": N}` — `/rewind` ended the conversation
  before a turn: the history is replaced by these messages and only the first N events
  stay for replay;
- `{"kind": "usage", "models": {MODEL: {"input_tokens", ...}}}` — the tokens a turn
  (or a `/compact`) used, per model: the session's usage and cost are their sum.

**One live writer.** Appending to a session takes its lock: `fcntl.flock` on
`<id>/lock`, held by this store until `close(id)` and dropped by the kernel when
the process dies (a crash never leaves a stale lock). Another process (or another
`ChatStore` in this one) that wants to write gets `SessionLockedError`, naming
the holder's pid. Our choice for that second opener is **read-only replay**:
`list`, `info` and `load` never take the lock, so it can still list, read and
replay the session (`ChatSession.resume` gives a read-only session whose turns end
with that error until the lock is free); to continue the conversation anyway,
`fork(id)` copies it under a new id that it may write. `delete` is the user's
explicit word and is not refused: a process still holding the session then writes
into the removed files, which are lost.

**A cap (`prune`).** With the setting `maxSessions` (off by default) a new session
prunes the oldest beyond the cap (by last update). A candidate is removed only while
its lock is taken here (so never one live in any process: its writer's flock makes
the attempt fail and it is skipped), and never one with checkpoints from the last
7 days (older checkpoints protect nothing). The cap counts
every stored session, so skipped ones may leave more than `max_sessions` on disk.

**Repair.** A torn last line (no newline, not a complete record) is skipped on
load and cut off (`ftruncate`) by the writer before its first append, so the next
record starts on a line of its own; a complete record that only lacks its newline
gets the newline. A line that is not UTF-8 or not JSON is skipped with a warning
(`SavedChat.problems`). `load` returns the history repaired
(`history.repair_history`): roles alternate, every `tool_use` is answered right
after it, orphan `tool_result`s are dropped — a history the API accepts.

**Migration.** A format-1 file `<id>.jsonl` (one file per session) is migrated on
first access (`list`, or any call naming its id): under `.migrate.lock` its bytes
are copied unchanged into a temp folder with a header, the folder is renamed to
`<id>/` (its log keeps the old file's mtime, so the order of `list` stays) and then
the old file is removed. A crash in between leaves either the old file alone or both;
the next access sees the folder already holds the old file's records and only
removes the file. A Synapse of format 1 still running could append to an old file
after it moved; those records would be lost, so upgrade with none running.

Ids are checked (`[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 128) so no path escapes `root`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from synapse_lsp.agent.history import repair_history
from synapse_lsp.errors import SynapseError
from synapse_lsp.events import Event, Usage, event_from_dict, event_to_dict

log = logging.getLogger(__name__)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEFAULT_TITLE = "New chat"
FORMAT = 2
HEADER = "session.json"
LOG = "events.jsonl"
LOCK = "lock"
CHECKPOINTS = "checkpoints"
CHECKPOINTS_PROTECT_DAYS = 7  # checkpoints this recent keep a session from the cap
OFFLOAD = "offload"
V1_SUFFIX = ".jsonl"
_MIGRATE_LOCK = ".migrate.lock"
_TEMP_PREFIX = ".tmp-"
_STALE_TEMP_SECONDS = 3600
_META_PREFIX = b'{"kind":"meta"'


class SessionNotFoundError(SynapseError):
    """No stored session has that id."""


class SessionLockedError(SynapseError):
    """Another live process (or store) is writing this session; here it is read-only."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        holder = f" (pid {pid})" if pid else ""
        super().__init__(
            f"Session {session_id!r} is open for writing in another Synapse process{holder}. "
            "Here it is read-only: its history can be read and replayed, not continued. "
            "Close it there, or fork it to continue in a new session.",
            cause="session_locked",
        )
        self.session_id = session_id
        self.pid = pid


class SessionFormatError(SynapseError):
    """The session was written by a newer Synapse (a format this one does not know)."""


class SessionStoreError(SynapseError):
    """A session's folder or file is not what the store writes (a symlink, a FIFO, a
    device), or the disk refused a write: one line, nothing followed or half-written."""


def _open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open` that never follows a symlink at `path`, never blocks on a FIFO, and
    refuses anything but a regular file (SessionStoreError, nothing opened)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SessionStoreError(
                f"{path}: is a symlink, not a session file; not followed"
            ) from None
        if exc.errno == errno.ENXIO:  # a FIFO with no writer, opened for writing
            raise SessionStoreError(f"{path}: is not a regular file; not used") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SessionStoreError(f"{path}: is not a regular file; not used")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_regular(path: Path) -> bytes:
    """The whole of a regular session file (`_open_regular`'s rules)."""
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _check_folder(folder: Path) -> None:
    """A session folder is a real directory of the store, never a symlink to elsewhere."""
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise SessionStoreError(
            f"{folder}: is not a session folder (a symlink or another kind of file); left as it is"
        )


@dataclass(frozen=True)
class SavedChatInfo:
    id: str
    title: str
    created_at: str  # ISO 8601, UTC, "Z"
    updated_at: str
    workspace: str | None


@dataclass
class SavedChat:
    info: SavedChatInfo
    messages: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what was skipped while reading
    usage: dict[str, Usage] | None = None  # the usage records' sum per model (None: none)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_session_id() -> str:
    """Sortable and readable: `2026-11-23T10-15-02-7f3a`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S-") + secrets.token_hex(2)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json_text(text: str) -> bytes:
    """`text` as it appears inside a JSON string of a log line (`_line`)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode()


def _copy_regular_files(source: Path, target: Path) -> None:
    """The regular files directly in `source` (no link followed), into `target`."""
    try:
        entries = list(os.scandir(source))
    except (FileNotFoundError, NotADirectoryError):
        return
    target.mkdir(mode=0o700)
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and not entry.name.startswith(_TEMP_PREFIX):
            shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _record(raw: bytes) -> dict[str, Any] | None:
    """One log line as a record, or None (not UTF-8, not JSON, no kind)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        return None
    return record


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    fd = _open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _complete_lines(data: bytes) -> bytes:
    """`data` up to and including its last newline."""
    return data[: data.rfind(b"\n") + 1]


class ChatStore:
    """All sessions under `root` (default `settings.synapse_home / "sessions"`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._logs: dict[str, int] = {}  # session id -> the log, open for appending
        self._locks: dict[str, int] = {}  # session id -> the flock'ed lock file

    # ------------------------------------------------------------- where

    def folder(self, session_id: str) -> Path:
        """The session's folder (a format-1 file of that id is migrated first)."""
        if not _ID.match(session_id):
            raise SessionNotFoundError(f"invalid session id {session_id!r}")
        self._migrate(session_id)
        return self.root / session_id

    def path(self, session_id: str) -> Path:
        """The session's append-only log (`<id>/events.jsonl`)."""
        return self.folder(session_id) / LOG

    def exists(self, session_id: str) -> bool:
        return self._is_session(self.folder(session_id))

    @staticmethod
    def _is_session(folder: Path) -> bool:
        return (folder / HEADER).is_file() or (folder / LOG).is_file()

    def _existing(self, session_id: str) -> Path:
        folder = self.folder(session_id)
        _check_folder(folder)
        if not self._is_session(folder):
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}")
        return folder

    # ------------------------------------------------------------- the lock

    def lock(self, session_id: str) -> None:
        """Become the session's one writer (held until `close`); SessionLockedError if another
        process or store is, SessionNotFoundError if there is no such session."""
        if session_id in self._locks:
            return
        folder = self._existing(session_id)
        self._header(folder)  # a newer format is never written to
        path = folder / LOCK
        try:
            fd = _open_regular(path, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:  # deleted meanwhile
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise SessionLockedError(session_id, pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            if not os.path.samestat(os.fstat(fd), path.stat()):
                raise FileNotFoundError(path)  # the folder was deleted before we locked it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except FileNotFoundError:
            os.close(fd)
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}") from None
        except BaseException:
            os.close(fd)
            raise
        self._locks[session_id] = fd

    def holds_lock(self, session_id: str) -> bool:
        """True while this store is the session's writer."""
        return session_id in self._locks

    # ----------------------------------------------------------------- write

    def create(self, session_id: str, title: str, workspace: str | None) -> SavedChatInfo:
        """A new session (nothing happens to an existing one), locked for writing."""
        stamp = now_iso()
        info = SavedChatInfo(session_id, title, stamp, stamp, workspace)
        folder = self.folder(session_id)
        _check_folder(folder)
        if not self._is_session(folder):
            meta = {"id": session_id, "title": title, "created_at": stamp, "workspace": workspace}
            try:
                self._publish(folder, {"format": FORMAT, **meta}, _line({"kind": "meta", **meta}))
            except OSError as exc:
                raise SessionStoreError(
                    f"cannot save a new session in {self.root}: {exc.strerror or exc}"
                ) from None
        self.lock(session_id)
        return info

    def set_title(self, session_id: str, title: str) -> None:
        self._append(session_id, {"kind": "meta", "title": title})
        folder = self.root / session_id
        header = self._header(folder) or self._fallback_header(folder)
        header["title"] = title
        self._write_header(folder, header)

    def append_message(self, session_id: str, message: dict[str, Any]) -> None:
        self._append(session_id, {"kind": "message", "message": message})

    def append_compaction(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        self._append(session_id, {"kind": "compaction", "messages": messages})

    def append_rewind(self, session_id: str, messages: list[dict[str, Any]], events: int) -> None:
        """The conversation now ends before a rewound turn: the history is `messages` and
        only the first `events` replay events stay."""
        self._append(session_id, {"kind": "rewind", "messages": messages, "events": events})

    def append_event(self, session_id: str, event: Event) -> None:
        self._append(session_id, {"kind": "event", "event": event_to_dict(event)})

    def append_usage(self, session_id: str, by_model: dict[str, Usage]) -> None:
        models = {name: dataclasses.asdict(usage) for name, usage in by_model.items()}
        self._append(session_id, {"kind": "usage", "models": models})

    def write_offload(self, session_id: str, tool_use_id: str, text: str) -> Path:
        """Save a tool output moved out of the history: `<id>/offload/<tool_use_id>.txt`
        (written whole, then renamed into place); its path."""
        self.lock(session_id)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", tool_use_id)[:128].lstrip(".") or "output"
        _check_folder(self.root / session_id)
        folder = self.root / session_id / OFFLOAD
        folder.mkdir(mode=0o700, exist_ok=True)
        _check_folder(folder)
        target = folder / f"{name}.txt"
        fd, tmp = tempfile.mkstemp(prefix=f"{_TEMP_PREFIX}{name}-", dir=folder)
        try:
            _write_all(fd, text.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
        Path(tmp).replace(target)
        return target

    def _append(self, session_id: str, record: dict[str, Any]) -> None:
        data = _line(record)
        fd = self._logs.get(session_id)
        if fd is None:
            self.lock(session_id)
            fd = self._open_log(session_id)
        try:
            _write_all(fd, data)
        except OSError as exc:
            # the line may be torn (a full disk): reopen, and so repair, before the next one
            del self._logs[session_id]
            os.close(fd)
            raise SessionStoreError(
                f"cannot save to session {session_id}: {exc.strerror or exc}; "
                "the records before this one are kept"
            ) from None

    def _open_log(self, session_id: str) -> int:
        _check_folder(self.root / session_id)
        path = self.root / session_id / LOG
        fd = _open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            _repair_tail(fd, path)
        except BaseException:
            os.close(fd)
            raise
        self._logs[session_id] = fd
        return fd

    def close(self, session_id: str | None = None) -> None:
        """Stop writing (all sessions when no id is given) and release the lock."""
        ids = [session_id] if session_id is not None else list({*self._logs, *self._locks})
        for sid in ids:
            for table in (self._logs, self._locks):
                fd = table.pop(sid, None)
                if fd is not None:
                    os.close(fd)  # closing the lock file releases the flock

    def fork(self, session_id: str, new_id: str | None = None) -> SavedChatInfo:
        """A copy of the session (history and transcript) under a new id, free to write;
        allowed while another process writes the original."""
        source = self._existing(session_id)
        header = self._header(source) or self._fallback_header(source)
        target_id = new_session_id() if new_id is None else new_id
        target = self.folder(target_id)
        if self._is_session(target):
            raise SynapseError(f"a session {target_id!r} already exists")
        meta = {
            "id": target_id,
            "title": header.get("title") or DEFAULT_TITLE,
            "created_at": now_iso(),
            "workspace": header.get("workspace"),
            "forked_from": session_id,
        }
        lines = [_line({"kind": "meta", **meta})]
        # Outputs offloaded at a compaction are copied, and the history's references to
        # them name the copies: the fork keeps them whatever becomes of the original.
        old_ref, new_ref = (
            _json_text(f"{folder / OFFLOAD}{os.sep}") for folder in (source, target)
        )
        with contextlib.suppress(FileNotFoundError), (source / LOG).open("rb") as fh:
            for raw in fh:
                record = _record(raw)
                if raw.endswith(b"\n") and record is not None and record["kind"] != "meta":
                    lines.append(raw.replace(old_ref, new_ref))
        header = {"format": FORMAT, **meta}
        if not self._publish(target, header, b"".join(lines), copy=source / OFFLOAD):
            raise SynapseError(f"a session {target_id!r} already exists")
        return self.info(target_id)

    def delete(self, session_id: str) -> None:
        folder = self.folder(session_id)
        self.close(session_id)
        if not self._is_session(folder):
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}")
        trash = self.root / f"{_TEMP_PREFIX}deleted-{session_id}-{secrets.token_hex(4)}"
        try:
            folder.rename(trash)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}") from None
        shutil.rmtree(trash, ignore_errors=True)

    def has_checkpoints(self, session_id: str) -> bool:
        """True when the session keeps checkpoints taken in the last
        `CHECKPOINTS_PROTECT_DAYS` (a record in `<id>/checkpoints/` that recent): such a
        session is never pruned. Older ones protect nothing, or the cap could never
        prune anything while checkpoints are on (the default)."""
        folder = self.root / session_id
        since = time.time() - CHECKPOINTS_PROTECT_DAYS * 86400
        try:
            with os.scandir(folder / CHECKPOINTS) as entries:
                return any(e.stat(follow_symlinks=False).st_mtime >= since for e in entries)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def prune(self, max_sessions: int, *, keep: set[str] | None = None) -> list[str]:
        """Remove the oldest sessions beyond `max_sessions` (most recently updated kept);
        never one in `keep`, one this store writes, one whose lock another process
        holds, or one with checkpoints. Returns the ids removed."""
        if max_sessions <= 0:
            return []
        keep = keep or set()
        infos = self.list()
        removed: list[str] = []
        for info in infos[max_sessions:]:
            sid = info.id
            if sid in keep or sid in self._locks or self.has_checkpoints(sid):
                continue
            if self._remove_unlocked(sid):
                removed.append(sid)
        return removed

    def _remove_unlocked(self, session_id: str) -> bool:
        """Delete the session while holding its lock; False when someone writes it."""
        folder = self.root / session_id
        try:
            fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # live in another process (or store)
            if self.has_checkpoints(session_id):  # written while we looked
                return False
            trash = self.root / f"{_TEMP_PREFIX}pruned-{session_id}-{secrets.token_hex(4)}"
            try:
                folder.rename(trash)
            except FileNotFoundError:
                return False
        finally:
            os.close(fd)
        shutil.rmtree(trash, ignore_errors=True)
        log.info("pruned stored session %s (over the maxSessions cap)", session_id)
        return True

    # ------------------------------------------------------------------ read

    def load(self, session_id: str) -> SavedChat:
        """The session as stored, history repaired; never takes the lock (read-only)."""
        folder = self._existing(session_id)
        header = self._header(folder)
        path = folder / LOG
        meta: dict[str, Any] = {}
        messages: list[dict[str, Any]] = []
        events: list[Event] = []
        problems: list[str] = []
        usage: dict[str, Usage] | None = None
        try:
            fh: BinaryIO | None = os.fdopen(_open_regular(path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            fh = None
        if fh is not None:
            with fh:
                for number, raw in enumerate(fh, 1):
                    record = _record(raw)
                    problem = _problem(raw, record)
                    if problem is not None:
                        problems.append(f"{path}:{number}: {problem}")
                        continue
                    assert record is not None
                    try:
                        if record["kind"] == "usage":
                            usage = _add_usage(usage or {}, record)
                            continue
                        _apply(record, meta, messages, events)
                    except (ValueError, KeyError, TypeError) as exc:
                        problems.append(f"{path}:{number}: skipped a bad record ({exc})")
        for problem in problems:
            log.warning("%s", problem)
        info = self._info(folder, header or {**self._fallback_header(folder), **meta})
        return SavedChat(info, repair_history(messages), events, problems, usage)

    def info(self, session_id: str) -> SavedChatInfo:
        folder = self._existing(session_id)
        return self._info(folder, self._header(folder) or self._fallback_header(folder))

    def list(self) -> list[SavedChatInfo]:
        """Every stored session, most recently updated first (format-1 files are migrated)."""
        if not self.root.is_dir():
            return []
        for path in self.root.glob(f"*{V1_SUFFIX}"):
            if path.is_file() and _ID.match(path.name[: -len(V1_SUFFIX)]):
                try:
                    self._migrate(path.name[: -len(V1_SUFFIX)])
                except OSError as exc:
                    log.warning("cannot migrate %s: %s", path, exc)
        self._sweep()
        infos = []
        for entry in os.scandir(self.root):
            if not _ID.match(entry.name) or not entry.is_dir():
                continue
            folder = Path(entry.path)
            try:
                if self._is_session(folder):
                    infos.append(
                        self._info(folder, self._header(folder) or self._fallback_header(folder))
                    )
            except (OSError, SynapseError) as exc:
                log.warning("skipping session %s: %s", entry.name, exc)
        return sorted(infos, key=lambda i: (i.updated_at, i.id), reverse=True)

    def _header(self, folder: Path) -> dict[str, Any] | None:
        """session.json, or None when it is missing or unreadable; SessionFormatError when
        a newer Synapse wrote it."""
        try:
            header = json.loads(_read_regular(folder / HEADER).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError, SessionStoreError) as exc:
            log.warning("%s: unreadable header (%s); using the log's meta records", folder, exc)
            return None
        if not isinstance(header, dict):
            return None
        version = header.get("format", FORMAT)
        if not isinstance(version, int) or version > FORMAT:
            raise SessionFormatError(
                f"session {folder.name!r} was written by a newer Synapse (format {version!r}; "
                f"this one reads format {FORMAT})"
            )
        return header

    def _fallback_header(self, folder: Path) -> dict[str, Any]:
        """The header rebuilt from the log's meta records (scanned, the rest not parsed)."""
        header: dict[str, Any] = {"format": FORMAT, "id": folder.name}
        with (
            contextlib.suppress(FileNotFoundError, SessionStoreError),
            os.fdopen(_open_regular(folder / LOG, os.O_RDONLY), "rb") as fh,
        ):
            header.update(_meta_of(fh))
        return header

    def _write_header(self, folder: Path, header: dict[str, Any]) -> None:
        data = json.dumps(header, ensure_ascii=False, indent=1).encode() + b"\n"
        fd, tmp = tempfile.mkstemp(prefix=f"{_TEMP_PREFIX}{HEADER}-", dir=folder)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        temp = Path(tmp)
        try:
            temp.chmod(0o600)
            temp.replace(folder / HEADER)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def _info(self, folder: Path, meta: dict[str, Any]) -> SavedChatInfo:
        log_path = folder / LOG
        found = (log_path if log_path.exists() else folder / HEADER).stat()
        updated = _iso(found.st_mtime)
        workspace = meta.get("workspace")
        return SavedChatInfo(
            id=folder.name,
            title=str(meta.get("title") or DEFAULT_TITLE),
            created_at=str(meta.get("created_at") or updated),
            updated_at=updated,
            workspace=workspace if isinstance(workspace, str) else None,
        )

    # ------------------------------------------------- folders made atomically

    def _publish(
        self,
        folder: Path,
        header: dict[str, Any],
        log_data: bytes,
        times: tuple[float, float] | None = None,
        *,
        copy: Path | None = None,
    ) -> bool:
        """Build the session in a temp folder, then rename it to `folder`; False when
        `folder` already exists (another process was first). `copy`: a folder of
        another session (its offload/) whose regular files the new one gets too."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{folder.name}-", dir=self.root))
        try:
            if copy is not None:
                _copy_regular_files(copy, tmp / copy.name)
            _write_file(tmp / LOG, log_data)
            _write_file(tmp / HEADER, json.dumps(header, ensure_ascii=False, indent=1).encode())
            if times is not None:
                os.utime(tmp / LOG, times)
            _fsync_dir(tmp)
            try:
                tmp.rename(folder)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    return False
                raise
            _fsync_dir(self.root)
            return True
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove temp folders a crash left behind (older than an hour)."""
        cutoff = time.time() - _STALE_TEMP_SECONDS
        for path in self.root.glob(f"{_TEMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if path.is_dir() and path.stat().st_mtime < cutoff:
                    shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------ migration

    def _migrate(self, session_id: str) -> None:
        """Move a format-1 `<id>.jsonl` into the folder layout (idempotent, atomic)."""
        old = self.root / f"{session_id}{V1_SUFFIX}"
        if not old.is_file():
            return
        with self._migration_lock():
            try:
                data = old.read_bytes()
                old_stat = old.stat()
            except FileNotFoundError:
                return  # another process migrated it while we waited
            folder = self.root / session_id
            if not self._is_session(folder):
                meta = _meta_of(iter(data.splitlines(keepends=True)))
                header = {
                    "format": FORMAT,
                    "id": session_id,
                    "title": meta.get("title") or DEFAULT_TITLE,
                    "created_at": meta.get("created_at") or _iso(old_stat.st_mtime),
                    "workspace": meta.get("workspace"),
                    "migrated_from": "v1",
                }
                if self._publish(folder, header, data, (old_stat.st_atime, old_stat.st_mtime)):
                    old.unlink()
                    log.info("migrated session %s to %s", old, folder)
                    return
            # The folder exists: an earlier migration stopped before removing the old file
            # (then the folder's log starts with the old file's records), or, unexpectedly,
            # another session has that id: keep the old file aside, never lose it.
            try:
                current = (folder / LOG).read_bytes()
            except FileNotFoundError:
                current = b""
            if current.startswith(_complete_lines(data)):
                old.unlink()
            else:
                aside = old.with_name(f"{old.name}.unmigrated-{secrets.token_hex(4)}")
                old.rename(aside)
                log.warning(
                    "%s conflicts with the session folder %s; kept as %s", old, folder, aside
                )

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / _MIGRATE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None


def _meta_of(lines: Iterator[bytes]) -> dict[str, Any]:
    """The merged meta records of a log (other lines are not parsed)."""
    meta: dict[str, Any] = {}
    for raw in lines:
        if raw.startswith(_META_PREFIX):
            record = _record(raw)
            if record is not None:
                meta.update({k: v for k, v in record.items() if k not in ("kind", "id")})
    return meta


def _problem(raw: bytes, record: dict[str, Any] | None) -> str | None:
    if record is not None:
        return None
    if not raw.endswith(b"\n"):
        return "skipped a torn last record (the writer cuts it off before appending)"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "skipped a line that is not UTF-8"
    return "skipped an unreadable record"


def _apply(
    record: dict[str, Any],
    meta: dict[str, Any],
    messages: list[dict[str, Any]],
    events: list[Event],
) -> None:
    kind = record["kind"]
    if kind == "meta":
        meta.update({k: v for k, v in record.items() if k not in ("kind", "id")})
    elif kind == "message":
        message = record["message"]
        if not isinstance(message, dict):
            raise TypeError("a message record without a message")
        messages.append(message)
    elif kind == "compaction":
        replaced = record["messages"]
        if not isinstance(replaced, list):
            raise TypeError("a compaction record without messages")
        messages[:] = replaced
    elif kind == "event":
        events.append(event_from_dict(record["event"]))
    elif kind == "rewind":  # /rewind cut the conversation before a turn
        replaced, kept = record["messages"], record["events"]
        if not isinstance(replaced, list) or not isinstance(kept, int) or kept < 0:
            raise TypeError("a rewind record without messages or events")
        messages[:] = replaced
        del events[kept:]


def _add_usage(total: dict[str, Usage], record: dict[str, Any]) -> dict[str, Usage]:
    models = record["models"]
    if not isinstance(models, dict):
        raise TypeError("a usage record without models")
    out = dict(total)
    for name, counts in models.items():
        if not isinstance(counts, dict):
            raise TypeError("a usage record with bad counts")
        out[str(name)] = out.get(str(name), Usage()) + Usage(**counts)
    return out


def _repair_tail(fd: int, path: Path) -> None:
    """Make the log end at a line end: complete a whole record that lost its newline, cut
    off a torn one (so the next append is not swallowed by it)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = size
    while start > 0:  # find the last newline, reading backwards
        begin = max(0, start - 65536)
        chunk = os.pread(fd, start - begin, begin)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            start = begin + newline + 1
            break
        start = begin
    tail = os.pread(fd, size - start, start)
    if _record(tail) is not None:
        _write_all(fd, b"\n")
        return
    os.ftruncate(fd, start)
    log.warning("%s: cut off a torn last record (%d bytes)", path, size - start)
