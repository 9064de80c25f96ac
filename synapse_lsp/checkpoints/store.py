"""The shadow git store of a folder, as one session uses it: where it lives
(`store_dir`), git run on it (`GitStore.git`: our environment, bounded, in a thread),
its setup, objects and refs written directly, the diff of two snapshots, and gc.

The store is `$SYNAPSE_HOME/checkpoints/<hash of the folder>/`, a bare git
repository used with `--work-tree=<folder>`: the user's `.git` is never read for
writing or changed, and folders that are not repositories work alike. Objects are
shared by every session of the folder; each session has its own index
(`index-<session>`) and refs (`refs/synapse/<session>/<turn>-before|after`, each
naming a snapshot's tree). Old objects are reclaimed by git's own gc, run now and
then in the background, and at once (bounded) when a session is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import subprocess
import zlib
from collections.abc import Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any

from synapse_lsp.checkpoints.record import CheckpointError

GIT_TIMEOUT = 600.0  # a git command of the store that takes longer is killed
FORGET_GC_WAIT = 120.0  # how long deleting a session waits for the store's gc
ALL_REACHABLE_MARK = "synapse-all-reachable"  # a store made since ignored blobs have refs
STORE_CONFIG_MARK = "synapse-config-2"  # a store configured as `GitStore.ensure` does now
# What the shadow store must never apply to a file's bytes: line-ending conversion,
# `ident`, encodings, filters (whatever the folder's .gitattributes say).
ATTRIBUTES = "* -text -eol -crlf -ident -filter -working-tree-encoding\n"

_BACKGROUND: set[asyncio.Task[None]] = set()  # gc runs (the loop keeps only weak refs)


def _in_background(work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


# Git commands that change the entries of the session's index.
_INDEX_WRITERS = frozenset({"update-index", "read-tree", "rm", "add", "mv", "reset"})


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


def write_bytes(path: Path, data: bytes) -> None:
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


class GitStore:
    """The shadow store of `root` (`git_dir`) as session `session_id` uses it: its
    index, its refs, git's environment (`env`: without secrets; None: ours, without
    model credentials)."""

    def __init__(
        self,
        root: Path,
        git_dir: Path,
        session_id: str,
        *,
        env: Mapping[str, str] | None = None,
        home_rel: str | None = None,
    ) -> None:
        self.root = root
        self.git_dir = git_dir
        self.session_id = session_id
        self.index = git_dir / f"index-{session_id}"
        # Commands run that may change what the index holds (`status` only refreshes
        # its stat cache): a snapshot whose index did not change has the last tree.
        self.index_writes = 0
        self.env = env
        self.home_rel = home_rel  # $SYNAPSE_HOME inside the folder: excluded

    async def git(
        self, *args: str, stdin: bytes | None = None, check: bool = True, cwd: Path | None = None
    ) -> tuple[int, bytes, bytes]:
        env = _git_env(self.git_dir, self.root, self.index, self.env)
        if args[0] in _INDEX_WRITERS:
            self.index_writes += 1
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

    async def ensure(self) -> None:
        """The store exists and is configured as this version does it."""
        info = self.git_dir / "info"
        configured = self.git_dir / STORE_CONFIG_MARK
        if configured.exists() and (info / "attributes").exists():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            await self.git("init", "--quiet", "--bare", str(self.git_dir))
            # Every object this store keeps is reachable from a ref (`keep_ignored`):
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
            await self.git("config", key, value)
        configured.touch()
        info.mkdir(exist_ok=True)
        excludes = "*.synapse-lock\n*.synapse-tmp\n"
        if self.home_rel not in (None, "."):
            excludes += f"/{self.home_rel}/\n"
        (info / "exclude").write_text(excludes)
        (info / "attributes").write_text(ATTRIBUTES)
        (self.git_dir / "synapse-folder").write_text(str(self.root) + "\n")

    def store_blob(self, data: bytes) -> str:
        """Write `data` as a loose git blob of the store (what `git hash-object -w` does,
        without handing git a path); its id."""
        return self.store_object(b"blob", data)

    def store_object(self, kind: bytes, data: bytes) -> str:
        raw = b"%s %d\0" % (kind, len(data)) + data
        sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        target = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not target.exists():
            write_bytes(target, zlib.compress(raw))
        return sha

    def write_ref(self, name: str, tree: str) -> None:
        """Keep a snapshot from gc: a loose ref `refs/synapse/<session>/<name>` naming
        its tree, written directly (the file git itself would write; no process to
        start on every turn)."""
        ref = self.git_dir / "refs" / "synapse" / self.session_id / name
        ref.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(ref, tree.encode() + b"\n")

    async def drop_turns(self, turns: Iterable[int]) -> None:
        """The refs of `turns` go (their snapshots and kept ignored files)."""
        deletes = "".join(
            f"delete refs/synapse/{self.session_id}/{turn}-{phase}\n"
            for turn in turns
            for phase in ("before", "after", "before-ignored", "after-ignored")
        )  # one process for all (a ref that is not there is no error)
        await self.git("update-ref", "--stdin", stdin=deletes.encode(), check=False)

    async def changes(self, a: str, b: str) -> list[tuple[str, str]]:
        """(status A/M/D, path) of each file that differs between trees `a` and `b`."""
        if a == b:  # the same tree: nothing changed (a turn that only read)
            return []
        _, out, _ = await self.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b)
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2) if fields[i]]

    async def forget(self) -> None:
        """Every ref of the session goes, then (bounded) a gc collects what only they
        kept, in a store where every kept object has a ref (one made by this version:
        `ALL_REACHABLE_MARK`). Objects written in the last hour stay for a later gc:
        another session may be between writing and naming them."""
        if not (self.git_dir / "HEAD").exists():
            return
        prefix = f"refs/synapse/{self.session_id}/"
        here = self.git_dir  # not the folder: it may be gone, and its refs are to go anyway
        _, out, _ = await self.git(
            "for-each-ref", "--format=%(refname)", prefix, check=False, cwd=here
        )
        refs = [ref for ref in out.decode("utf-8", "surrogateescape").split() if ref]
        if not refs:
            return
        deletes = "".join(f"delete {ref}\n" for ref in refs).encode("utf-8", "surrogateescape")
        await self.git("update-ref", "--stdin", stdin=deletes, check=False, cwd=here)
        if not (self.git_dir / ALL_REACHABLE_MARK).exists():
            return  # an older store: its ignored files' blobs are unreachable, no early gc
        # Awaited (bounded): the delete's answer means the old versions are gone.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FORGET_GC_WAIT):
                await self.git("gc", "--quiet", "--prune=1.hour.ago", check=False, cwd=here)

    def background_gc(self) -> None:
        async def gc() -> None:
            with contextlib.suppress(Exception):
                # The store's own gc.auto is 0 (never inside a snapshot); here it counts.
                await self.git("-c", "gc.auto=6700", "gc", "--auto", "--quiet", check=False)

        _in_background(gc())
