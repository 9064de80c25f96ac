"""Running one hook (policy/hooks.py): its process, its output, what it answered.

A hook runs as `bash -c <command>` in a process group of its own, its JSON on stdin;
it is done when its process exits (not when its pipes close), killed whole at its
timeout, on cancel, and once it exits. Each stream keeps its first MAX_OUTPUT_BYTES.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_OUTPUT_BYTES = 1 << 20  # of each stream a hook prints; the rest is dropped
SHOWN_CHARS = 2000  # of a hook's message, in a tool result or a notice
PIPE_GRACE_S = 1.0  # for its output once a hook has exited
# Events whose matcher is used: on the tool name; SessionStart's on its `source`,
# SessionEnd's on its `reason`, PreCompact's on its `trigger`, Notification's on its
# `notification_type`.
MATCHED = frozenset({"PreToolUse", "PostToolUse", "SessionStart"}) | {
    "SessionEnd",
    "PreCompact",
    "Notification",
}
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str  # "" and "*" match everything
    command: str
    timeout: float
    source: str  # the settings file it came from

    def matches(self, subject: str | None) -> bool:
        """Claude Code's rule: all for "" or "*"; names (`Edit|Write`) when the matcher
        is only word characters and `|`; else a regular expression searched in it."""
        if self.event not in MATCHED or self.matcher in ("", "*"):
            return True
        if subject is None:
            return False
        if re.fullmatch(r"[\w|]+", self.matcher):
            return subject in {part.strip() for part in self.matcher.split("|")}
        return re.search(self.matcher, subject) is not None


def short(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


@dataclass(frozen=True)
class Ran:
    hook: Hook
    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None = None  # could not start, timed out, killed by a signal
    output: dict[str, Any] = field(default_factory=dict)  # its JSON (exit 0)
    # Exit 0, but what it printed cannot be its answer: cut off at MAX_OUTPUT_BYTES, or
    # starting with `{` and not a JSON object. A failure: PreToolUse denies (fail
    # closed), the other events warn and go on without it.
    bad_output: str | None = None
    # Its stdout was a JSON object (`{}` too): its answer, never context for the model.
    is_json: bool = False

    @property
    def failed(self) -> bool:
        return self.error is not None or self.exit_code not in (0, 2) or self.bad_output is not None

    def failure(self) -> str:
        what = self.error or self.bad_output or f"exited with {self.exit_code}"
        said = short(self.stderr.strip() or self.stdout.strip())
        return f"the {self.hook.event} hook `{short(self.hook.command, 120)}` {what}" + (
            f": {said}" if said else ""
        )

    def specific(self, key: str) -> Any:
        inner = self.output.get("hookSpecificOutput")
        return inner.get(key) if isinstance(inner, dict) else None


async def run_one(hook: Hook, data: bytes, env: dict[str, str], cwd: Path) -> Ran:
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            "bash",
            "-c",
            hook.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group: killed whole
        )
    )
    try:  # shielded: cancelled inside, asyncio kills bash alone, then waits for its pipes
        proc = await asyncio.shield(spawn)  # (held by what it started: a `sleep 60`)
    except asyncio.CancelledError:
        spawn.add_done_callback(_kill_spawned)  # its whole group, once it is known
        raise
    except OSError as exc:
        return Ran(hook, None, "", "", f"could not start ({exc})")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    cut: list[bool] = []  # stdout went past MAX_OUTPUT_BYTES
    parts = [
        asyncio.ensure_future(_feed(proc.stdin, data)),
        asyncio.ensure_future(_read(proc.stdout, out, cut)),
        asyncio.ensure_future(_read(proc.stderr, err, [])),
    ]
    error: str | None = None
    try:
        try:
            # The hook is done when its process exits: not `proc.wait()`, which in
            # Python 3.11 also waits for every pipe to close, so a child that left the
            # group (`setsid job &`) and holds stdout held the call far past the timeout.
            async with asyncio.timeout(hook.timeout):  # not wait_for: it can drop a cancel
                await _exited(proc)
        except TimeoutError:
            error = f"timed out after {hook.timeout:g} s"
        _kill_group(proc.pid)  # on timeout, and what it left behind holding the pipes
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PIPE_GRACE_S):
                await _exited(proc)
        # A child that left the group (setsid) may still hold a pipe: what came within
        # a short bound is kept, and the pipes are closed on our side.
        await asyncio.wait({parts[1], parts[2]}, timeout=PIPE_GRACE_S)
    finally:
        _kill_group(proc.pid)
        for part in parts:
            part.cancel()
        await asyncio.gather(*parts, return_exceptions=True)
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()  # our ends of the pipes: nothing waits on a stray child
    stdout, stderr = _text(out), _text(err)
    code = proc.returncode
    if error is None and code is not None and code < 0:
        error = f"was killed by signal {-code}"
    output: dict[str, Any] = {}
    bad: str | None = None
    is_json = False
    if error is None and code == 0:
        start = stdout.lstrip().lstrip("\ufeff").lstrip()  # whitespace, a BOM
        if cut:
            bad = (
                f"exited 0 but its output was over {MAX_OUTPUT_BYTES // (1 << 20)} MiB "
                "(cut off, so not read as its answer)"
            )
        elif start.startswith("{"):
            parsed: Any = None
            with contextlib.suppress(ValueError, RecursionError):
                parsed = json.loads(start)
            if isinstance(parsed, dict):
                output, is_json = parsed, True
            else:
                bad = "exited 0 but its output was not valid JSON (it starts with `{`)"
    return Ran(hook, None if error else code, stdout, stderr, error, output, bad, is_json)


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Until `proc` has exited and been reaped (its pipes may still be open): a pidfd
    says when it exits, then the event loop's child watcher reaps it."""
    if proc.returncode is not None:
        return
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        gone: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not gone.done():
                gone.set_result(None)

        loop.add_reader(fd, readable)
        try:
            if proc.returncode is None:
                await gone
        finally:
            loop.remove_reader(fd)
            os.close(fd)
    delay = 0.002
    while proc.returncode is None:  # exited; the watcher reaps it in a moment
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stream.write(data)
        await stream.drain()
        stream.close()


async def _read(stream: asyncio.StreamReader, kept: bytearray, cut: list[bool]) -> None:
    """A stream to its end into `kept`, keeping the first MAX_OUTPUT_BYTES (`cut` gets
    an entry when more came)."""
    while chunk := await stream.read(65536):
        room = MAX_OUTPUT_BYTES - len(kept)
        if len(chunk) > room and not cut:
            cut.append(True)
        if room > 0:
            kept += chunk[:room]


def _text(data: bytearray) -> str:
    return data.decode("utf-8", errors="replace")


def _kill_spawned(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """A hook whose start a cancel interrupted: its group killed, our pipe ends closed."""
    if not spawn.cancelled() and spawn.exception() is None:
        _kill_group(spawn.result().pid)
        spawn.result()._transport.close()  # type: ignore[attr-defined]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
