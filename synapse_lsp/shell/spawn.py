"""Starting bash: its private files, its environment, the supervisor (`procs`) and,
unless the sandbox mode is full-access, bubblewrap (`sandbox`).

bash runs as `bash --norc --noprofile --noediting -i` on a PTY (`terminal`), under
a supervisor that reaps and kills everything the session starts: it learns that we
are gone from the end of file of a pipe only we hold, and the process it forks
reports its pid on another pipe before it execs bash, or bwrap, which then tells
bash's pid on its `--info-fd`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

from synapse_lsp.config import Settings
from synapse_lsp.errors import ShellError
from synapse_lsp.shell import procs, sandbox
from synapse_lsp.shell.framing import environment_prompt_command
from synapse_lsp.shell.sandbox import SandboxStatus
from synapse_lsp.shell.seccomp import seccomp_fd
from synapse_lsp.shell.terminal import raw_output

START_TIMEOUT_S = 30.0  # generous: a loaded CI machine can take seconds to fork
# Names the socket of the shell's extension registry (`wrapper_files.SOCKET_ENV`).
SOCKET_ENV = "SYNAPSE_EXT_SOCKET"
# A command that may have made a repository in the workspace (checked for one after).
MAY_MAKE_REPO = re.compile(
    r"\bgit\b.*\b(?:init|clone|submodule|worktree)\b|\.git\b|"
    r"\b(?:tar|unzip|cp|mv|rsync|7z|bsdtar)\b"
)


@dataclass(frozen=True)
class WrapperDir:
    """The wrappers of the extension registry a shell belongs to
    (`wrapper_files.RunDir`): `bin_dir` goes first on PATH (before `$SYNAPSE_HOME/bin`),
    `socket` is exported as `$SYNAPSE_EXT_SOCKET`, and `visible` stays visible, read-only,
    in the sandbox, where the rest of `$SYNAPSE_HOME/run` (other registries' sockets)
    is hidden."""

    bin_dir: Path
    socket: Path
    visible: tuple[Path, ...]


class ShellFiles:
    """A bash's private 0700 directory (on tmpfs when there is one): the command file,
    rewritten in place for each command, and the FIFOs (`streams`)."""

    def __init__(self) -> None:
        self.dir: Path | None = _private_dir()
        self.cmd_path = str(self.dir / "cmd")
        self._script_fd = os.open(self.cmd_path, os.O_WRONLY | os.O_CREAT, 0o600)
        self._script_len = 0

    def write(self, command: str) -> None:
        try:
            data = command.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = command.encode("utf-8", "replace")
        # Rewritten in place: re-creating a file costs ~0.3 ms on ext4, this ~0.02 ms.
        data += b"\n"
        os.pwrite(self._script_fd, data, 0)
        if len(data) < self._script_len:
            os.ftruncate(self._script_fd, len(data))  # ~0.15 ms even on tmpfs: only when shorter
        self._script_len = len(data)

    def close(self) -> None:
        if self._script_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._script_fd)
            self._script_fd = -1
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def environment(
    base: dict[str, str], settings: Settings, wrappers: WrapperDir | None, nonce: str
) -> dict[str, str]:
    """The environment of a fresh bash: `base` without secrets and what bash would run
    or trip on, pagers off, `PATH` with the wrappers first."""
    # The model's credentials and the `secretEnv` variables stay in this process:
    # nothing the model runs inherits them (`synapse_lsp.policy.secrets`).
    from synapse_lsp.policy.secrets import child_env

    env = child_env(base, settings)
    # After the merge: `env=` may not bring back what bash would run or trip on.
    for name in ("BASH_ENV", "ENV", "PROMPT_COMMAND", "MAILCHECK", "HISTFILE", "CDPATH"):
        env.pop(name, None)
    own = [str(wrappers.bin_dir)] if wrappers is not None else []
    env.update(
        {
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "MANPAGER": "cat",
            "SYSTEMD_PAGER": "cat",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",  # stdout is a pipe: stream Python output live
            "GIT_TERMINAL_PROMPT": "0",
            "PS1": "",
            "PS2": "",
            "HISTFILE": "",
            "SYNAPSE_HOME": str(settings.synapse_home),
            "PATH": os.pathsep.join([*own, str(settings.bin_dir), env.get("PATH", os.defpath)]),
            "PROMPT_COMMAND": environment_prompt_command(nonce),
        }
    )
    env.pop(SOCKET_ENV, None)  # one inherited from an enclosing Synapse is not ours
    if wrappers is not None:
        env[SOCKET_ENV] = str(wrappers.socket)
    return env


@dataclass
class Launched:
    proc: PtyProcess
    bash_pid: int | None  # the forked child's (bwrap's when sandboxed: see `info_r`)
    parent_w: int  # its end of file tells the supervisor that we are gone
    info_r: int  # bwrap's `--info-fd` (-1 unsandboxed): `read_child_pid`
    pidfd: int  # the supervisor's, -1 where there is none


def launch(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    confine: Callable[[int, int], list[str]] | None,
    cleanup: Callable[[], None],
) -> Launched:
    """Start `argv` (bash) on a PTY under the supervisor; `confine(info_fd, seccomp_fd)`
    gives bwrap's prefix when sandboxed. On failure the pipes are closed, `cleanup()`
    is called and a ShellError says why."""
    parent_r, parent_w = os.pipe2(os.O_CLOEXEC)
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    info_r = info_w = filter_fd = -1

    def close_all() -> None:
        for fd in (parent_r, parent_w, report_r, report_w, info_r, info_w, filter_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        cleanup()

    if confine is not None:
        try:
            info_r, info_w = os.pipe2(os.O_CLOEXEC)
            filter_fd = seccomp_fd()
            argv = confine(info_w, filter_fd) + argv
        except OSError as exc:
            close_all()
            raise ShellError(f"cannot prepare the sandbox: {exc}") from exc
        env["TMPDIR"] = "/tmp"  # noqa: S108 - the sandbox's own /tmp

    def preexec() -> None:
        raw_output()
        if info_w >= 0:
            os.set_inheritable(info_w, True)  # bwrap's --info-fd
        if filter_fd >= 0:
            os.set_inheritable(filter_fd, True)  # bwrap's --seccomp
        procs.supervised_preexec(parent_r, report_w)

    try:
        proc = PtyProcess.spawn(
            argv,
            cwd=str(cwd),
            env=env,
            echo=False,
            dimensions=(50, 200),
            preexec_fn=preexec,
            pass_fds=tuple(fd for fd in (parent_r, report_w, info_w, filter_fd) if fd >= 0),
        )
        os.close(report_w)
        if filter_fd >= 0:
            os.close(filter_fd)  # bwrap has its copy
            filter_fd = -1
        report = os.read(report_r, 4)
        if info_w >= 0:
            os.close(info_w)
            info_w = -1
    except (OSError, Exception) as exc:  # ptyprocess raises plain Exception on exec failure
        close_all()
        raise ShellError(f"cannot start bash: {exc}") from exc
    os.close(parent_r)
    os.close(report_r)
    bash_pid = struct.unpack("i", report)[0] if len(report) == 4 else None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    return Launched(proc, bash_pid, parent_w, info_r, pidfd)


async def read_child_pid(fd: int, timeout: float) -> int | None:
    """bwrap's `--info-fd` JSON (`{"child-pid": N, ...}`): the sandboxed bash's pid,
    or None when bwrap failed before writing it (its message is on the PTY)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    os.set_blocking(fd, False)
    data = bytearray()
    while b"}" not in data:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _set_once, ready)
            try:
                await asyncio.wait({ready}, timeout=max(0.0, deadline - loop.time()))
            finally:
                loop.remove_reader(fd)
            if not ready.done():
                return None
            continue
        except OSError:
            return None
        if not chunk:
            break
        data += chunk
    try:
        pid = json.loads(bytes(data))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _private_dir() -> Path:
    """A 0700 directory for the command file and the FIFOs, on tmpfs when there is one."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or None  # unset: not the default dir
    for base in (runtime, "/dev/shm", None) if runtime else ("/dev/shm", None):
        if base is not None and not os.access(base, os.W_OK | os.X_OK):
            continue
        with contextlib.suppress(OSError):
            return Path(tempfile.mkdtemp(prefix="synapse-shell-", dir=base))
    raise ShellError("cannot create a private temporary directory")


# ------------------------------------------------------------ the sandbox


def sandbox_change(current: SandboxStatus | None, settings: Settings) -> SandboxStatus | None:
    """The status a bash started now would get, when it differs from `current` (the
    running one's)."""
    if current is None:
        return None
    if settings.sandbox == current.mode and (
        settings.network == current.network if current.sandboxed else current.mode == "full-access"
    ):
        return None  # per command: the same settings, no probe of bwrap
    wanted = sandbox.status(settings)
    same_mode = (current.mode, current.sandboxed) == (wanted.mode, wanted.sandboxed)
    same_network = not wanted.sandboxed or current.network == wanted.network
    return None if same_mode and same_network else wanted


def new_repositories(
    status: SandboxStatus | None, command: str, writable: Sequence[Path], known: set[Path]
) -> set[Path]:
    """After a command that may have made a repository (`MAY_MAKE_REPO`) in a
    workspace-write sandbox: the git folders in `writable` that are not `known`."""
    if (
        status is None
        or not status.sandboxed
        or status.mode != "workspace-write"
        or not MAY_MAKE_REPO.search(command)
    ):
        return set()
    return sandbox.nested_git_dirs(writable) - known


def new_git_warning(new: set[Path]) -> str:
    """What in the new repositories' git folders would make the user's next
    `git status` there run a program ("" when nothing)."""
    warnings = [
        f"{git}: {', '.join(found[:5])}"
        for git in sorted(new)
        if (found := sandbox.programs_in_git_config(git))
    ]
    if not warnings:
        return ""
    return (
        "\n[warning: a new repository's git config or hooks make git run programs "
        "(a user's `git status` there would run them): " + "; ".join(warnings) + "]\n"
    )
