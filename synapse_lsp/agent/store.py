"""Chat sessions on disk: one append-only JSONL file per session.

`$SYNAPSE_HOME/sessions/<id>.jsonl`, one record per line, written with a single
`write` and flushed as it happens, so a crash loses at most the record in
flight (a torn last line is skipped on load). Records:

- `{"kind": "meta", "id", "title", "created_at", "workspace"}` — first line;
  a later meta record (e.g. a new title) overrides the earlier one;
- `{"kind": "message", "message": {...}}` — one API message (user/assistant)
  appended to the model's history;
- `{"kind": "compaction", "messages": [...]}` — the history was compacted and
  replaced by these messages (the records before it stay: the full record);
- `{"kind": "event", "event": {...}}` — an event for transcript replay
  (`events.event_to_dict`; text deltas are stored coalesced).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from synapse_lsp.errors import SynapseError
from synapse_lsp.events import Event, event_from_dict, event_to_dict

log = logging.getLogger(__name__)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEFAULT_TITLE = "New chat"


class SessionNotFoundError(SynapseError):
    """No stored session has that id."""


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    created_at: str  # ISO 8601, UTC, "Z"
    updated_at: str
    workspace: str | None


@dataclass
class StoredSession:
    info: SessionInfo
    messages: list[dict[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_session_id() -> str:
    """Sortable and readable: `2026-11-23T10-15-02-7f3a`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S-") + secrets.token_hex(2)


class SessionStore:
    """All sessions under `root` (default `settings.synapse_home / "sessions"`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._open: dict[str, IO[str]] = {}

    def path(self, session_id: str) -> Path:
        if not _ID.match(session_id):
            raise SessionNotFoundError(f"invalid session id {session_id!r}")
        return self.root / f"{session_id}.jsonl"

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    # ----------------------------------------------------------------- write

    def create(self, session_id: str, title: str, workspace: str | None) -> SessionInfo:
        stamp = now_iso()
        info = SessionInfo(session_id, title, stamp, stamp, workspace)
        if not self.exists(session_id):
            self._append(
                session_id,
                {
                    "kind": "meta",
                    "id": session_id,
                    "title": title,
                    "created_at": stamp,
                    "workspace": workspace,
                },
            )
        return info

    def set_title(self, session_id: str, title: str) -> None:
        self._append(session_id, {"kind": "meta", "title": title})

    def append_message(self, session_id: str, message: dict[str, Any]) -> None:
        self._append(session_id, {"kind": "message", "message": message})

    def append_compaction(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        self._append(session_id, {"kind": "compaction", "messages": messages})

    def append_event(self, session_id: str, event: Event) -> None:
        self._append(session_id, {"kind": "event", "event": event_to_dict(event)})

    def _append(self, session_id: str, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        fh = self._open.get(session_id)
        if fh is None:
            self.root.mkdir(parents=True, exist_ok=True)
            fh = self.path(session_id).open("a", encoding="utf-8")
            self._open[session_id] = fh
        fh.write(line)
        fh.flush()

    def close(self, session_id: str | None = None) -> None:
        ids = [session_id] if session_id is not None else list(self._open)
        for sid in ids:
            fh = self._open.pop(sid, None)
            if fh is not None:
                fh.close()

    # ------------------------------------------------------------------ read

    def load(self, session_id: str) -> StoredSession:
        path = self.path(session_id)
        if not path.is_file():
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}")
        meta: dict[str, Any] = {"id": session_id, "title": DEFAULT_TITLE}
        messages: list[dict[str, Any]] = []
        events: list[Event] = []
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                try:
                    record = json.loads(line)
                    kind = record["kind"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s:%d: skipping an unreadable record", path, number)
                    continue
                if kind == "meta":
                    meta.update({k: v for k, v in record.items() if k != "kind"})
                elif kind == "message":
                    messages.append(record["message"])
                elif kind == "compaction":
                    messages = list(record["messages"])
                elif kind == "event":
                    try:
                        events.append(event_from_dict(record["event"]))
                    except ValueError as exc:
                        log.warning("%s:%d: %s", path, number, exc)
        return StoredSession(self._info(path, meta), messages, events)

    def info(self, session_id: str) -> SessionInfo:
        path = self.path(session_id)
        if not path.is_file():
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}")
        return self._info(path, self._meta(path))

    def list(self) -> list[SessionInfo]:
        """Every stored session, most recently updated first."""
        if not self.root.is_dir():
            return []
        infos = []
        for path in self.root.glob("*.jsonl"):
            try:
                infos.append(self._info(path, self._meta(path)))
            except OSError:
                continue
        return sorted(infos, key=lambda i: (i.updated_at, i.id), reverse=True)

    def delete(self, session_id: str) -> None:
        path = self.path(session_id)
        self.close(session_id)
        try:
            path.unlink()
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.root}") from None

    def _meta(self, path: Path) -> dict[str, Any]:
        """Meta records only; scans for `"kind":"meta"` lines without parsing the rest."""
        meta: dict[str, Any] = {"id": path.stem, "title": DEFAULT_TITLE}
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.startswith('{"kind":"meta"'):
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    meta.update({k: v for k, v in record.items() if k != "kind"})
        return meta

    def _info(self, path: Path, meta: dict[str, Any]) -> SessionInfo:
        mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        created = str(meta.get("created_at") or mtime)
        return SessionInfo(
            id=str(meta.get("id") or path.stem),
            title=str(meta.get("title") or DEFAULT_TITLE),
            created_at=created,
            updated_at=mtime,
            workspace=meta.get("workspace"),
        )
