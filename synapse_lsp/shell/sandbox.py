"""Kernel confinement of the persistent shell: bash runs inside bubblewrap (`bwrap`)
(formerly `synapse_lsp/sandbox.py`, which stays importable as a shim).

`status(settings)` says whether the shell can be sandboxed here (bwrap found on
`PATH` and able to create its namespaces: probed once per process and bwrap path),
and `bwrap_argv(...)` gives the command prefix `ShellSession` puts in front of bash:
the whole filesystem read-only, the writable roots (the workspace) writable again
except their `.git`, `$SYNAPSE_HOME` read-only with its `sessions/` hidden (and its
`run/` but for the shell's own extension registry's folder), a private `/tmp`, no
network unless asked. No pid namespace and no `--new-session`:
the shell's process handling needs host pids and bash's job control
(docs/shell.md, docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp.config import Settings
from synapse_lsp.shell import procs
from synapse_lsp.shell.seccomp import seccomp_fd as seccomp_fd  # re-exported
from synapse_lsp.shell.seccomp import seccomp_program as seccomp_program

# The name it always had: log settings and filters that name it keep working.
log = logging.getLogger("synapse_lsp.sandbox")

NOT_INSTALLED = "bubblewrap (bwrap) is not installed"
# A user namespace of its own even when Synapse runs as root, and no capability in it:
# root's kept capabilities would remount `/` read-write, and from a child user namespace
# the kernel refuses ptrace and /proc/PID/root of processes outside (same uid or not).
ISOLATION = ("--unshare-user", "--cap-drop", "ALL")
PROBE_TIMEOUT_S = 10.0

# What the probe found, by the resolved path of bwrap: None when it works, else why not.
_probes: dict[str, str | None] = {}
_warned: set[str] = set()
# PATH -> (the bwrap found there, its real path): `status` runs before every command,
# and a PATH walk costs a stat per folder; a cached bwrap that is gone is looked up again.
_found: dict[str, tuple[str, str]] = {}
probe_seconds: dict[str, float] = {}  # how long each probe took (benchmarks, logs)


@dataclass(frozen=True)
class SandboxStatus:
    """What a shell runs under: the requested `mode` and `network`, whether bubblewrap
    really confines it, and if not (but asked to), why."""

    mode: str
    sandboxed: bool
    network: str
    reason: str | None = None

    def describe(self) -> str:
        """Short text for banners and status bars."""
        if self.sandboxed:
            return f"{self.mode}, network {self.network} (bubblewrap)"
        if self.mode == "full-access":
            return "full-access (no sandbox)"
        return f"{self.mode} requested, NOT sandboxed: {self.reason or 'unknown reason'}"


def status(settings: Settings) -> SandboxStatus:
    """Whether a shell started now with `settings` runs sandboxed (see module doc)."""
    mode, network = settings.sandbox, settings.network
    if mode == "full-access":
        return SandboxStatus(mode, False, network, None)
    located = _bwrap()
    if located is None:
        reason: str | None = NOT_INSTALLED
        key = "<missing>"
    else:
        found, key = located
        if key not in _probes:
            _probes[key] = _probe(found)
        reason = _probes[key]
    if reason is not None:
        if key not in _warned:
            _warned.add(key)
            log.warning("the shell runs without a sandbox (%s requested): %s", mode, reason)
        return SandboxStatus(mode, False, network, reason)
    return SandboxStatus(mode, True, network, None)


def _bwrap() -> tuple[str, str] | None:
    """(bwrap on PATH, its real path), or None."""
    path = os.environ.get("PATH", "")
    cached = _found.get(path)
    if cached is not None and os.access(cached[1], os.X_OK):
        return cached
    found = shutil.which("bwrap")
    if found is None:
        return None
    _found[path] = (found, os.path.realpath(found))
    return _found[path]


def _probe(bwrap: str) -> str | None:
    """Run bwrap once with the shell's kind of arguments: None if it works, else why."""
    argv = [
        bwrap,
        *ISOLATION,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-net",
        "--die-with-parent",
        "--", shutil.which("true") or "/bin/true",
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"bwrap did not answer within {PROBE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"bwrap cannot be run: {exc}"
    finally:
        probe_seconds[os.path.realpath(bwrap)] = time.perf_counter() - started
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    first = lines[0] if lines else f"exit status {done.returncode}"
    if "namespace" in first.lower():
        return f"bwrap cannot create a user namespace here: {first}"
    return f"bwrap does not work here: {first}"


def _reset_for_tests() -> None:
    """Forget the probes and warnings (tests put a different bwrap on PATH)."""
    _probes.clear()
    _found.clear()
    _warned.clear()
    probe_seconds.clear()


TMP = Path("/tmp")  # noqa: S108 - the name commands use, inside or out


@dataclass(frozen=True)
class PathView:
    """How the session's commands spell paths, for Synapse's own file work (one world
    for every layer, docs/shell.md "One file system for every layer").

    A sandboxed shell sees `private_tmp` (a host directory) as `/tmp`, and every
    other path as the host has it: the rest of `/` is bound at its own path, and so
    are the folders bound again under `/tmp` (`own`: the workspace roots, Synapse's
    home and install when they live there). Built-ins, skill scripts, wrappers and
    the router's hand-over files go through this view, so `/tmp/x` names one file
    for `read`, `write`, `cat` and a skill script. Unsandboxed (full-access, or no
    bubblewrap) the view is the identity: `private_tmp` is None."""

    private_tmp: Path | None = None
    own: tuple[Path, ...] = ()

    def host(self, path: Path) -> Path:
        """The host path of `path` as a command spells it (absolute; relative paths
        are the caller's to join with a host cwd first)."""
        tmp = self.private_tmp
        if tmp is None or not path.is_absolute():
            return path
        norm = Path(os.path.normpath(path))
        if norm != TMP and not norm.is_relative_to(TMP):
            return path
        if any(norm == o or norm.is_relative_to(o) for o in self.own):
            return path
        return tmp.joinpath(*norm.relative_to(TMP).parts)

    def seen(self, path: Path) -> Path:
        """How a command spells the host path `path` (the inverse of `host`)."""
        tmp = self.private_tmp
        if tmp is None or not path.is_absolute():
            return path
        if path == tmp or path.is_relative_to(tmp):
            return Path(TMP, path.relative_to(tmp))
        return path

    def scratch(self, prefix: str) -> Path:
        """A new 0700 host directory that commands see too (`seen` spells it): in the
        private /tmp when sandboxed, else the host's temp folder. The caller removes it."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.private_tmp))


HOST_VIEW = PathView()

PRIVATE_TMP_PREFIX = "synapse-tmp-"
_swept = False


def make_private_tmp() -> Path:
    """A new 0700 host folder for a session's `/tmp`, named after this process
    (`synapse-tmp-<pid>-<start>-…`). The first call of a process also removes the
    folders of processes that are gone: a clean close removes its own, but a SIGTERM
    during a hook or a SIGKILL cannot."""
    global _swept
    if not _swept:
        _swept = True
        sweep_private_tmps()
    me = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{PRIVATE_TMP_PREFIX}{me}-{procs.start_ticks(me) or 0}-"))


def sweep_private_tmps(base: Path | None = None) -> list[Path]:
    """Remove this user's private /tmp folders whose process is gone; what was removed."""
    removed: list[Path] = []
    folder = Path(tempfile.gettempdir()) if base is None else base
    try:
        entries = list(folder.glob(PRIVATE_TMP_PREFIX + "*"))
    except OSError:
        return removed
    for entry in entries:
        fields = entry.name[len(PRIVATE_TMP_PREFIX) :].split("-")
        if len(fields) < 3 or not fields[0].isdigit() or not fields[1].isdigit():
            continue  # not named by this version (an older one's: left alone)
        pid, start = int(fields[0]), int(fields[1])
        ticks = procs.start_ticks(pid)
        if ticks is not None and (start == 0 or ticks == start):
            continue  # its process still runs
        if ticks is None and not Path("/proc/self/stat").exists():
            continue  # cannot tell
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


_OWN_INSTALL: dict[str, tuple[str, ...]] = {}  # asked for every command's path view


def own_install_under_tmp() -> tuple[str, ...]:
    """The venv and the package's folder when under /tmp (a clone there), once per prefix."""
    if sys.prefix not in _OWN_INSTALL:
        found: list[str] = []
        for place in (sys.prefix, str(Path(__file__).resolve().parents[2])):
            real = os.path.realpath(place)
            if (real == "/tmp" or real.startswith("/tmp/")) and real not in found:
                found.append(real)
        _OWN_INSTALL[sys.prefix] = tuple(found)
    return _OWN_INSTALL[sys.prefix]


# ------------------------------------------------------- nested repositories

# Folders not searched for nested repositories (big, and made by tools, not by hand).
_NOT_SEARCHED = frozenset(
    {"node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".cache",
     ".pytest_cache", ".ruff_cache", "target", ".gradle", ".git"}
)  # fmt: skip
NESTED_SEARCH_LIMIT = 20_000  # folders looked at per root, at most
# git settings that make git run a program (in a repository's config).
_RUNS_PROGRAMS = re.compile(
    r"^[ \t]*(?:(?:fsmonitor|hookspath|sshcommand|editor|pager|askpass|gitproxy|program|"
    r"textconv|driver|helper|clean|smudge|process|external|command|path)[ \t]*=|"
    r"\w+[ \t]*=[ \t]*!).*$",
    re.IGNORECASE | re.MULTILINE,
)


def nested_git_dirs(roots: Sequence[Path], limit: int = NESTED_SEARCH_LIMIT) -> set[Path]:
    """The git folders of the repositories inside `roots` but their own (a nested
    repository's `.git`, or where a worktree's or submodule's `.git` file points),
    found without following symlinks, skipping tool-made folders (`_NOT_SEARCHED`),
    looking at `limit` folders per root at most."""
    found: set[Path] = set()
    for root in roots:
        pending, seen = [Path(root)], 0
        while pending and seen < limit:
            folder = pending.pop()
            seen += 1
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name == ".git" and folder != Path(root):
                    git = _git_dir(Path(entry.path))
                    if git is not None:
                        found.add(git)
                elif entry.name not in _NOT_SEARCHED:
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(Path(entry.path))
    own = {Path(os.path.realpath(Path(r) / ".git")) for r in roots}
    return {g for g in found if not any(g == o or g.is_relative_to(o) for o in own)}


def _git_dir(dotgit: Path) -> Path | None:
    """The folder a `.git` entry stands for: itself, or a `gitdir:` file's target."""
    try:
        if dotgit.is_symlink():
            return Path(os.path.realpath(dotgit))
        if dotgit.is_dir():
            return Path(os.path.realpath(dotgit))
        text = dotgit.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            return Path(os.path.realpath(dotgit.parent / target))
    return None


def git_dir_binds(git_dirs: Sequence[Path]) -> list[str]:
    """bwrap arguments keeping what makes git run programs read-only in each of
    `git_dirs`: `config` (a missing one is bound to an empty file) and `hooks/`."""
    argv: list[str] = []
    for git in sorted(git_dirs):
        if not git.is_dir():
            continue
        config, hooks = git / "config", git / "hooks"
        if config.is_file() and not config.is_symlink():
            argv += ["--ro-bind", str(config), str(config)]
        elif not config.exists():
            argv += ["--ro-bind", "/dev/null", str(config)]
        if hooks.is_dir() and not hooks.is_symlink():
            argv += ["--ro-bind", str(hooks), str(hooks)]
        elif not hooks.exists():
            argv += ["--tmpfs", str(hooks), "--remount-ro", str(hooks)]
    return argv


def programs_in_git_config(git: Path) -> list[str]:
    """Lines of `git`'s config that make git run a program, and its hooks (not the
    `.sample` files `git init` writes): what a user's next `git status` there runs."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        text = (git / "config").read_text(encoding="utf-8", errors="replace")[:65536]
        found += [m.group(0).strip() for m in _RUNS_PROGRAMS.finditer(text)]
    with contextlib.suppress(OSError):
        found += [
            f"hooks/{h.name}"
            for h in (git / "hooks").iterdir()
            if not h.name.endswith(".sample") and h.is_file()
        ]
    return found


# The folder's files that decide what the agent may do (`permissions.governing`).
GOVERNING_IN_FOLDER = (".synapse", ".claude", "mcp_servers.json", ".mcp.json")


def bwrap_argv(
    sandbox: SandboxStatus,
    *,
    writable: Sequence[Path],
    private_dir: Path | None,
    private_tmp: Path | None,
    synapse_home: Path,
    info_fd: int | None,
    extension_dirs: Sequence[Path] | None = None,
    chdir: Path | None = None,
    seccomp: int = -1,
    nested_git: Sequence[Path] = (),
) -> list[str]:
    """The bwrap prefix for bash (it ends with `--`). Later binds win over earlier ones
    on the same or an enclosing path, so the order below is the policy:

    1. a user namespace without capabilities (`ISOLATION`); everything read-only
       (`--ro-bind / /`), a fresh `/dev` (hides `/dev/shm`) and `/proc`,
       `private_tmp` as `/tmp`;
    2. workspace-write: each writable root writable, then each root's own `.git`
       read-only again; read-only: each root read-only (bound all the same: one
       under the host's /tmp would be hidden by the private /tmp);
    3. `synapse_home` read-only (even inside a writable root) and its `sessions/`
       an empty tmpfs (the directory is created here if missing); with
       `extension_dirs` given (a shell), its `run/` an empty tmpfs too, and each of
       `extension_dirs` (the shell's registry's wrappers and socket) read-only again:
       the shell reaches its own registry's socket and no other's;
    4. `private_dir` (the shell's command file and FIFOs) at its own path, read-only:
       bash only reads the command file and opens the FIFOs, which a read-only mount
       allows;
    5. no network unless `sandbox.network == "on"`; the sandbox dies with its parent
       (the session's supervisor); `info_fd` receives bwrap's JSON with the shell's
       pid ("child-pid").
    """
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [
        bwrap,
        *ISOLATION,
        "--die-with-parent",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
    ]  # fmt: skip
    # A one-off process (a skill script) gets an empty /tmp of its own.
    argv += ["--bind", str(private_tmp), "/tmp"] if private_tmp else ["--tmpfs", "/tmp"]
    # Synapse itself (the interpreter its wrappers run, its package) when it lives under
    # /tmp, which the private /tmp hides: read-only at its own path.
    for own in own_install_under_tmp():
        argv += ["--ro-bind", own, own]
    roots = [Path(root) for root in writable]
    if sandbox.mode == "workspace-write":
        for root in roots:
            argv += ["--bind", str(root), str(root)]
        for root in roots:
            git = root / ".git"
            if git.is_symlink() and git.exists():
                git = git.resolve()  # a linked .git: its target is what must not change
            if git.exists():
                argv += ["--ro-bind", str(git), str(git)]
            # What governs the agent in the folder (policy.governing): read-only
            # where it exists, like .git (a missing one a command could create is not
            # honoured unconfirmed: docs/threat-model.md).
            for name in GOVERNING_IN_FOLDER:
                found = root / name
                if found.exists() and not found.is_symlink():
                    argv += ["--ro-bind", str(found), str(found)]
        # Nested repositories (a sub-project, a submodule, a worktree): what makes git
        # run programs stays read-only, commits still work (docs/threat-model.md).
        argv += git_dir_binds(nested_git)
    else:  # read-only: bound anyway, a root under /tmp would be hidden by the private one
        for root in roots:
            argv += ["--ro-bind", str(root), str(root)]
    # Created first when missing: inside a writable root (a workspace that is $HOME)
    # a command could otherwise create it, settings.json included.
    # Hidden (an empty tmpfs each): conversations, the checkpoint store (old file
    # versions, unsaved editor text, small ignored files such as .env) and the MCP
    # configs ACP clients pass (they may hold the client's tokens).
    hidden = [synapse_home / name for name in ("sessions", "checkpoints", "acp")]
    for folder in hidden:
        with contextlib.suppress(OSError):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    run = synapse_home / "run"
    if extension_dirs is not None:
        with contextlib.suppress(OSError):
            run.mkdir(mode=0o700, parents=True, exist_ok=True)
    if synapse_home.is_dir():
        argv += ["--ro-bind", str(synapse_home), str(synapse_home)]
        for folder in hidden:
            if folder.is_dir():
                argv += ["--tmpfs", str(folder)]
        if extension_dirs is not None and run.is_dir():
            argv += ["--tmpfs", str(run)]
    for folder in extension_dirs or ():
        if folder.is_dir():
            argv += ["--ro-bind", str(folder), str(folder)]
    if private_dir is not None:
        argv += ["--ro-bind", str(private_dir), str(private_dir)]
    if sandbox.network != "on":
        argv.append("--unshare-net")
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if chdir is not None:  # else bwrap keeps the cwd, or goes $HOME when it is not seen
        argv += ["--chdir", str(chdir)]
    if seccomp >= 0:  # the set-id filter (`seccomp_program`), read by bwrap from this fd
        argv += ["--seccomp", str(seccomp)]
    return [*argv, "--"]


def command_prefix(
    settings: Settings,
    writable: Sequence[Path],
    *,
    extension_dirs: Sequence[Path] = (),
    view: PathView = HOST_VIEW,
    cwd: Path | None = None,
    seccomp: int = -1,
) -> list[str]:
    """The bwrap prefix confining a one-off process (a skill script) the way the
    session's shell is confined, or [] when the shell would not be sandboxed: of
    `$SYNAPSE_HOME/run/` it sees only `extension_dirs` (its registry's own); its
    `/tmp` is the session's (`view.private_tmp`; an empty one when there is none) and
    it starts in the host directory `cwd` as the session spells it."""
    confined = status(settings)
    if not confined.sandboxed:
        return []
    return bwrap_argv(
        confined,
        writable=writable,
        private_dir=None,
        private_tmp=view.private_tmp,
        synapse_home=settings.synapse_home,
        info_fd=None,
        extension_dirs=tuple(extension_dirs),
        chdir=view.seen(cwd) if cwd is not None else None,
        seccomp=seccomp,
    )
