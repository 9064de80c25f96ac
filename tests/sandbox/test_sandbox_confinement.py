"""What bubblewrap confines, with real bash and real bwrap: writes outside the
workspace, the network, `.git`, `$SYNAPSE_HOME`, /tmp; and that the shell's process
handling (timeouts, interrupts, close) still reaches every process."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.shell import ShellSession
from tests.test_shell import FAMILY, _session_members, _wait_for_file, _wait_gone

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed on this machine"
)

EROFS = "Read-only file system"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A real TCP listener on 127.0.0.1 in the test process (outside any sandbox)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def _connect_command(sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{port}), timeout=5); print('connected')\""
    )


def _accepted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


async def _start(workdir: Path, settings: Settings) -> ShellSession:
    session = ShellSession(workdir, settings)
    await session.start()
    assert session.sandbox.sandboxed, session.sandbox.describe()
    return session


# ------------------------------------------------------- writes outside


async def test_writes_outside_the_workspace_are_refused(
    shell: ShellSession, workdir: Path, outside: Path
) -> None:
    (workdir / "src.txt").write_text("payload\n")
    (workdir / "link").symlink_to(outside / "via-link.txt")
    (workdir / "dirlink").symlink_to(outside)
    attempts = {
        "python": f"python3 -c \"open('{outside}/py.txt', 'w').write('x')\"",
        "cp": f"cp src.txt {outside}/cp.txt",
        "dd": f"dd if=src.txt of={outside}/dd.txt",
        "symlink": "echo x > link",
        "dir symlink": "echo x > dirlink/through-dir.txt",
        "mkdir": f"mkdir {outside}/newdir",
        "rm": f"rm -f {outside}/keep.txt",
    }
    (outside / "keep.txt").write_text("kept\n")
    for name, command in attempts.items():
        result = await shell.run(command)
        assert result.exit_code != 0, name
        assert EROFS in result.stderr, (name, result.stderr)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "kept\n"
    assert not (workdir / "link").resolve().exists()


async def test_no_way_back_out_through_mount_or_proc(shell: ShellSession, outside: Path) -> None:
    """Capabilities are dropped (as root too: a remount would undo every read-only
    bind) and, from a user namespace of its own, /proc/PID/root and /cwd of processes
    outside (this test process, Synapse's own kind) are refused."""
    me = os.getpid()
    attempts = {
        "remount": f"mount -o remount,rw / ; touch {outside}/after-remount.txt",
        "proc root": f"echo x > /proc/{me}/root{outside}/proc-root.txt",
        "proc cwd": f"ls /proc/{me}/cwd/",
    }
    for name, command in attempts.items():
        result = await shell.run(command)
        assert result.exit_code != 0, (name, result)
    caps = await shell.run("grep CapEff /proc/self/status")
    assert caps.stdout.split() == ["CapEff:", "0000000000000000"]
    assert list(outside.iterdir()) == []


async def test_writes_inside_the_workspace_work(shell: ShellSession, workdir: Path) -> None:
    result = await shell.run(
        "mkdir -p sub && echo hi > sub/a.txt && cp sub/a.txt b.txt && "
        "python3 -c \"open('c.txt', 'w').write('c')\" && rm sub/a.txt && ls"
    )
    assert result.exit_code == 0, result.stderr
    assert (workdir / "b.txt").read_text() == "hi\n"
    assert (workdir / "c.txt").read_text() == "c"
    assert not (workdir / "sub" / "a.txt").exists()


async def test_home_is_read_only(shell: ShellSession) -> None:
    marker = Path.home() / f".synapse-sandbox-probe-{id(shell)}"
    result = await shell.run(f"touch {marker}")
    assert result.exit_code != 0 and EROFS in result.stderr
    assert not marker.exists()


async def test_tmp_is_private_to_the_session(shell: ShellSession) -> None:
    name = f"synapse-private-{id(shell)}.txt"
    result = await shell.run(f"echo secret > /tmp/{name} && cat /tmp/{name} && echo $TMPDIR")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "secret\n/tmp\n"
    assert not (Path("/tmp") / name).exists()  # noqa: S108 - the host's /tmp
    tmp = shell.private_tmp
    assert tmp is not None and (tmp / name).read_text() == "secret\n"
    await shell.run("cd /tmp")
    assert shell.cwd == tmp  # the host path of where bash is
    await shell.close()
    assert not tmp.exists()


async def test_git_internals_are_read_only(workdir: Path, settings: Settings) -> None:
    subprocess.run(["git", "init", "-q", str(workdir)], check=True)
    head = (workdir / ".git" / "HEAD").read_text()
    session = await _start(workdir, settings)
    try:
        for command in (
            "echo 'ref: refs/heads/evil' > .git/HEAD",
            "touch .git/hooks/pre-commit",
            "echo '[core] fsmonitor = evil' >> .git/config",
        ):
            result = await session.run(command)
            assert result.exit_code != 0 and EROFS in result.stderr, command
        assert (workdir / ".git" / "HEAD").read_text() == head
        assert not (workdir / ".git" / "hooks" / "pre-commit").exists()
        # the work tree itself stays writable, and git can still read
        result = await session.run("echo x > tracked.txt && git status --porcelain")
        assert result.exit_code == 0 and "tracked.txt" in result.stdout
    finally:
        await session.close()


@pytest.mark.parametrize("inside", [False, True], ids=["beside", "inside the workspace"])
async def test_synapse_home_is_read_only_and_sessions_hidden(
    workdir: Path, settings: Settings, inside: bool
) -> None:
    home = workdir / ".synapse" if inside else settings.synapse_home
    settings = Settings(synapse_home=home, sandbox="workspace-write", network="off")
    (home / "sessions").mkdir(parents=True)
    (home / "sessions" / "chat.json").write_text('{"secret": "conversation"}')
    (home / "checkpoints" / "proj-1").mkdir(parents=True)
    (home / "checkpoints" / "proj-1" / "blob").write_text("TOKEN=from-an-old-.env")
    (home / "acp" / "s1").mkdir(parents=True)
    (home / "acp" / "s1" / "mcp_servers.json").write_text('{"token": "client-token"}')
    (home / "settings.json").write_text("{}")
    session = await _start(workdir, settings)
    try:
        result = await session.run(f'echo \'{{"permission": "auto"}}\' > {home}/settings.json')
        assert result.exit_code != 0 and EROFS in result.stderr
        result = await session.run(f"mkdir {home}/bin2")
        assert result.exit_code != 0 and EROFS in result.stderr
        result = await session.run(f"cat {home}/sessions/chat.json")
        assert result.exit_code != 0 and "conversation" not in result.stdout
        assert (await session.run(f"ls -A {home}/sessions")).stdout == ""
        # The checkpoint store and ACP clients' MCP configs are hidden the same way.
        seen = await session.run(f"cat {home}/checkpoints/proj-1/blob {home}/acp/s1/*")
        assert "TOKEN" not in seen.stdout and "client-token" not in seen.stdout
        assert (await session.run(f"ls -A {home}/checkpoints {home}/acp")).stdout.split() == [
            f"{home}/acp:",
            f"{home}/checkpoints:",
        ]
        assert (home / "settings.json").read_text() == "{}"
        assert not (home / "bin2").exists()
    finally:
        await session.close()


async def test_missing_synapse_home_is_created_before_it_can_be_planted(
    workdir: Path,
) -> None:
    home = workdir / ".synapse"  # a workspace that holds the (not yet made) home
    settings = Settings(synapse_home=home, sandbox="workspace-write", network="off")
    session = await _start(workdir, settings)
    try:
        result = await session.run(f"echo '{{}}' > {home}/settings.json")
        assert result.exit_code != 0 and EROFS in result.stderr
        assert not (home / "settings.json").exists()
    finally:
        await session.close()


async def test_read_only_mode_refuses_workspace_writes(workdir: Path, settings: Settings) -> None:
    settings = Settings(synapse_home=settings.synapse_home, sandbox="read-only", network="off")
    (workdir / "a.txt").write_text("original\n")
    session = await _start(workdir, settings)
    try:
        result = await session.run("echo changed > a.txt")
        assert result.exit_code != 0 and EROFS in result.stderr
        assert (workdir / "a.txt").read_text() == "original\n"
        assert (await session.run("cat a.txt")).stdout == "original\n"
        assert (await session.run("echo t > /tmp/t && cat /tmp/t")).stdout == "t\n"
        assert session.writable_paths == (Path("/tmp"),)  # noqa: S108
    finally:
        await session.close()


# ------------------------------------------------------------- network


async def test_network_off_refuses_a_loopback_connect(
    shell: ShellSession, listener: socket.socket
) -> None:
    result = await shell.run(_connect_command(listener))
    assert result.exit_code != 0
    assert "connected" not in result.stdout
    assert "Error" in result.stderr  # ConnectionRefusedError / OSError: unreachable
    assert not _accepted(listener)


async def test_network_on_allows_the_loopback_connect(
    workdir: Path, settings: Settings, listener: socket.socket
) -> None:
    settings = Settings(synapse_home=settings.synapse_home, sandbox="workspace-write", network="on")
    session = await _start(workdir, settings)
    try:
        assert session.sandbox.describe() == "workspace-write, network on (bubblewrap)"
        result = await session.run(_connect_command(listener))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == "connected\n"
        assert _accepted(listener)
        # still confined on disk
        assert EROFS in (await session.run("touch /synapse-probe")).stderr
    finally:
        await session.close()


# ------------------------------------------------------ the session itself


async def test_cwd_and_env_persist(shell: ShellSession, workdir: Path) -> None:
    assert shell.sandbox.describe() == "workspace-write, network off (bubblewrap)"
    (workdir / "sub").mkdir()
    assert (await shell.run("cd sub && export KEEP=kept")).exit_code == 0
    result = await shell.run("pwd; echo $KEEP")
    assert result.stdout == f"{workdir / 'sub'}\nkept\n"
    assert shell.cwd == workdir / "sub"


async def test_cwd_is_the_host_path_of_where_bash_is(shell: ShellSession, workdir: Path) -> None:
    """`$PWD`'s spelling when it names bash's directory (a symlink kept), the plain path
    otherwise, and the host's path of the sandbox's private /tmp, command after command."""
    (workdir / "real").mkdir()
    (workdir / "link").symlink_to(workdir / "real")
    for _ in range(2):
        await shell.run("cd link")
        assert shell.cwd == workdir / "link"
        await shell.run(f"cd {workdir / 'real'}")
        assert shell.cwd == workdir / "real"
        await shell.run("mkdir -p /tmp/sub && cd /tmp/sub")
        tmp = shell.private_tmp
        assert tmp is not None and shell.cwd == tmp / "sub"
        await shell.run("true")
        assert shell.cwd == tmp / "sub"
        await shell.run(f"cd {workdir}")
        assert shell.cwd == workdir


async def test_bash_pid_is_the_host_pid_under_bwrap(shell: ShellSession) -> None:
    result = await shell.run("echo $$")
    assert int(result.stdout) == shell.pid
    comm = Path(f"/proc/{shell.pid}/comm").read_text().strip()
    assert comm == "bash"
    parent = int(Path(f"/proc/{shell.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert Path(f"/proc/{parent}/comm").read_text().strip() == "bwrap"
    # what the framing checks read from outside: bash's cwd and the read it waits in
    assert Path(f"/proc/{shell.pid}/cwd").resolve() == shell.cwd
    assert Path(f"/proc/{shell.pid}/syscall").read_text().split()[0].isdigit()


async def test_interrupt_kills_the_whole_command_tree(shell: ShellSession, workdir: Path) -> None:
    await shell.run("export KEEP=kept")
    task = asyncio.create_task(shell.run(FAMILY, timeout=60))
    grandchild = int(await _wait_for_file(workdir / "grandchild.pid"))
    child = int(await _wait_for_file(workdir / "child.pid"))
    shell.interrupt()
    result = await task
    assert result.cancelled and result.exit_code == 130
    assert await _wait_gone(child)
    assert await _wait_gone(grandchild)
    assert (await shell.run("echo $KEEP")).stdout == "kept\n"


async def test_forward_input_reaches_a_command_reading_the_terminal(
    shell: ShellSession,
) -> None:
    task = asyncio.create_task(shell.run("head -n 1 </dev/tty | sed s/^/got=/", timeout=30))
    for _ in range(2000):  # until `head` is the terminal's foreground job
        if shell.forward_input(b"typed\n"):
            break
        await asyncio.sleep(0.01)
    result = await task
    assert result.stdout == "got=typed\n", result.stderr


async def test_background_job_output_is_attributed(shell: ShellSession) -> None:
    await shell.run("(sleep 0.3; echo late-line) &")
    for _ in range(100):  # the job's line is reported by the next result after it
        result = await shell.run("echo now")
        assert result.stdout == "now\n"
        if "late-line" in result.stderr:
            break
        await asyncio.sleep(0.05)
    assert "late-line" in result.stderr and "background jobs of command 1" in result.stderr


async def test_close_leaves_no_process_behind(workdir: Path, settings: Settings) -> None:
    session = await _start(workdir, settings)
    leader = session.supervisor_pid
    bash = session.pid
    assert leader is not None and bash is not None
    await session.run("sleep 100 & echo $! > bg.pid; setsid sleep 100 & echo $! > sid.pid")
    task = asyncio.create_task(session.run("sleep 100 & sleep 100"))
    await asyncio.sleep(0.3)
    job = int((workdir / "bg.pid").read_text())
    detached = int((workdir / "sid.pid").read_text())
    tmp = session.private_tmp
    assert tmp is not None and tmp.is_dir()
    await session.close()
    await task
    for pid in (leader, bash, job, detached):
        assert await _wait_gone(pid), pid
    for _ in range(100):
        if not _session_members(leader):
            break
        await asyncio.sleep(0.02)
    assert _session_members(leader) == []
    assert not tmp.exists()


async def test_a_bwrap_failure_at_start_is_a_clear_error(workdir: Path, settings: Settings) -> None:
    from synapse_lsp.errors import ShellError

    gone = workdir / "vanished"
    session = ShellSession(workdir, settings, writable=[workdir, gone])
    with pytest.raises(ShellError, match="bwrap"):
        await session.start()
    await session.close()


def test_synapse_installed_under_tmp_stays_visible_in_the_private_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A clone (and its venv) under /tmp: the sandbox's private /tmp would hide the
    interpreter the wrappers run; it is bound back read-only at its own path."""
    from synapse_lsp import sandbox

    clone = Path(tempfile.mkdtemp(dir="/tmp"))  # noqa: S108 - the host's /tmp itself
    request.addfinalizer(lambda: shutil.rmtree(clone, ignore_errors=True))
    venv = clone / ".venv"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    status = sandbox.SandboxStatus(mode="workspace-write", sandboxed=True, network="off")
    argv = sandbox.bwrap_argv(
        status,
        writable=[],
        private_dir=None,
        private_tmp=None,
        synapse_home=tmp_path / "home",
        info_fd=None,
    )
    real = os.path.realpath(venv)
    assert real.startswith("/tmp/")
    tmp_at = argv.index("/tmp")
    bound = argv.index(real)
    assert bound > tmp_at and argv[bound - 1] == "--ro-bind" and argv[bound + 1] == real
