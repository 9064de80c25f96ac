"""A rewind's journal, and the writes that never leave a file half-written.

A rewind (`restore.py`) first decides every file (asking about
conflicts), then writes its journal, `<shadow store>/rewinds/<session>.json`,
fsynced: for each file the blob of the store to put there (none: remove it), its
mode, the git blob id of what the file held when the rewind planned it (`was`) and
the temporary name its write uses. Only then does it put the files back, one at a
time, each replaced by rename: the bytes go to a temporary file in the same folder
(fsynced) that is renamed over the old one; a link is made at a temporary name and
renamed; a removal is one unlink. Last, the session cuts the conversation (when
asked) and removes the journal.

`recover()` finishes a journal left behind (the process was killed mid-rewind): a
file that already holds its target is done, one that still holds `was` is put back
now, any other was changed since by someone else and is left as it is, named in the
report; leftover temporary files go, the rewound turns' records are dropped, and the
conversation's cut is handed to the session (`ChatSession.resume` does it). A
running rewind holds the journal's lock (`flock` of `<session>.lock`), and recovery
takes it first: a rewind alive in another process is never finished behind its back.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from synapse_lsp.files import read_regular

JOURNAL_FORMAT = 1
GIT_TIMEOUT = 120.0  # a blob read at recovery that takes longer is given up
OTHER = "?"  # what a path holds that is neither missing, a regular file nor a link


def journal_dir(git_dir: Path) -> Path:
    return git_dir / "rewinds"


def journal_path(git_dir: Path, session_id: str) -> Path:
    return journal_dir(git_dir) / f"{session_id}.json"


def blob_id(data: bytes) -> str:
    """The git blob id of `data` (what a tree names a file's content by)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def target_id(blob: str | None, mode: int) -> str | None:
    """What `disk_id` says of a file that holds `blob` with `mode` (None: no file)."""
    if blob is None:
        return None
    return f"link:{blob}" if stat.S_ISLNK(mode) else blob


def disk_id(root: Path, rel: str, limit: int) -> str | None:
    """What `rel` holds on disk, as `target_id` names it: None when missing (or behind
    a link on its path: not in the folder), `OTHER` for a folder, a FIFO, a device or a
    file over `limit` bytes. Never follows a link."""
    try:
        dfd = open_parent(root, rel, create=False)
    except OSError:  # a folder on the way is missing, not a folder, or a link
        return None
    name = rel.rsplit("/", 1)[-1]
    try:
        info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + blob_id(os.fsencode(os.readlink(name, dir_fd=dfd)))  # noqa: PTH115
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return OTHER
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        try:
            chunks: list[bytes] = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return blob_id(b"".join(chunks))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return OTHER
    finally:
        os.close(dfd)


# ------------------------------------------------------------------ writes


def inside(root: Path, path: Path) -> bool:
    """True when `path`'s folder really is inside `root`: a turn may have replaced a
    folder with a link elsewhere (`ln -s ~/.ssh src`), and a restore must never write
    through it (the writes themselves walk from the root without following links,
    `open_parent`, so a link made after this check fails too)."""
    parent = os.path.realpath(path.parent)
    return parent == str(root) or parent.startswith(str(root) + os.sep)


def open_parent(root: Path, rel: str, *, create: bool) -> int:
    """A descriptor of `rel`'s folder, reached from `root` one name at a time with
    O_NOFOLLOW (a link on the way: OSError), missing folders made when `create`."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in rel.split("/")[:-1]:
            try:
                step = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                step = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = step
        return fd
    except BaseException:
        os.close(fd)
        raise


def temp_name(rel: str, tag: str) -> str:
    """The temporary name (in `rel`'s folder) of a rewind's write of `rel`."""
    return f".{rel.rsplit('/', 1)[-1][:100]}.{tag}.synapse-tmp"


def unlink_at(root: Path, rel: str) -> None:
    dfd = open_parent(root, rel, create=False)
    try:
        os.unlink(rel.rsplit("/", 1)[-1], dir_fd=dfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dfd)


def drop_temp(root: Path, rel: str, tmp: str) -> None:
    """A temporary file a killed write left (none: nothing to do)."""
    with contextlib.suppress(OSError):
        dfd = open_parent(root, rel, create=False)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
        finally:
            os.close(dfd)


def put_at(root: Path, rel: str, data: bytes, mode: int, tmp: str) -> None:
    """Replace `rel` by rename: `data` (a link's target when `mode` says a link) goes
    to `tmp` in the same folder (reached without following links), fsynced, then
    renamed over `rel`; a link there is replaced, never written through."""
    name = rel.rsplit("/", 1)[-1]
    dfd = open_parent(root, rel, create=True)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)  # left by a write that was killed
        if stat.S_ISLNK(mode):
            os.symlink(os.fsdecode(data), tmp, dir_fd=dfd)
        else:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dfd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
                os.fchmod(fd, mode & 0o777)
            finally:
                os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    finally:
        os.close(dfd)


# ----------------------------------------------------------------- journal


@dataclass
class Step:
    """One file of a rewind: put `blob` there with `mode` (None: remove it)."""

    path: str
    blob: str | None
    mode: int
    was: str | None  # what it held when planned (`disk_id`)
    tmp: str
    editor: bool = False  # goes to the editor's buffer (recovery writes the disk)

    @property
    def target(self) -> str | None:
        return target_id(self.blob, self.mode)


@dataclass
class Journal:
    session: str
    turn: int
    root: str
    records: str  # the session's checkpoint records (`<turn>.json`)
    index: str  # the session's index in the shadow store
    steps: list[Step] = field(default_factory=list)
    # The conversation's cut, for the session: {"messages": N, "events": N}.
    conversation: dict[str, int] | None = None
    report: list[str] = field(default_factory=list)  # what a recovery did, to tell
    told: bool = False  # the report was shown (by another session of the folder)

    def write(self, path: Path) -> None:
        """Write the journal whole (temp file, fsync, rename, folder fsync)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"format": JOURNAL_FORMAT, **asdict(self)}).encode()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.synapse-tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    @classmethod
    def load(cls, path: Path) -> Journal:
        raw: dict[str, Any] = json.loads(read_regular(path, 64 << 20, follow=False))
        if raw.get("format") != JOURNAL_FORMAT:
            raise ValueError(f"unknown journal format {raw.get('format')!r}")
        steps = [Step(**s) for s in raw.get("steps", [])]
        conversation = raw.get("conversation")
        return cls(
            session=str(raw["session"]),
            turn=int(raw["turn"]),
            root=str(raw["root"]),
            records=str(raw["records"]),
            index=str(raw["index"]),
            steps=steps,
            conversation=dict(conversation) if conversation is not None else None,
            report=[str(line) for line in raw.get("report", [])],
            told=bool(raw.get("told", False)),
        )


def remove(git_dir: Path, session_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        journal_path(git_dir, session_id).unlink()


def forget(git_dir: Path, session_id: str) -> None:
    """The session is deleted: its journal and its lock file go."""
    remove(git_dir, session_id)
    with contextlib.suppress(FileNotFoundError):
        (journal_dir(git_dir) / f"{session_id}.lock").unlink()


@contextlib.contextmanager
def locked(git_dir: Path, session_id: str) -> Iterator[bool]:
    """Hold the journal's lock for the block; yields False (and holds nothing) when
    another rewind or recovery of the session holds it now."""
    folder = journal_dir(git_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{session_id}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing it releases the lock


# ---------------------------------------------------------------- recovery


@dataclass
class Recovered:
    """An interrupted rewind, finished as far as it could be."""

    session: str
    turn: int
    lines: list[str]
    conversation: dict[str, int] | None  # the cut still to make (by the session)

    def text(self) -> str:
        head = (
            f"A rewind to before turn {self.turn} was interrupted (Synapse was stopped); "
            "it was finished now."
        )
        return "\n".join([head, *(f"  {line}" for line in self.lines)])


def read_blob(git_dir: Path, blob: str) -> bytes:
    """A blob of the shadow store (git, with no user or system config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "ANTHROPIC_"))}
    env.update(GIT_DIR=str(git_dir), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    done = subprocess.run(
        ["git", "cat-file", "blob", blob],
        env=env,
        cwd=git_dir,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(done.stderr.decode("utf-8", "replace").strip() or "git cat-file failed")
    return done.stdout


def _finish_steps(git_dir: Path, journal: Journal, limit: int) -> list[str]:
    root = Path(journal.root)
    finished: list[str] = []
    lines: list[str] = []
    for step in journal.steps:
        drop_temp(root, step.path, step.tmp)
        now = disk_id(root, step.path, limit)
        if now == step.target:
            continue  # put back before the process ended
        if now != step.was:
            lines.append(f"{step.path}: changed since the interrupted rewind; left as it is")
            continue
        try:
            if not inside(root, root / step.path):
                raise OSError("a folder on its path leads out of the folder (a link)")
            if step.blob is None:
                unlink_at(root, step.path)
            else:
                put_at(root, step.path, read_blob(git_dir, step.blob), step.mode, step.tmp)
        except (OSError, subprocess.SubprocessError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            lines.append(f"{step.path}: could not be put back ({why})")
            continue
        finished.append(step.path)
    if finished:
        lines.insert(0, "put back now: " + ", ".join(finished))
    elif not lines:
        lines.append("every file had been put back before it stopped")
    return lines


def _drop_records(journal: Journal) -> None:
    """The rewound turns' records (from `turn` on) and the session's index go, as the
    rewind itself would have done last."""
    records = Path(journal.records)
    with contextlib.suppress(OSError):
        for path in records.iterdir():
            if path.suffix == ".json" and path.stem.isdigit() and int(path.stem) >= journal.turn:
                with contextlib.suppress(OSError):
                    path.unlink()
    with contextlib.suppress(OSError):
        Path(journal.index).unlink()


def recover(
    git_dir: Path, session_id: str, *, owner: bool, limit: int = 8 << 20
) -> Recovered | None:
    """Finish the interrupted rewind of `session_id`, if one was left (None: none, one
    running now, or, not `owner`, one already told). The `owner` (the session itself,
    resumed) gets the conversation's cut to make, then removes the journal (`remove`);
    another session finishes the files only, and the cut stays for the owner."""
    path = journal_path(git_dir, session_id)
    if not path.exists():
        return None
    with locked(git_dir, session_id) as free:
        if not free:
            return None  # a rewind of it is running now (in another process)
        try:
            journal = Journal.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            remove(git_dir, session_id)
            return Recovered(session_id, 0, [f"its journal was unreadable ({exc})"], None)
        told = journal.told and not journal.steps
        if journal.steps:
            journal.report = _finish_steps(git_dir, journal, limit)
            _drop_records(journal)
            journal.steps, journal.told = [], not owner
            if journal.conversation is not None:
                journal.write(path)  # the files are done; the cut waits for its session
        found = Recovered(journal.session, journal.turn, journal.report, journal.conversation)
        if journal.conversation is None:
            remove(git_dir, session_id)
        elif not owner and not told:
            journal.told = True
            journal.write(path)
        return found if owner or not told else None


def pending(git_dir: Path) -> list[str]:
    """The sessions with a rewind journal in this shadow store."""
    try:
        names = [p.name for p in journal_dir(git_dir).iterdir()]
    except OSError:
        return []
    return sorted(n.removesuffix(".json") for n in names if n.endswith(".json"))
