"""The persistent shell session (real bash on a PTY) and output bounding."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.config import OutputLimits, Settings
from synapse_lsp.errors import ShellError
from synapse_lsp.output import BoundedCapture, bound_text
from synapse_lsp.shell import ShellSession

# ------------------------------------------------------------------ helpers


def _gone(pid: int) -> bool:
    """Dead: no /proc entry, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def _wait_gone(pid: int) -> bool:
    for _ in range(100):
        if _gone(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def _wait_for_file(path: Path) -> str:
    for _ in range(500):
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never written")


def _session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes in session `sid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


# A child that starts a grandchild (pids written to files), both sleeping.
FAMILY = (
    "bash -c 'echo $$ > child.pid; sleep 100 & echo $! > grandchild.pid; sleep 100; :'; "
    "echo not-reached"
)


# ------------------------------------------------------------ persistence


async def test_cwd_and_exported_variables_persist(shell: ShellSession, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    assert (await shell.run("cd sub && export X=1 && y=2")).exit_code == 0
    result = await shell.run("pwd; echo $X $y")
    assert result.stdout == f"{workdir / 'sub'}\n1 2\n"
    assert shell.cwd == workdir / "sub"


async def test_functions_and_aliases_persist(shell: ShellSession) -> None:
    await shell.run('greet() { echo "hi $1"; }')
    assert (await shell.run("greet you")).stdout == "hi you\n"


async def test_shell_options_the_prompt_hook_touches_persist(shell: ShellSession) -> None:
    # The hook enters and leaves POSIX mode, which changes these options; it reads them
    # from $BASHOPTS first and restores them: each one flipped stays flipped, and back.
    from synapse_lsp.shell.framing import POSIX_SHOPTS

    names = " ".join(POSIX_SHOPTS)
    before = (await shell.run(f"shopt {names}")).stdout.split()
    states = zip(before[::2], before[1::2], strict=True)
    flipped = {n: "off" if s == "on" else "on" for n, s in states}
    flips = "; ".join(f"shopt -{'s' if s == 'on' else 'u'} {n}" for n, s in flipped.items())
    assert (await shell.run(flips)).exit_code == 0
    after = (await shell.run(f"shopt {names}")).stdout.split()
    assert dict(zip(after[::2], after[1::2], strict=True)) == flipped
    back = flips.replace("-s", "-S").replace("-u", "-s").replace("-S", "-u")
    assert (await shell.run(back)).exit_code == 0
    assert (await shell.run(f"shopt {names}")).stdout.split() == before


async def test_exit_code_is_returned(shell: ShellSession) -> None:
    assert (await shell.run("true")).exit_code == 0
    assert (await shell.run("false")).exit_code == 1
    assert (await shell.run("(exit 42)")).exit_code == 42
    missing = await shell.run("no-such-command-xyz")
    assert missing.exit_code == 127
    assert "no-such-command-xyz" in missing.stderr


async def test_stdout_and_stderr_are_kept_apart(shell: ShellSession) -> None:
    result = await shell.run("echo out; echo err >&2; echo out2")
    assert result.stdout == "out\nout2\n"
    assert result.stderr == "err\n"
    assert (result.timed_out, result.cancelled, result.truncated) == (False, False, False)


async def test_output_without_final_newline_and_bad_utf8(shell: ShellSession) -> None:
    assert (await shell.run("printf abc")).stdout == "abc"
    result = await shell.run(r"printf 'ok\xff\xfe\n'")
    assert result.stdout == "ok\ufffd\ufffd\n"


async def test_live_output_reaches_the_sink_in_full(shell: ShellSession) -> None:
    chunks: list[tuple[str, str]] = []
    result = await shell.run(
        "for i in 1 2 3; do echo line$i; echo warn$i >&2; done",
        on_output=lambda stream, text: chunks.append((stream, text)),
    )
    out = "".join(text for stream, text in chunks if stream == "stdout")
    err = "".join(text for stream, text in chunks if stream == "stderr")
    assert out == result.stdout == "line1\nline2\nline3\n"
    assert err == result.stderr == "warn1\nwarn2\nwarn3\n"


async def test_a_broken_sink_does_not_break_the_session(shell: ShellSession) -> None:
    def sink(stream: str, text: str) -> None:
        raise RuntimeError("face bug")

    assert (await shell.run("echo x", on_output=sink)).stdout == "x\n"
    assert (await shell.run("echo y")).stdout == "y\n"


async def test_multi_line_commands_and_heredocs(shell: ShellSession, workdir: Path) -> None:
    script = "for i in 1 2; do\n  echo n$i\ndone\nif true; then\n  echo yes\nfi"
    assert (await shell.run(script)).stdout == "n1\nn2\nyes\n"
    heredoc = "cat <<'EOF' > notes.txt\n$HOME is literal\n  indented\nEOF\ncat notes.txt"
    result = await shell.run(heredoc)
    assert result.stdout == "$HOME is literal\n  indented\n"
    assert (workdir / "notes.txt").read_text() == "$HOME is literal\n  indented\n"


async def test_syntax_error_is_an_error_not_a_dead_session(shell: ShellSession) -> None:
    result = await shell.run("if then fi (")
    assert result.exit_code != 0
    assert "syntax error" in result.stderr
    assert result.stderr.startswith("bash: line 1:")  # no temp file name in the message
    unterminated = await shell.run("echo 'oops")
    assert unterminated.exit_code != 0 and "unexpected EOF" in unterminated.stderr
    assert (await shell.run("echo fine")).stdout == "fine\n"


async def test_session_environment(shell: ShellSession, settings: Settings) -> None:
    result = await shell.run('echo "$TERM $PAGER $GIT_PAGER $NO_COLOR"; echo "$PATH"')
    first, path = result.stdout.splitlines()
    assert first == "dumb cat cat 1"
    assert path.split(os.pathsep)[0] == str(settings.bin_dir)


async def test_wrappers_in_bin_dir_run_by_name(tmp_path: Path, settings: Settings) -> None:
    settings.bin_dir.mkdir(parents=True)
    tool = settings.bin_dir / "synapse-demo-tool"
    tool.write_text('#!/bin/sh\necho wrapped "$@"\n')
    tool.chmod(0o755)
    session = ShellSession(tmp_path, settings, env={"EXTRA": "given"})
    await session.start()
    try:
        result = await session.run("synapse-demo-tool a; echo $EXTRA")
        assert result.stdout == "wrapped a\ngiven\n"
    finally:
        await session.close()


# ------------------------------------------------------------------ stdin


async def test_cat_without_arguments_gets_eof(shell: ShellSession) -> None:
    result = await shell.run("cat; echo done", timeout=20)
    assert not result.timed_out
    assert result.stdout == "done\n"


async def test_read_does_not_hang(shell: ShellSession) -> None:
    result = await shell.run('read x; echo "rc=$? x=$x"', timeout=20)
    assert not result.timed_out
    assert result.stdout == "rc=1 x=\n"


# ------------------------------------------------------- timeout and cancel


async def test_timeout_kills_child_and_grandchild_and_keeps_the_session(
    shell: ShellSession, workdir: Path
) -> None:
    await shell.run("export KEEP=kept")
    result = await shell.run(FAMILY, timeout=1.0)
    assert result.timed_out and result.exit_code == 124
    assert not result.cancelled
    assert "not-reached" not in result.stdout
    child = int((workdir / "child.pid").read_text())
    grandchild = int((workdir / "grandchild.pid").read_text())
    assert await _wait_gone(child)
    assert await _wait_gone(grandchild)
    after = await shell.run("pwd; echo $KEEP")
    assert after.stdout == f"{workdir}\nkept\n"


async def test_timeout_none_uses_the_setting(tmp_path: Path) -> None:
    session = ShellSession(tmp_path, Settings(synapse_home=tmp_path / "h", command_timeout=0.5))
    await session.start()
    try:
        result = await session.run("sleep 30")
        assert result.timed_out
        assert (await session.run("echo ok")).stdout == "ok\n"
    finally:
        await session.close()


async def test_timeout_of_a_loop_in_bash_itself(shell: ShellSession) -> None:
    result = await shell.run("while :; do :; done", timeout=0.5)
    assert result.timed_out
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_cancel_kills_the_family_and_keeps_the_session(
    shell: ShellSession, workdir: Path
) -> None:
    await shell.run("export KEEP=kept")
    task = asyncio.create_task(shell.run(FAMILY, timeout=60))
    grandchild = int(await _wait_for_file(workdir / "grandchild.pid"))
    child = int(await _wait_for_file(workdir / "child.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_gone(child)
    assert await _wait_gone(grandchild)
    after = await shell.run("pwd; echo $KEEP")
    assert after.stdout == f"{workdir}\nkept\n"


async def test_interrupt_is_ctrl_c_and_does_not_hang(shell: ShellSession) -> None:
    marks: list[str] = []
    task = asyncio.create_task(
        shell.run(
            "echo started; sleep 60; echo after",
            timeout=30,
            on_output=lambda stream, text: marks.append(text),
        )
    )
    while "started" not in "".join(marks):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    shell.interrupt()
    result = await task
    assert not result.timed_out  # it came back at once, not at the 30 s timeout
    assert result.cancelled and result.exit_code == 130
    assert result.stdout == "started\n"
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_interrupt_as_the_next_job_starts_stops_the_whole_list(
    shell: ShellSession, workdir: Path
) -> None:
    """Stop pressed the moment `echo` has run: bash may be forking `sleep`, whose Ctrl-C
    a not-yet-exec'd child swallows; the job is signalled again once it runs `sleep`,
    so it dies of SIGINT and bash drops the rest of the list (nothing runs after)."""
    for attempt in range(25):
        started = asyncio.Event()

        def sink(stream: str, text: str, started: asyncio.Event = started) -> None:
            if "started" in text:
                started.set()

        task = asyncio.create_task(
            shell.run("echo started; sleep 60; echo after > after.txt", timeout=30, on_output=sink)
        )
        await started.wait()
        await asyncio.sleep((attempt % 5) / 2000)
        shell.interrupt()
        result = await task
        assert result.cancelled and not result.timed_out, attempt
        assert "Killed" not in result.stderr, f"attempt {attempt}: sleep ran on to SIGKILL"
        assert not (workdir / "after.txt").exists(), f"attempt {attempt}: the list went on"


async def test_sigint_ignoring_command_is_killed_after_interrupt(
    shell: ShellSession, workdir: Path
) -> None:
    task = asyncio.create_task(
        shell.run(
            "bash -c \"trap '' INT; echo \\$\\$ > deaf.pid; sleep 60\"; echo after > after.txt",
            timeout=30,
        )
    )
    deaf = int(await _wait_for_file(workdir / "deaf.pid"))
    shell.interrupt()
    result = await task
    assert not result.timed_out and result.cancelled
    assert await _wait_gone(deaf)
    await asyncio.sleep(0.1)
    assert not (workdir / "after.txt").exists(), "the rest of the list ran after the kill"
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_a_stop_kills_no_group_that_is_not_the_shells(shell: ShellSession) -> None:
    """A group recorded while stopping may be gone by the final kill, its id reused by
    a stranger's new process: only groups still holding the shell's processes die."""
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    assert shell._bash is not None
    groups = shell._bash.groups
    original = groups.signal_foreground

    def also_the_stranger(run: Any, sig: signal.Signals) -> None:
        run.pgrps.add(stranger.pid)  # as if an earlier job's group id were reused
        original(run, sig)

    try:
        groups.signal_foreground = also_the_stranger  # type: ignore[method-assign]
        result = await shell.run("sleep 30", timeout=0.5)
        assert result.timed_out
        assert stranger.poll() is None, "a stranger's process group was killed"
    finally:
        stranger.kill()
        stranger.wait()


async def test_kill_stops_the_whole_list(shell: ShellSession, workdir: Path) -> None:
    task = asyncio.create_task(
        shell.run("echo $$ > job.pid; sleep 60; echo after > after.txt", timeout=30)
    )
    await _wait_for_file(workdir / "job.pid")
    await asyncio.sleep(0.2)
    shell.kill()
    result = await task
    assert result.cancelled and not result.timed_out
    await asyncio.sleep(0.1)
    assert not (workdir / "after.txt").exists(), "the rest of the list ran after the kill"
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_interrupt_when_bash_itself_ignores_sigint(shell: ShellSession) -> None:
    task = asyncio.create_task(
        shell.run("trap '' INT; echo spinning; while :; do :; done", timeout=30)
    )
    await asyncio.sleep(0.3)
    shell.interrupt()
    result = await task
    assert not result.timed_out and result.cancelled
    assert "shell exited" in result.stderr  # bash had to be replaced
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_concurrent_runs_are_serialized(shell: ShellSession) -> None:
    events: list[str] = []

    def sink(tag: str) -> Callable[[str, str], None]:
        return lambda stream, text: events.extend(f"{tag}:{t}" for t in text.split())

    first = asyncio.create_task(shell.run("echo a; sleep 0.2; echo b", on_output=sink("1")))
    await asyncio.sleep(0)
    second = asyncio.create_task(shell.run("echo c", on_output=sink("2")))
    one, two = await asyncio.gather(first, second)
    assert (one.stdout, two.stdout) == ("a\nb\n", "c\n")
    assert events == ["1:a", "1:b", "2:c"]


# ------------------------------------------------------- exit and restart


async def test_exit_is_reported_and_the_next_command_gets_a_fresh_shell(
    shell: ShellSession,
) -> None:
    old = shell.pid
    result = await shell.run("echo bye; exit 3")
    assert result.exit_code == 3
    assert result.stdout == "bye\n"
    assert "shell exited" in result.stderr
    assert not shell.alive
    after = await shell.run("echo back")
    assert after.stdout == "back\n" and after.exit_code == 0
    assert shell.alive and shell.pid != old


async def test_restart_gives_a_fresh_environment(shell: ShellSession, workdir: Path) -> None:
    old = shell.pid
    await shell.run("cd / && export GONE=1")
    await shell.restart()
    assert shell.pid != old and old is not None and await _wait_gone(old)
    assert shell.cwd == workdir
    result = await shell.run("pwd; echo ${GONE:-unset}")
    assert result.stdout == f"{workdir}\nunset\n"


async def test_close_leaves_no_process_behind(workdir: Path, settings: Settings) -> None:
    session = ShellSession(workdir, settings)
    await session.start()
    pid = session.supervisor_pid  # the PTY's session leader; bash is its child
    assert pid is not None
    await session.run("sleep 100 & echo $! > bg.pid")  # a background job in its own group
    task = asyncio.create_task(session.run("sleep 100"))
    # supervisor, (bwrap,) bash, the job, the running command
    members = 5 if session.sandbox.sandboxed else 4
    for _ in range(200):
        if len(_session_members(pid)) >= members:
            break
        await asyncio.sleep(0.01)
    assert len(_session_members(pid)) >= members
    ticks = [0]

    async def tick() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks[0]
    await session.close()
    ticker.cancel()
    assert ticks[0] > before + 1  # its kill rounds were awaited: the event loop went on
    result = await task
    assert result.exit_code != 0
    await session.close()  # idempotent
    assert not session.alive
    for _ in range(100):
        if not _session_members(pid):
            break
        await asyncio.sleep(0.02)
    assert _session_members(pid) == []


# ------------------------------------------------------------- big output


async def test_fifty_megabytes_are_bounded_and_spilled_in_full(
    shell: ShellSession, settings: Settings
) -> None:
    total = 50_000_000
    seen = 0

    def count(stream: str, text: str) -> None:
        nonlocal seen
        seen += len(text)

    result = await shell.run(f"yes 0123456789 | head -c {total}", on_output=count)
    assert result.exit_code == 0 and result.truncated
    assert seen == total
    limits = settings.output
    assert len(result.stdout.encode()) < limits.max_bytes + 300
    assert result.stdout.count("\n") <= limits.max_lines + 3
    assert result.stdout.startswith("0123456789\n")
    assert "lines omitted" in result.stdout and str(result.full_output_path) in result.stdout
    path = result.full_output_path
    assert path is not None and path.parent == settings.synapse_home / "outputs"
    assert path.stat().st_size == total
    assert path.read_bytes() == (b"0123456789\n" * (total // 11 + 1))[:total]
    assert (await shell.run("echo small")).full_output_path is None


async def test_big_stderr_is_bounded_too(shell: ShellSession) -> None:
    result = await shell.run("yes warning | head -n 100000 >&2; echo done")
    assert result.stdout == "done\n"
    assert result.truncated and "omitted" in result.stderr
    assert result.stderr.startswith("warning\n") and result.stderr.endswith("warning\n")


# -------------------------------------------------------------- bound_text

LIMITS = OutputLimits(max_bytes=100, max_lines=10)


def test_bound_text_keeps_short_text() -> None:
    assert bound_text("", LIMITS) == ("", False)
    text = "\n".join(f"l{i}" for i in range(10))
    assert bound_text(text, LIMITS) == (text, False)
    exactly = "x" * 100
    assert bound_text(exactly, LIMITS) == (exactly, False)


def test_bound_text_line_limit_keeps_head_and_tail() -> None:
    text = "".join(f"{i}\n" for i in range(40))
    out, cut = bound_text(text, LIMITS)
    assert cut
    assert out == "0\n1\n2\n3\n4\n[... 85 bytes / 30 lines omitted ...]\n35\n36\n37\n38\n39\n"


def test_bound_text_byte_limit_with_long_lines() -> None:
    text = "".join(f"{i:02d}" + "x" * 37 + "\n" for i in range(10))  # 400 bytes, 10 lines
    out, cut = bound_text(text, LIMITS)
    assert cut
    head, tail = out.split("\n[... ")[0], out.split(" omitted ...]\n")[1]
    assert head.startswith("00xxx") and tail.endswith("x\n")
    assert len(head.encode()) <= 50 and len(tail.encode()) <= 50
    omitted = int(out.split("[... ")[1].split(" bytes")[0])
    assert omitted == 400 - len(head.encode()) - len(tail.encode()) - 1  # head lost its "\n"


def test_bound_text_single_huge_line_is_cut_by_bytes() -> None:
    out, cut = bound_text("a" * 10_000, LIMITS)
    assert cut
    assert out == "a" * 50 + "\n[... 9900 bytes / 0 lines omitted ...]\n" + "a" * 50


def test_bound_text_never_splits_a_character() -> None:
    text = "é漢🙂" * 200
    out, cut = bound_text(text, LIMITS)
    assert cut
    assert "\ufffd" not in out
    head, tail = out.split("\n[... ")[0], out.split(" omitted ...]\n")[1]
    assert text.startswith(head) and text.endswith(tail)
    assert 0 < len(head.encode()) <= 50 and 0 < len(tail.encode()) <= 50


def test_capture_matches_bound_text_whatever_the_chunking(tmp_path: Path) -> None:
    text = "".join(f"row {i} " + "é" * (i % 7) + "\n" for i in range(3000))
    data = text.encode()
    limits = OutputLimits(max_bytes=1000, max_lines=40)
    expected, _ = bound_text(text, limits)
    for size in (1, 7, 4096, len(data)):
        capture = BoundedCapture(limits, tmp_path / "spill", name=f"c{size}")
        for i in range(0, len(data), size):
            capture.feed(data[i : i + size])
        capture.close()
        assert capture.truncated
        assert capture.full_output_path is not None
        assert capture.full_output_path.read_bytes() == data
        got = capture.text().replace(f"; full output: {capture.full_output_path}", "")
        assert got == expected
        assert (capture.total_bytes, capture.total_lines) == (len(data), 3000)


def test_capture_under_the_limit_writes_no_file(tmp_path: Path) -> None:
    capture = BoundedCapture(LIMITS, tmp_path)
    capture.feed(b"small\n")
    capture.close()
    assert (capture.text(), capture.truncated, capture.full_output_path) == ("small\n", False, None)
    assert list(tmp_path.iterdir()) == []


def test_capture_memory_stays_bounded(tmp_path: Path) -> None:
    chunk = b"y" * 65535 + b"\n"
    tracemalloc.start()
    try:
        capture = BoundedCapture(OutputLimits(), tmp_path)
        for _ in range(1600):  # 100 MiB
            capture.feed(chunk)
        capture.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert capture.full_output_path is not None
    assert capture.full_output_path.stat().st_size == 1600 * len(chunk)
    assert peak < 2_000_000  # a few chunks, never the stream


async def test_kill_stops_the_command_at_once(shell: ShellSession, workdir: Path) -> None:
    task = asyncio.create_task(
        shell.run("bash -c \"trap '' INT; echo \\$\\$ > deaf.pid; sleep 60\"", timeout=30)
    )
    deaf = int(await _wait_for_file(workdir / "deaf.pid"))
    shell.kill()
    result = await task
    assert result.cancelled and not result.timed_out and result.exit_code != 0
    assert await _wait_gone(deaf)
    assert (await shell.run("echo ok")).stdout == "ok\n"


async def test_restart_ends_a_running_command(shell: ShellSession, workdir: Path) -> None:
    task = asyncio.create_task(shell.run("echo $$ > bash.pid; sleep 60", timeout=30))
    old = int(await _wait_for_file(workdir / "bash.pid"))
    await shell.restart()
    result = await task
    assert result.exit_code != 0 and not result.timed_out
    assert await _wait_gone(old)
    assert (await shell.run("echo fresh")).stdout == "fresh\n"


async def test_run_after_close_is_a_clear_error(workdir: Path, settings: Settings) -> None:
    session = ShellSession(workdir, settings)
    await session.start()
    await session.close()
    with pytest.raises(ShellError, match="closed"):
        await session.run("true")


async def test_a_plain_tests_shell_runs_what_a_user_gets(shell: ShellSession) -> None:
    """The suites' configuration is a user's: workspace-write, network off, confined
    by bubblewrap (tests/conftest.py assigns no mode); the other legs say theirs."""
    from tests.conftest import LEG

    status = shell.sandbox
    if LEG == "full-access":
        assert status.mode == "full-access" and not status.sandboxed
        return
    assert status.mode == "workspace-write" and status.network == "off"
    if LEG == "fallback":
        assert not status.sandboxed and status.reason and "namespace" in status.reason
        return
    assert status.sandboxed, status.describe()
    refused = await shell.run("touch /etc/synapse-should-not-exist")
    assert refused.exit_code != 0 and "Read-only file system" in refused.stderr
    # a network namespace of its own: no interface but loopback
    links = await shell.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert links.stdout.split() == ["lo"], links.stdout


async def test_restarts_leave_no_descriptor_behind(shell: ShellSession) -> None:
    """What the framing keeps open of a bash (/proc/PID/stat and syscall, read at each
    look) is closed with it."""
    await shell.run("true")
    before = sorted(os.listdir("/proc/self/fd"))  # noqa: PTH208
    for _ in range(3):
        await shell.restart()
        assert (await shell.run("true")).exit_code == 0
    assert len(os.listdir("/proc/self/fd")) == len(before)  # noqa: PTH208


async def test_each_commands_fifos_are_gone_once_the_next_is_ready(shell: ShellSession) -> None:
    """A command's FIFOs are made ahead, once the last result is out, and the finished
    ones' unlinked then: after any number of commands the private folder holds the
    next command's pair only, and no read end is left open."""
    await shell.run("true")
    await asyncio.sleep(0.05)  # the upkeep runs two loop turns after a result
    before = len(os.listdir("/proc/self/fd"))  # noqa: PTH208
    for i in range(5):
        assert (await shell.run(f"echo {i}; echo e{i} >&2")).stdout == f"{i}\n"
    await asyncio.sleep(0.05)
    bash = shell._bash
    assert bash is not None and bash.files.dir is not None
    fifos = sorted(
        p.name for p in bash.files.dir.iterdir() if p.name not in ("cmd", "stderr", "stdout")
    )
    seq = bash._seq
    assert fifos == [f"err.{seq + 1}", f"out.{seq + 1}"]
    assert len(os.listdir("/proc/self/fd")) == before  # noqa: PTH208
    # A pair made ahead for a command that another took the place of is dropped too.
    bash._seq += 1
    assert (await shell.run("echo skipped")).stdout == "skipped\n"
    await asyncio.sleep(0.05)
    left = sorted(
        p.name for p in bash.files.dir.iterdir() if p.name not in ("cmd", "stderr", "stdout")
    )
    assert left == [f"err.{bash._seq + 1}", f"out.{bash._seq + 1}"]
    assert len(os.listdir("/proc/self/fd")) == before  # noqa: PTH208


# --------------------------------------- what is kept or made ahead between commands


def _fds_naming(path: str) -> int:
    """How many of this process's descriptors name `path` (the PTY's slave)."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            count += str(fd.readlink()) == path
    return count


async def test_the_slave_is_kept_while_bash_lives_and_released_with_it(
    shell: ShellSession,
) -> None:
    """Where bash's end is seen on a pidfd, the PTY's slave is opened once and kept
    (the flush and the pending-input check of each command use it); it goes with bash."""
    assert (await shell.run("echo one")).stdout == "one\n"
    slave = str(Path(f"/proc/{shell.pid}/fd/0").readlink())
    assert slave.startswith("/dev/pts/") and _fds_naming(slave) == 1
    assert (await shell.run("echo two")).stdout == "two\n"
    assert _fds_naming(slave) == 1  # the same one: not opened again
    exited = await shell.run("exit 3", timeout=10)
    assert exited.exit_code == 3 and not exited.timed_out
    assert _fds_naming(slave) == 0


async def test_without_a_pidfd_the_slave_is_not_held_and_an_exit_is_seen(
    workdir: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a pidfd (older kernels) bash's end is the PTY's end of file, which a
    slave held open here would hide: each look opens and closes it."""

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError("no pidfd here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    session = ShellSession(workdir, settings)
    await session.start()
    try:
        assert (await session.run("echo one")).stdout == "one\n"
        slave = str(Path(f"/proc/{session.pid}/fd/0").readlink())
        assert _fds_naming(slave) == 0
        exited = await session.run("echo bye; exit 3", timeout=10)
        # (Its status is not bash's here: -1, as before this slave was kept.)
        assert (exited.stdout, exited.timed_out) == ("bye\n", False), exited
        assert "shell exited" in exited.stderr
        assert (await session.run("echo back")).stdout == "back\n"
    finally:
        await session.close()


async def test_a_fifo_made_ahead_and_written_early_is_the_next_commands(
    shell: ShellSession,
) -> None:
    """The next command's output FIFOs are made and watched once a result is out. A
    writer that finds one before its command begins (its name is in the private
    folder) costs no busy loop while idle; what it wrote is that command's output."""
    assert (await shell.run("true")).exit_code == 0
    await asyncio.sleep(0.05)  # the FIFOs of the next command are made and watched
    bash = shell._bash
    assert bash is not None and bash.files.dir is not None
    fifo = bash.files.dir / f"out.{bash._seq + 1}"
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"early\n")
        idle = time.process_time()
        await asyncio.sleep(0.3)
        assert time.process_time() - idle < 0.15  # the loop did not spin on it
        result = await shell.run("echo x", timeout=10)
        assert (result.stdout, result.exit_code) == ("early\nx\n", 0), result
    finally:
        os.close(writer)


async def test_a_settings_change_between_commands_reaches_the_next_one(
    workdir: Path, tmp_path: Path
) -> None:
    """The next command's run is made ahead with the settings of then; when they
    change before it starts (an editor setting), it is made afresh with the new ones."""
    current = [Settings(synapse_home=tmp_path / "home", command_timeout=30.0)]
    session = ShellSession(workdir, lambda: current[0])
    await session.start()
    try:
        long = "x" * 5000
        first = await session.run(f"printf '%s' {long}")
        assert (first.stdout, first.truncated) == (long, False)
        await asyncio.sleep(0.05)  # the next run is made ahead, with these limits
        current[0] = replace(current[0], output=OutputLimits(max_bytes=1000, max_lines=50))
        second = await session.run(f"printf '%s' {long}")
        assert second.truncated and len(second.stdout) < 2000, second
    finally:
        await session.close()


async def test_a_closed_session_starts_no_bash_again(workdir: Path, settings: Settings) -> None:
    """Closed is for good: neither start() nor restart() brings a bash back (a turn
    still winding down while its face exits must not leave one behind)."""
    session = ShellSession(workdir, settings)
    await session.start()
    await session.close()
    for again in (session.start, session.restart):
        with pytest.raises(ShellError, match="closed"):
            await again()
        assert session.pid is None or not session.alive
    with pytest.raises(ShellError, match="closed"):
        await session.run("true")


async def test_a_restart_cancelled_half_way_leaves_a_shell_that_works(
    shell: ShellSession, workdir: Path
) -> None:
    """A cancel that lands while a fresh bash starts (its pid read, its framing's first
    marker awaited) must not leave that half-started bash to take the next command: it
    lost the command's output (exit 141). The next command gets a fresh bash instead."""
    for turns in (1, 2, 4, 8, 16, 32):
        task = asyncio.create_task(shell.restart())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        result = await shell.run("echo alive; pwd")
        assert (result.exit_code, result.stdout) == (0, f"alive\n{workdir}\n"), turns
