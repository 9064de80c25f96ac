"""Checkpoints: the work tree before and after every turn, in a shadow git store.

Claude Code's checkpoints cover its own file edits only; these cover whatever the
turn changed, `sed -i`, `rm` and a build included, because they photograph the
folder itself. The store is `$SYNAPSE_HOME/checkpoints/<hash of the folder>/`, a
bare git repository used with `--work-tree=<folder>`: the user's `.git` is never
read for writing or changed, and folders that are not repositories work alike.
Objects are shared by every session of the folder; each session has its own index
(`index-<session>`, which makes the next snapshot incremental: git's stat cache
re-reads only what changed) and refs (`refs/synapse/<session>/<turn>-before|after`,
each naming a snapshot's tree).

A snapshot stages the folder's tracked and untracked files as the folder's own
`.gitignore` files see them, plus the text an editor holds unsaved for open files
(`open_texts` of the file gateway), skips files over `MAX_FILE_BYTES` (named in the
record, not restorable) and notes the ignored ones: each ignored entry (`.env`, a
local database; an ignored directory counts as one entry, by its own mtime) gets a
fingerprint, and small ignored files are kept whole up to `IGNORED_CAPTURE_BYTES`,
so a rewind can restore those and reports the others as not restorable. The user's
repository index and HEAD are fingerprinted too: a rewind reports a `git mv`, `git
add` or commit made since, and never undoes it.

One record per turn (`<records>/<turn>.json`, in the session's folder) names the
two trees, the number of history messages before the turn and what changed. At
most `MAX_CHECKPOINTS` turns are kept per session (older refs dropped; git's own gc
reclaims their objects, run now and then in the background).

`rewind(turn)` restores the files the turns since `turn` changed to what they were
before it, only where a file still holds what the last turn left and nobody but the
agent changed it during those turns (`foreign`: agent/hand_edits.py); any other file
is a conflict: `decide` says whether to overwrite it, else it is skipped. A journal
is written first and each file is replaced by rename (`checkpoint_restore.py`,
`checkpoint_journal.py`); an editor's buffers get the old text as an edit through
the file gateway (undoable, unsaved), never behind their back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synapse_lsp import checkpoint_journal as journal
from synapse_lsp.checkpoint_restore import Decide as Decide  # re-exported
from synapse_lsp.checkpoint_restore import Progress, Restorer
from synapse_lsp.checkpoint_restore import RewindReport as RewindReport  # re-exported
from synapse_lsp.checkpoint_seed import seed_index
from synapse_lsp.errors import SynapseError
from synapse_lsp.files import FileError, FileGateway, atomic_write, read_regular

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 8 << 20  # a bigger file is not kept (a notice names it)
MAX_FILES = 100_000  # a folder with more files is not checkpointed at all
MAX_CHECKPOINTS = 50  # turns kept per session
IGNORED_CAPTURE_BYTES = 64 << 10  # an ignored file this small is kept whole...
IGNORED_CAPTURE_TOTAL = 1 << 20  # ...up to this much per snapshot
IGNORED_CAPTURE_COUNT = 100  # ...and at most this many files
MAX_IGNORED_ENTRIES = 2000  # ignored entries fingerprinted (the rest are not watched)
MAX_NESTED_REPOS = 50  # nested repositories / submodules fingerprinted per snapshot
NESTED_ENTRIES = 20_000  # entries of one nested repository walked for its fingerprint
GC_EVERY = 25  # snapshots between background `git gc --auto`
# A `status --porcelain -z` record (each follows a NUL) that names a file to stage
# (new, or changed since the last snapshot: Y is M, D or T) or an ignored one.
_STATUS_RECORD = re.compile(rb"\0(\?\?|!!|[^\0][MDT]) ([^\0]+)")
GIT_TIMEOUT = 600.0  # a git command of the store that takes longer is killed
FORGET_GC_WAIT = 120.0  # how long deleting a session waits for the store's gc
ALL_REACHABLE_MARK = "synapse-all-reachable"  # a store made since ignored blobs have refs
STORE_CONFIG_MARK = "synapse-config-2"  # a store configured as `_ensure_store` does now
READY_WAIT = 120.0  # a command waits this long for the snapshot before its turn
# What the shadow store must never apply to a file's bytes: line-ending conversion,
# `ident`, encodings, filters (whatever the folder's .gitattributes say).
ATTRIBUTES = "* -text -eol -crlf -ident -filter -working-tree-encoding\n"


class CheckpointError(SynapseError):
    """Checkpoints cannot be taken or restored; the message says why."""


@dataclass
class Checkpoint:
    """One turn: the folder before and after it."""

    turn: int
    before: str
    messages: int  # history messages before the turn
    started_at: float
    prompt: str = ""  # the user's words that started the turn (to check a truncation)
    events: int = 0  # replay events before the turn
    after: str | None = None
    changed: list[tuple[str, str]] = field(default_factory=list)  # (status A/M/D, path)
    ignored_changed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # too large to keep
    ignored_before: dict[str, dict[str, Any]] = field(default_factory=dict)
    ignored_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    repo_before: str | None = None
    repo_after: str | None = None
    foreign: list[str] = field(default_factory=list)  # changed in the turn, not by the agent

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "before": self.before,
            "after": self.after,
            "messages": self.messages,
            "startedAt": self.started_at,
            "prompt": self.prompt,
            "events": self.events,
            "changed": [list(c) for c in self.changed],
            "ignoredChanged": self.ignored_changed,
            "skipped": self.skipped,
            "ignoredBefore": self.ignored_before,
            "ignoredAfter": self.ignored_after,
            "repoBefore": self.repo_before,
            "repoAfter": self.repo_after,
            "foreign": self.foreign,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Checkpoint:
        return cls(
            turn=int(raw["turn"]),
            before=str(raw["before"]),
            messages=int(raw.get("messages", 0)),
            started_at=float(raw.get("startedAt", 0.0)),
            prompt=str(raw.get("prompt", "")),
            events=int(raw.get("events", 0)),
            after=raw.get("after"),
            changed=[(str(s), str(p)) for s, p in raw.get("changed", [])],
            ignored_changed=list(raw.get("ignoredChanged", [])),
            skipped=list(raw.get("skipped", [])),
            ignored_before=dict(raw.get("ignoredBefore", {})),
            ignored_after=dict(raw.get("ignoredAfter", {})),
            repo_before=raw.get("repoBefore"),
            repo_after=raw.get("repoAfter"),
            foreign=list(raw.get("foreign", [])),
        )


_BACKGROUND: set[asyncio.Task[None]] = set()  # gc runs (the loop keeps only weak refs)


def _in_background(work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def forget_session(synapse_home: Path, root: Path, session_id: str) -> None:
    """A deleted session's snapshots of `root` go too (`Checkpoints.forget`)."""
    records = store_dir(synapse_home, root) / "records" / session_id
    with contextlib.suppress(CheckpointError, OSError):
        await Checkpoints(root, synapse_home, session_id, records).forget()


