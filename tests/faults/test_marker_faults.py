"""Fault drill, the shell's framing: a command runs inside the very bash that frames it,
so it can read the marker's nonce, shadow words, change prompts, terminal modes and
traps. None of that may make Synapse lie about where bash is, end a command early,
leak the framing into output, or cost more than one command (docs/shell.md
"Framing guarantees")."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import VIOLATION_EXIT_CODE, ShellSession
from synapse_lsp.shell.framing import HOOK

# The nonce as any command can read it: the last word of $PROMPT_COMMAND.
FORGE = (
    "n=${{PROMPT_COMMAND##* }}; n=${{n//\\'/}}; "
    'printf "\\036%s:%s:%s:%s\\037%s" '
    '"$n" "$__syn_seq" {code} {cwd} "$n" >/dev/tty'
)


def _forge(code: int, cwd: Path | str) -> str:
    return FORGE.format(code=code, cwd=shlex.quote(str(cwd)))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    (path / "sub").mkdir(parents=True)
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(synapse_home=tmp_path / "home", command_timeout=30.0)


@pytest.fixture
async def shell(workdir: Path, settings: Settings) -> AsyncIterator[ShellSession]:
    session = ShellSession(workdir, settings)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ------------------------------------------------------------------ forged markers


async def test_forged_marker_while_the_command_runs_is_a_protocol_violation(
    shell: ShellSession, settings: Settings, workdir: Path, tmp_path: Path
) -> None:
    """The exploit: one printf of the marker (nonce from $PROMPT_COMMAND) to /dev/tty
    ended the command at once with exit 0 and cwd /tmp while it went on running; a
    `write` then landed in /tmp. Now: the command is killed, the shell replaced in the
    directory bash really was in, and the result says so."""
    router = BashRouter(shell, settings)
    assert (await shell.run("export KEEP=1")).exit_code == 0
    old_pid = shell.pid
    started = time.monotonic()
    result = await shell.run(
        f"cd sub && {_forge(0, tmp_path)}; sleep 30 & echo $! > bg.pid; wait; echo never"
    )
    assert time.monotonic() - started < 10
    assert result.protocol_violation, result
    assert result.exit_code == VIOLATION_EXIT_CODE
    assert "protocol violation" in result.stderr and "lost" in result.stderr
    assert "never" not in result.stdout
    assert shell.cwd == workdir / "sub"
    sleeper = int((workdir / "sub" / "bg.pid").read_text())
    for _ in range(100):
        if not _alive(sleeper):
            break
        await asyncio.sleep(0.02)
    assert not _alive(sleeper), "the command's process outlived the violation"
    assert shell.alive and shell.pid != old_pid
    after = await shell.run("pwd; echo ${KEEP-unset}")
    assert after.stdout == f"{workdir / 'sub'}\nunset\n"
    assert not after.protocol_violation
    written = await router.route("write note.txt hello")
    assert written.exit_code == 0, written.text
    assert (workdir / "sub" / "note.txt").is_file()
    assert not (tmp_path / "note.txt").exists()


async def test_forged_marker_before_a_quick_end_is_superseded_by_the_real_one(
    shell: ShellSession, workdir: Path, tmp_path: Path
) -> None:
    """A forged marker followed by the command's real end: the status and directory
    are the real ones, nothing is flagged, the session (environment) stays."""
    pid = shell.pid
    result = await shell.run(f"export KEEP=1; {_forge(0, tmp_path)}; cd sub; (exit 3)")
    assert result.exit_code == 3 and not result.protocol_violation, result
    assert shell.cwd == workdir / "sub"
    assert (await shell.run("echo $KEEP")).stdout == "1\n" and shell.pid == pid


async def test_cwd_is_bashs_real_directory_not_what_pwd_claims(
    shell: ShellSession, settings: Settings, workdir: Path, tmp_path: Path
) -> None:
    """`$PWD` is an ordinary variable: `PWD=/elsewhere` must not move Synapse's idea of
    the directory (built-ins and the permission gate resolve paths against it). A
    symlinked spelling of the real directory is kept."""
    router = BashRouter(shell, settings)
    result = await shell.run(f"cd sub; PWD={shlex.quote(str(tmp_path))}")
    assert result.exit_code == 0
    assert shell.cwd == workdir / "sub"
    assert (await router.route("write here.txt x")).exit_code == 0
    assert (workdir / "sub" / "here.txt").is_file() and not (tmp_path / "here.txt").exists()
    (workdir / "link").symlink_to(workdir / "sub")
    assert (await shell.run(f"cd {shlex.quote(str(workdir / 'link'))}")).exit_code == 0
    assert shell.cwd == workdir / "link"


# ------------------------------------------------------------------ terminal input


async def test_tiocsti_injection_does_not_prefix_the_next_command(
    shell: ShellSession, tmp_path: Path
) -> None:
    """A command pushes `touch X; ` into the terminal's input (TIOCSTI): bash would
    read it in front of the next command line. Pending input is flushed before each
    command."""
    target = tmp_path / "injected"
    text = f"touch {target}; "
    inject = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import fcntl, termios\n"
        "f = open('/dev/tty', 'rb')\n"
        f"for c in {text.encode()!r}:\n"
        "    fcntl.ioctl(f, termios.TIOCSTI, bytes([c]))\n"
    )
    pushed = await shell.run(inject)
    if pushed.exit_code != 0:
        pytest.skip(f"TIOCSTI refused here: {pushed.stderr.strip()[-200:]}")
    after = await shell.run("echo next")
    assert after.stdout == "next\n" and after.exit_code == 0, after
    assert not target.exists(), "injected text ran as part of the next command"


# ------------------------------------------------------------------ shadowed words


SHADOW = [
    "alias .=false source=false builtin=false unset=false printf=false exec=false",
    "alias shopt=false trap=false enable=false command=false eval=false cd=false",
    "alias echo=false set=false",
    *(
        f"{name}() {{ return 1; }}"
        for name in (
            "builtin", "command", "printf", "echo", "cd", "trap", "eval", "unset",
            "exec", "shopt", "enable", "set", ".", "source", "readonly", "export",
        )
    ),
]  # fmt: skip


async def test_aliases_and_functions_cannot_break_completion(shell: ShellSession) -> None:
    """Every word the framing uses, shadowed by an alias and by a function: commands
    still complete at once, in the same bash (the user's aliases and functions
    persist; only functions named `builtin`, `.` and `source` are removed)."""
    pid = shell.pid
    assert (await shell.run("export KEEP=1; alias hi='\\builtin echo hello'")).exit_code == 0
    defined = await shell.run("\n".join(SHADOW), timeout=5)
    assert not defined.timed_out and not defined.protocol_violation, defined
    for i in range(3):
        started = time.monotonic()
        result = await shell.run(f"\\builtin printf 'ok%s %s\\n' {i} $KEEP", timeout=5)
        assert (result.stdout, result.exit_code) == (f"ok{i} 1\n", 0), result
        assert time.monotonic() - started < 1
    assert (await shell.run("hi")).stdout == "hello\n"
    assert shell.pid == pid


@pytest.mark.parametrize(
    "attempt",
    [
        f"{HOOK}() {{ :; }}",
        f"unset -f {HOOK}",
        f"declare +r -f {HOOK}",
        f"eval '{HOOK}() {{ return 0; }}'",
    ],
)
async def test_the_hook_function_cannot_be_replaced_or_removed(
    shell: ShellSession, workdir: Path, attempt: str
) -> None:
    """The prompt hook is a read-only function, defined before any command ran: a
    command can neither redefine it, unset it, nor take the attribute away. The next
    commands complete at once, with their own status and directory, in the same bash."""
    pid = shell.pid
    tried = await shell.run(attempt, timeout=5)
    assert tried.exit_code != 0 and not tried.timed_out and not tried.protocol_violation
    assert "readonly function" in tried.stderr, tried
    moved = await shell.run("cd sub; (exit 3)", timeout=5)
    assert (moved.exit_code, moved.protocol_violation) == (3, False), moved
    assert shell.cwd == workdir / "sub"
    assert (await shell.run("echo ok", timeout=5)).stdout == "ok\n"
    assert shell.pid == pid


async def test_a_debug_trap_lasts_for_the_command_that_sets_it(shell: ShellSession) -> None:
    """The prompt hook resets the DEBUG trap out of its function (bash puts back, on a
    function's return, a DEBUG trap the function removed): the next command runs
    without it."""
    assert (await shell.run("trap 'echo TRAPPED' DEBUG")).exit_code == 0
    for word in ("x", "y"):
        later = await shell.run(f"echo {word}")
        assert (later.stdout, later.stderr) == (f"{word}\n", ""), later


async def test_a_broken_prompt_hook_costs_one_command_not_a_timeout(shell: ShellSession) -> None:
    """What cannot be reset from the hook (`readonly PS1` makes its assignment fail;
    an `extdebug` DEBUG trap skips its commands): bash is seen idle at its prompt
    without a marker, the shell is replaced within about a second, the next command
    works."""
    for trick in ("readonly PS1", "shopt -s extdebug; trap false DEBUG"):
        started = time.monotonic()
        broken = await shell.run(trick, timeout=20)
        assert time.monotonic() - started < 5
        assert broken.protocol_violation and not broken.timed_out, broken
        assert (await shell.run("echo fine")).stdout == "fine\n"


# ------------------------------------------------------------------ leaks


async def test_stty_echo_does_not_leak_the_framing(shell: ShellSession) -> None:
    """With echo on, bash's terminal would echo our command line (with the private
    paths) into the output. The terminal modes are restored before each command."""
    assert (await shell.run("stty echo </dev/tty")).exit_code == 0
    for _ in range(2):
        result = await shell.run("echo x")
        assert (result.stdout, result.stderr) == ("x\n", ""), result


async def test_prompt_strings_do_not_leak(shell: ShellSession) -> None:
    """PS0/PS1/PS2 text and PS4-prefixed traces of the framing stay out of results."""
    assert (await shell.run("PS0='LEAK0 '; PS1='LEAK1 '; PS2='LEAK2 '")).exit_code == 0
    for _ in range(2):
        result = await shell.run("echo a")
        assert (result.stdout, result.stderr) == ("a\n", ""), result
    traced = await shell.run("PS4='LEAK4 '; set -x")
    assert "__syn" not in traced.stderr
    later = await shell.run("echo b")
    assert later.stdout == "b\n"
    assert "LEAK" not in later.stderr and "__syn" not in later.stderr, later
    assert later.stderr == "++ echo b\n"  # the user's trace stays (default PS4; in `.`)
    assert (await shell.run("set +x")).exit_code == 0
    verbose = await shell.run("set -v")
    assert (await shell.run("echo c")).stderr == "echo c\n", verbose
    assert (await shell.run("set +v")).exit_code == 0


# ------------------------------------------------------------------ traps


@pytest.mark.parametrize("trap", ["trap '' INT", "trap 'echo no' INT"])
async def test_cancel_after_a_sigint_trap_keeps_the_session(shell: ShellSession, trap: str) -> None:
    """`trap '' INT` is inherited by the next command's programs and would make bash
    ignore Ctrl-C; the prompt hook resets SIGINT to the shell's default before each
    command, so cancelling stops the command at once (a bash builtin loop too, which
    once got bash replaced and the environment lost)."""
    pid = shell.pid
    assert (await shell.run(f"export KEEP=1; {trap}")).exit_code == 0
    for command in ("sleep 100", "while :; do :; done"):
        task = asyncio.create_task(shell.run(command))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 1.0, command
        assert (await shell.run("echo $KEEP")).stdout == "1\n"
        assert shell.pid == pid
    interrupted = asyncio.create_task(shell.run("sleep 100"))
    await asyncio.sleep(0.3)
    shell.interrupt()
    result = await interrupted
    assert result.cancelled and result.exit_code == 130 and result.duration < 1.5
    assert (await shell.run("echo $KEEP")).stdout == "1\n" and shell.pid == pid