def store_dir(synapse_home: Path, root: Path) -> Path:
    real = os.path.realpath(root)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return synapse_home / "checkpoints" / f"{Path(real).name or 'root'}-{digest}"


def _git_env(
    git_dir: Path, root: Path, index: Path, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """git's environment: `base` (the caller's, secrets already out; else ours without
    model credentials) without any GIT_* a user set, and our own settings."""
    source = base if base is not None else os.environ
    env = {k: v for k, v in source.items() if not k.startswith(("GIT_", "ANTHROPIC_", "CLAUDE_"))}
    env.update(
        GIT_DIR=str(git_dir),
        GIT_WORK_TREE=str(root),
        GIT_INDEX_FILE=str(index),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME="synapse",
        GIT_AUTHOR_EMAIL="synapse@localhost",
        GIT_COMMITTER_NAME="synapse",
        GIT_COMMITTER_EMAIL="synapse@localhost",
        LC_ALL="C",
    )
    return env


class Checkpoints:
    """The checkpoints of one session in one folder."""

    def __init__(
        self,
        root: Path,
        synapse_home: Path,
        session_id: str,
        records: Path,
        *,
        files: FileGateway | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.env = env  # git's environment, without secrets (None: ours, no credentials)
        home = Path(os.path.realpath(synapse_home))
        # $SYNAPSE_HOME inside the folder (the folder is $HOME): never kept, never restored.
        self.home_rel: str | None = None
        if home == self.root or self.root in home.parents:
            self.home_rel = home.relative_to(self.root).as_posix() if home != self.root else "."
        self.git_dir = store_dir(synapse_home, self.root)
        self.session_id = session_id
        self.records = records
        self.files = files
        self.index = self.git_dir / f"index-{session_id}"
        self.disabled: str | None = None  # why, once checkpoints are off for the session
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        self._current: Checkpoint | None = None
        self._snapshots = 0
        self.max_file_bytes = MAX_FILE_BYTES
        self.last_skipped: list[str] = []  # too large, at the last snapshot
        self._forgotten = False  # the session is deleted: nothing more is kept
        # Awaited with the turn's record once its end snapshot is taken, before it is
        # written (the hand-edit guard adds what changed since the agent's last command).
        self.on_end: Callable[[Checkpoint], Awaitable[None]] | None = None

    # ------------------------------------------------------------------ git

    async def _git(
        self, *args: str, stdin: bytes | None = None, check: bool = True, cwd: Path | None = None
    ) -> tuple[int, bytes, bytes]:
        env = _git_env(self.git_dir, self.root, self.index, self.env)
        if args[0] == "init":
            del env["GIT_WORK_TREE"], env["GIT_DIR"]
        # In a thread, not asyncio's subprocess: a task cancelled while asyncio starts a
        # process (the loop shutting down as a snapshot or gc begins) waits for an exit
        # it is never told of, and Python 3.11's asyncio.run hangs. A git command ends on
        # its own (bounded: GIT_TIMEOUT); a cancel stops waiting for it.
        try:
            done = await asyncio.to_thread(
                subprocess.run,
                ["git", *args],
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                env=env,
                cwd=cwd or self.root,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CheckpointError(f"git {args[0]}: no answer in {GIT_TIMEOUT:.0f} s") from None
        code, out, err = done.returncode, done.stdout, done.stderr
        if check and code != 0:
            message = err.decode("utf-8", "replace").strip() or f"exit {code}"
            raise CheckpointError(f"git {args[0]}: {message}")
        return code, out, err

    async def _ensure_store(self) -> None:
        info = self.git_dir / "info"
        configured = self.git_dir / STORE_CONFIG_MARK
        if configured.exists() and (info / "attributes").exists():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            await self._git("init", "--quiet", "--bare", str(self.git_dir))
            # Every object this store keeps is reachable from a ref (`_keep_ignored`):
            # a gc that prunes soon cannot drop another session's kept files.
            (self.git_dir / ALL_REACHABLE_MARK).touch()
        for key, value in (
            ("core.autocrlf", "false"),
            ("core.safecrlf", "false"),
            ("core.fileMode", "true"),
            ("core.attributesFile", os.devnull),  # not the user's global attributes either
            ("gc.auto", "0"),  # ours runs in the background, not inside a snapshot
            # A snapshot's status lists ignored files, which git's untracked cache does
            # not serve; keeping it up to date only cost a write of the index.
            ("core.untrackedCache", "false"),
            # Each of a snapshot's three git processes writes the index: split, a write
            # is the few changed entries, not all 10,000 (bench_checkpoints.py: -25%).
            ("core.splitIndex", "true"),
            ("core.bare", "false"),
        ):
            await self._git("config", key, value)
        configured.touch()
        info.mkdir(exist_ok=True)
        excludes = "*.synapse-lock\n*.synapse-tmp\n"
        if self.home_rel not in (None, "."):
            excludes += f"/{self.home_rel}/\n"
        (info / "exclude").write_text(excludes)
        (info / "attributes").write_text(ATTRIBUTES)
        (self.git_dir / "synapse-folder").write_text(str(self.root) + "\n")

    # ------------------------------------------------------------- snapshots

    async def _snapshot(self, label: str) -> tuple[str, list[str], dict[str, dict[str, Any]]]:
        """(tree, paths skipped as too large, ignored entries' fingerprints)."""
        await self._ensure_store()
        if not self.index.exists():  # a new session: from the folder's last snapshot
            await asyncio.to_thread(seed_index, self.git_dir, self.index)
        # One walk of the folder (git status: its stat cache, untracked cache and
        # threads) says what changed since the last snapshot, what is new, what is
        # ignored. The shadow store has no HEAD, so every kept file also shows as
        # "added" (X); Y is the work tree against the last snapshot.
        status = (
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching",
            "--no-renames",
        )  # fmt: skip
        try:
            _, out, _ = await self._git(*status)
        except CheckpointError as exc:
            if not self.index.exists():
                raise
            # The session's index is unreadable (its split index's shared part expired
            # while the session slept, a crash mid-write): start it anew, a full snapshot.
            log.warning(
                "checkpoint index of session %s unreadable (%s); rebuilt", self.session_id, exc
            )
            self.index.unlink()
            _, out, _ = await self._git(*status)
        candidates: list[str] = []
        ignored_listing: list[str] = []
        # Only the records that matter (of 10,000 "A " ones): a regex, 10x a Python loop.
        for xy, rel in _STATUS_RECORD.findall(b"\0" + out):
            name = rel.decode("utf-8", "surrogateescape")
            (ignored_listing if xy == b"!!" else candidates).append(name)
        if len(candidates) > MAX_FILES:
            raise CheckpointError(
                f"{self.root} has more than {MAX_FILES} files to keep; checkpoints are off "
                "for this session (open a smaller folder, or ignore build output in .gitignore)"
            )
        stage: list[str] = []
        skipped: list[str] = []
        gone: list[str] = []
        nested: list[str] = []
        for rel in candidates:
            if rel.endswith("/"):  # a nested repository: git keeps it as a link only
                nested.append(rel)  # fingerprinted instead (`_nested_sync`)
                continue
            if self._beyond_link(rel):  # its folder became a link: the file is gone here
                gone.append(rel)
                continue
            try:
                info = os.lstat(self.root / rel)
            except FileNotFoundError:
                stage.append(rel)  # deleted: --remove drops it
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size > self.max_file_bytes:
                skipped.append(rel)
                continue
            if stat.S_ISDIR(info.st_mode):  # a file that became a directory
                gone.append(rel)
                continue
            stage.append(rel)
        if skipped or gone:  # keep no stale copy of a file we no longer follow
            await self._git(
                "update-index", "--force-remove", "-z", "--stdin",
                stdin=b"".join(_z(p) for p in skipped + gone),
            )  # fmt: skip
        if stage:
            await self._git(
                "update-index", "--add", "--remove", "-z", "--stdin",
                stdin=b"".join(_z(p) for p in stage),
            )  # fmt: skip
        await self._overlay_open_texts()
        _, tree, _ = await self._git("write-tree")
        ignored = await self._ignored(sorted(ignored_listing))
        if nested:
            ignored.update(await asyncio.to_thread(self._nested_sync, sorted(nested)))
        self._snapshots += 1
        self.last_skipped = skipped
        if self._snapshots % GC_EVERY == 0:
            self._background_gc()
        # A snapshot is a tree (no commit object: nothing reads a history of them).
        return tree.decode().strip(), skipped, ignored

    async def _overlay_open_texts(self) -> None:
        """What an editor holds unsaved for files of the folder is what the agent and
        the user see: stage that text instead of the disk's."""
        getter = getattr(self.files, "open_texts", None)
        if getter is None:
            return
        try:
            texts: Mapping[Path, str] = getter()
        except Exception:
            log.debug("open_texts failed", exc_info=True)
            return
        for path, text in texts.items():
            try:
                rel = Path(os.path.realpath(path)).relative_to(self.root)
            except ValueError:
                continue
            data = text.encode("utf-8", "surrogatepass")
            try:
                if (self.root / rel).read_bytes() == data:
                    continue
            except OSError:
                pass
            _, blob, _ = await self._git("hash-object", "-w", "--stdin", stdin=data)
            await self._git(
                "update-index", "--add", "--cacheinfo",
                f"100644,{blob.decode().strip()},{rel.as_posix()}",
            )  # fmt: skip

    async def _ignored(self, listing: list[str]) -> dict[str, dict[str, Any]]:
        """Fingerprints of the ignored entries (the first `MAX_IGNORED_ENTRIES`); small
        regular files kept whole. Read here, never by git from a name: a name is only
        ever a file of the folder (no FIFO, device or link followed), and git gets bytes."""
        if not listing:
            return {}
        return await asyncio.to_thread(self._ignored_sync, listing[:MAX_IGNORED_ENTRIES])

    def _ignored_sync(self, listing: list[str]) -> dict[str, dict[str, Any]]:
        entries: dict[str, dict[str, Any]] = {}
        budget, count = IGNORED_CAPTURE_TOTAL, IGNORED_CAPTURE_COUNT
        for rel in listing:
            name = rel.rstrip("/")
            if self._under_home(name):
                continue
            path = self.root / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            entry: dict[str, Any] = {"size": info.st_size, "mtime": info.st_mtime_ns}
            if stat.S_ISDIR(info.st_mode):
                entry = {"dir": True, "mtime": info.st_mtime_ns}
            elif (
                stat.S_ISREG(info.st_mode)
                and count > 0
                and info.st_size <= min(IGNORED_CAPTURE_BYTES, budget)
                and not self._beyond_link(name)
            ):
                try:
                    data = read_regular(path, IGNORED_CAPTURE_BYTES, follow=False)
                except OSError:
                    data = None
                if data is not None:
                    entry["blob"] = self._store_blob(data)
                    entry["mode"] = info.st_mode & 0o777
                    budget -= len(data)
                    count -= 1
            entries[name] = entry
        return entries

    def _nested_sync(self, listing: list[str]) -> dict[str, dict[str, Any]]:
        """Nested repositories and submodules (git keeps only a link to them): one entry
        each, `name/`, whose fingerprint changes when a file in them does; a rewind
        reports them as not restorable (their own git has their history)."""
        entries: dict[str, dict[str, Any]] = {}
        for rel in listing[:MAX_NESTED_REPOS]:
            name = rel.rstrip("/")
            if self._under_home(name) or self._beyond_link(name):
                continue
            entries[name + "/"] = {"nested": True, "size": 0, "mtime": _tree_fingerprint(
                self.root / name)}  # fmt: skip
        return entries

    def _store_blob(self, data: bytes) -> str:
        """Write `data` as a loose git blob of the store (what `git hash-object -w` does,
        without handing git a path); its id."""
        return self._store_object(b"blob", data)

    def _store_object(self, kind: bytes, data: bytes) -> str:
        raw = b"%s %d\0" % (kind, len(data)) + data
        sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        target = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not target.exists():
            _write_bytes(target, zlib.compress(raw))
        return sha

    async def _keep_ignored(
        self, turn: int, phase: str, ignored: dict[str, dict[str, Any]]
    ) -> None:
        """Make the ignored files kept whole reachable, as gc sees it: a tree of their
        blobs named by a ref beside the snapshot's (no tree or ref named them; any gc
        could drop them, and a rewind could not restore `.env`)."""
        blobs = sorted({str(e["blob"]) for e in ignored.values() if e.get("blob")})
        if not blobs:
            return
        tree = b"".join(b"100644 %s\0" % sha.encode() + bytes.fromhex(sha) for sha in blobs)
        await self._update_ref(turn, f"{phase}-ignored", self._store_object(b"tree", tree))

    def _under_home(self, rel: str) -> bool:
        """True for a path inside $SYNAPSE_HOME (when the folder holds it)."""
        home = self.home_rel
        return home is not None and (home == "." or rel == home or rel.startswith(home + "/"))

    def _beyond_link(self, rel: str) -> bool:
        """True when a folder on `rel`'s path is a symbolic link."""
        parts = rel.split("/")[:-1]
        here = self.root
        for part in parts:
            here = here / part
            if here.is_symlink():
                return True
        return False

    def _repo_fingerprint(self) -> str | None:
        """The user's repository index and HEAD, as a fingerprint (read only)."""
        git = self.root / ".git"
        parts: list[str] = []
        for name in ("index", "HEAD"):
            target = git / name
            try:
                if name == "HEAD":  # small regular files only: never a FIFO or a device
                    head = read_regular(target, 4096, follow=False).decode(errors="replace")
                    parts.append(head.strip())
                    ref = head.strip()[5:] if head.startswith("ref: ") else ""
                    if ref.startswith("refs/") and ".." not in ref.split("/"):
                        with contextlib.suppress(OSError):
                            data = read_regular(git / ref, 4096, follow=False)
                            parts.append(data.decode(errors="replace").strip())
                else:
                    info = target.lstat()
                    parts.append(f"{info.st_size}:{info.st_mtime_ns}")
            except OSError:
                parts.append("-")
        return "|".join(parts) if git.exists() else None

    async def _update_ref(self, turn: int, phase: str, tree: str) -> None:
        """Keep the snapshot from gc: a loose ref naming its tree, written directly (the
        file git itself would write; no process to start on every turn)."""
        if self._forgotten:
            return
        ref = self.git_dir / "refs" / "synapse" / self.session_id / f"{turn}-{phase}"
        ref.parent.mkdir(parents=True, exist_ok=True)
        _write_bytes(ref, tree.encode() + b"\n")

    # ------------------------------------------------------------------ turns

    def begin_turn(self, turn: int, messages: int, prompt: str = "", events: int = 0) -> None:
        """Start the snapshot of the folder before `turn` (in the background: the model
        request goes on meanwhile; `ready()` waits for it before a command runs)."""
        if self.home_rel == ".":
            self.disabled = f"{self.root} is $SYNAPSE_HOME itself"
        if self.disabled is not None:
            return
        previous = self._pending
        self._pending = asyncio.create_task(self._begin(turn, messages, prompt, events, previous))

    async def _begin(
        self,
        turn: int,
        messages: int,
        prompt: str,
        events: int,
        previous: asyncio.Task[None] | None,
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is its own; our cancel is ours
        async with self._lock:
            try:
                commit, skipped, ignored = await self._snapshot(f"before turn {turn}")
                await self._update_ref(turn, "before", commit)
                await self._keep_ignored(turn, "before", ignored)
            except (CheckpointError, OSError) as exc:
                self.disabled = str(exc)
                log.warning("checkpoints off: %s", exc)
                return
            self._current = Checkpoint(
                turn=turn,
                before=commit,
                messages=messages,
                started_at=time.time(),
                prompt=prompt,
                events=events,
                skipped=skipped,
                ignored_before=ignored,
                repo_before=self._repo_fingerprint(),
            )
            self._write(self._current)

    async def ready(self) -> None:
        """Wait for the snapshot in progress (before a command may change the folder);
        one that takes over `READY_WAIT` turns checkpoints off for the session."""
        pending = self._pending
        if pending is not None and not pending.done():
            # asyncio.wait, not wait_for: Python 3.11's wait_for drops a cancel that comes
            # as the snapshot ends, and the command would run in a cancelled turn.
            done, _ = await asyncio.wait({pending}, timeout=READY_WAIT)
            if not done:
                self.disabled = (
                    f"the snapshot of {self.root} took over {READY_WAIT:.0f} s; checkpoints "
                    "are off for this session"
                )
            elif not pending.cancelled() and pending.exception() is not None:
                log.debug("snapshot failed", exc_info=pending.exception())

    def end_turn(self) -> None:
        """Start the snapshot of what the turn left (in the background)."""
        if self.disabled is not None or self._pending is None:
            return
        previous = self._pending
        self._pending = asyncio.create_task(self._end(previous))

    async def _end(self, previous: asyncio.Task[None]) -> None:
        await asyncio.wait([previous])
        async with self._lock:
            current, self._current = self._current, None
            if current is None or self.disabled is not None:
                return
            try:
                commit, skipped, ignored = await self._snapshot(f"after turn {current.turn}")
                await self._update_ref(current.turn, "after", commit)
                await self._keep_ignored(current.turn, "after", ignored)
                current.after = commit
                current.skipped = sorted(set(current.skipped) | set(skipped))
                current.ignored_after = ignored
                current.repo_after = self._repo_fingerprint()
                current.changed = await self._changes(current.before, commit)
                current.ignored_changed = _ignored_changes(current.ignored_before, ignored)
                if self.on_end is not None:
                    await self.on_end(current)
            except (CheckpointError, OSError) as exc:
                log.warning("checkpoint after turn %d: %s", current.turn, exc)
            self._write(current)
            await self._prune()

    async def probe(self) -> tuple[str, dict[str, dict[str, Any]]] | None:
        """The folder now, during a turn: a snapshot's tree and ignored entries, kept in
        no record or ref (the hand-edit guard compares two); None when none is taken."""
        if self.disabled is not None or self._current is None:
            return None
        async with self._lock:
            try:
                tree, _, ignored = await self._snapshot("probe")
            except (CheckpointError, OSError) as exc:
                log.info("checkpoint probe: %s", exc)
                return None
        return tree, ignored

    async def settle(self) -> None:
        """Wait for every snapshot started so far."""
        while self._pending is not None and not self._pending.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._pending)

    async def _changes(self, a: str, b: str) -> list[tuple[str, str]]:
        if a == b:  # the same tree: nothing changed (a turn that only read)
            return []
        _, out, _ = await self._git("diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b)
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2) if fields[i]]

    # ---------------------------------------------------------------- records

    def _write(self, checkpoint: Checkpoint) -> None:
        if self._forgotten:
            return
        try:
            self.records.mkdir(parents=True, exist_ok=True)
            path = self.records / f"{checkpoint.turn}.json"
            atomic_write(path, json.dumps(checkpoint.to_json()))
        except (OSError, FileError) as exc:  # a full disk must not end the conversation
            log.warning("cannot store checkpoint: %s", exc)

    def kept(self) -> list[Checkpoint]:
        """The kept checkpoints, oldest first."""
        out: list[Checkpoint] = []
        try:
            names = list(self.records.iterdir())
        except OSError:
            return []
        for path in names:
            if path.suffix != ".json" or not path.stem.isdigit():
                continue
            try:
                out.append(Checkpoint.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("unreadable checkpoint record %s", path)
        return sorted(out, key=lambda c: c.turn)

    def next_turn(self) -> int:
        kept = self.kept()
        return kept[-1].turn + 1 if kept else 1

    async def _prune(self) -> None:
        kept = self.kept()
        dropped = kept[: max(0, len(kept) - MAX_CHECKPOINTS)]
        if not dropped:
            return
        deletes = "".join(
            f"delete refs/synapse/{self.session_id}/{old.turn}-{phase}\n"
            for old in dropped
            for phase in ("before", "after", "before-ignored", "after-ignored")
        )  # one process for all (a ref that is not there is no error)
        await self._git("update-ref", "--stdin", stdin=deletes.encode(), check=False)
        for old in dropped:
            with contextlib.suppress(OSError):
                (self.records / f"{old.turn}.json").unlink()

    async def forget(self) -> None:
        """The session is deleted: drop its snapshots (refs, index, records kept in the
        store), then collect what only they kept (old file versions, small ignored
        files such as `.env`) in a store where every kept object has a ref (one made
        by this version: `ALL_REACHABLE_MARK`). Objects written in the last hour stay
        for a later gc: another session may be between writing and naming them. A
        snapshot still running (the session's last) names nothing once it ends."""
        if "/" in self.session_id or self.session_id in ("", ".", ".."):
            return
        self._forgotten = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READY_WAIT):
                await self.settle()
        with contextlib.suppress(OSError):
            self.index.unlink()
        shutil.rmtree(self.git_dir / "records" / self.session_id, ignore_errors=True)
        journal.forget(self.git_dir, self.session_id)  # a rewind it left unfinished
        if not (self.git_dir / "HEAD").exists():
            return
        prefix = f"refs/synapse/{self.session_id}/"
        here = self.git_dir  # not the folder: it may be gone, and its refs are to go anyway
        _, out, _ = await self._git(
            "for-each-ref", "--format=%(refname)", prefix, check=False, cwd=here
        )
        refs = [ref for ref in out.decode("utf-8", "surrogateescape").split() if ref]
        if not refs:
            return
        deletes = "".join(f"delete {ref}\n" for ref in refs).encode("utf-8", "surrogateescape")
        await self._git("update-ref", "--stdin", stdin=deletes, check=False, cwd=here)
        if not (self.git_dir / ALL_REACHABLE_MARK).exists():
            return  # an older store: its ignored files' blobs are unreachable, no early gc
        # Awaited (bounded): the delete's answer means the old versions are gone.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FORGET_GC_WAIT):
                await self._git("gc", "--quiet", "--prune=1.hour.ago", check=False, cwd=here)

    def _background_gc(self) -> None:
        async def gc() -> None:
            with contextlib.suppress(Exception):
                # The store's own gc.auto is 0 (never inside a snapshot); here it counts.
                await self._git("-c", "gc.auto=6700", "gc", "--auto", "--quiet", check=False)

        _in_background(gc())

    # ----------------------------------------------------------------- rewind

    async def rewind(
        self,
        turn: int,
        decide: Decide | None = None,
        *,
        conversation: dict[str, int] | None = None,
        progress: Progress | None = None,
    ) -> RewindReport:
        """Put back the files the turns since `turn` changed, as they were before it:
        decided (conflicts asked), journaled, then each replaced by rename
        (`checkpoint_restore.py`, `checkpoint_journal.py`). With `conversation` (the
        session's cut) the journal stays for the session to finish (`journal.remove`)."""
        try:
            await asyncio.wait_for(self.settle(), READY_WAIT)
        except TimeoutError:
            raise CheckpointError(
                f"a snapshot of {self.root} is still being taken after {READY_WAIT:.0f} s; "
                "nothing was rewound"
            ) from None
        kept = self.kept()
        since = [c for c in kept if c.turn >= turn]
        if not since or since[0].turn != turn:
            have = ", ".join(str(c.turn) for c in kept) or "none"
            raise CheckpointError(f"no checkpoint before turn {turn} (kept: {have})")
        async with self._lock:
            with journal.locked(self.git_dir, self.session_id) as free:
                if not free:
                    raise CheckpointError("a rewind of this session is already running")
                return await self._rewind(since, decide, conversation, progress)

    async def _rewind(
        self,
        since: list[Checkpoint],
        decide: Decide | None,
        conversation: dict[str, int] | None,
        progress: Progress | None,
    ) -> RewindReport:
        base, turn = since[0], since[0].turn
        last_after = since[-1].after
        if last_after is None:  # the last turn did not finish its snapshot
            last_after, _, _ = await self._snapshot(f"rewind of {turn}")
        touched: set[str] = set()
        ignored: set[str] = set()
        foreign: set[str] = set()
        for cp in since:
            changes = await self._changes(cp.before, cp.after or last_after)
            touched.update(path for _, path in changes)
            ignored.update(cp.ignored_changed)
            foreign.update(cp.foreign)
        report = RewindReport(turn)
        restorer = Restorer(self, report, decide, progress)
        await restorer.plan(sorted(touched), base.before, last_after, foreign)
        restorer.plan_ignored(ignored, base.ignored_before, since[-1].ignored_after, foreign)
        if restorer.steps or conversation is not None:  # written before any file changes
            journal.Journal(
                self.session_id, turn, str(self.root), str(self.records), str(self.index),
                restorer.steps, conversation,
            ).write(journal.journal_path(self.git_dir, self.session_id))  # fmt: skip
        await restorer.apply(base.before)
        too_large = {p for cp in since for p in cp.skipped}
        report.not_restorable.extend(sorted(too_large - set(report.not_restorable)))
        now = self._repo_fingerprint()
        report.repository_changed = base.repo_before is not None and now != base.repo_before
        # The rewound turns are gone; the next snapshot starts from the folder as it is.
        for cp in since:
            with contextlib.suppress(OSError):
                (self.records / f"{cp.turn}.json").unlink()
        with contextlib.suppress(OSError):
            self.index.unlink()
        if conversation is None:
            journal.remove(self.git_dir, self.session_id)
        return report


def _tree_fingerprint(top: Path, limit: int = NESTED_ENTRIES) -> str:
    """A hash of every entry's path, kind, size and mtime under `top` (its `.git` left
    out, links not followed, at most `limit` entries). Read by walking, never by running
    git there: a nested repository's config is the agent's to write, and `git status`
    would run what it names (`core.fsmonitor`)."""
    digest = hashlib.sha1(usedforsecurity=False)
    seen = 0
    stack = [top]
    while stack and seen < limit:
        folder = stack.pop()
        try:
            with os.scandir(folder) as items:
                entries = sorted(items, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            seen += 1
            digest.update(
                f"{entry.path}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0".encode(
                    "utf-8", "surrogateescape"
                )
            )
            if stat.S_ISDIR(info.st_mode):
                stack.append(Path(entry.path))
    return digest.hexdigest()


def _ignored_changes(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> list[str]:
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k, {}).get("mtime") != after.get(k, {}).get("mtime")
                  or before.get(k, {}).get("size") != after.get(k, {}).get("size"))  # fmt: skip


def _z(path: str) -> bytes:
    """A path as `update-index -z --stdin` reads it."""
    return path.encode("utf-8", "surrogateescape") + b"\0"


def _write_bytes(path: Path, data: bytes) -> None:
    """Atomic byte write (temp file + rename), parents created."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".synapse-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
