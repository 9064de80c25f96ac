"""`!command` in `synapse chat` (SPEC §9): the line runs in the chat session's own
persistent shell, through the router — `!cd` and `!export` persist, built-ins
(`!read f`) and extension commands (`!mcp:…`, `!skill:…`) work — and the model's next
prompt says briefly what the user ran (`BangLog`).

With a terminal on both stdin and stdout, a native command gets the terminal: it runs
with its stdin, stdout and stderr on the session's PTY (`/dev/tty` there) with sane
modes, the user's `TERM` and window size; our terminal goes raw and its keystrokes are
forwarded to the PTY (`ShellSession.forward_input`, only while a command is in the
PTY's foreground), while what the PTY prints is written to our stdout. So `!vim f`,
`!git add -p` and `!python` work, and Ctrl-C / Ctrl-Z reach the command as they would
in a terminal. Without a terminal (a pipe), the command reads /dev/null and its output
is streamed to stdout. The shell's framing is untouched: the command is an ordinary
command line of the session's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import tty
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from synapse_lsp.agent.turn_numbers import BANG_NOTE_HEAD
from synapse_lsp.cli.render import plain
from synapse_lsp.cmdline import quote

if TYPE_CHECKING:
    from synapse_lsp.router import BashRouter, RouteResult

USAGE = "Usage: !<command>"
INTERRUPTED = 130
# What the model is told about the user's own commands (bounded).
NOTE_COMMANDS = 10
NOTE_LINES = 10
NOTE_CHARS = 1500
NOTE_COMMAND_CHARS = 300
_FULL_SCREEN = ("\x1b[?1049h", "\x1b[?47h", "\x1b[?1047h")


def attach_script(command: str, term: str) -> str:
    """`command` with the session's terminal as its stdin, stdout and stderr (sane
    modes, the user's TERM for its duration), in the shell itself (braces, not a
    subshell: `cd` and `export` persist). Its exit status is the line's."""
    return (
        f"__syn_bang_term=${{TERM-}}; export TERM={quote(term)}; stty sane </dev/tty 2>/dev/null; "
        f"{{ {command}\n}} </dev/tty >/dev/tty 2>&1; "
        "__syn_bang_rc=$?; TERM=$__syn_bang_term; \\unset __syn_bang_term; "
        "(exit $__syn_bang_rc)"
    )


@dataclass
class _Ran:
    command: str
    exit_code: int
    output: str
    full_screen: bool


class BangLog:
    """The user's own commands since the last prompt, told to the model with the next
    one: each command line and exit status, and the last lines of the last one's output
    (all bounded)."""

    def __init__(self) -> None:
        self._ran: list[_Ran] = []
        self._dropped = 0

    def add(self, command: str, exit_code: int, output: str) -> None:
        full_screen = any(code in output for code in _FULL_SCREEN)
        self._ran.append(_Ran(command, exit_code, output, full_screen))
        if len(self._ran) > NOTE_COMMANDS:
            del self._ran[0]
            self._dropped += 1

    def take(self) -> str:
        """The note to append to the next prompt ("" when nothing ran); then forgets."""
        if not self._ran:
            return ""
        lines = [
            f"{BANG_NOTE_HEAD} in this session's shell (your commands run in the same "
            "shell, with its directory and environment):"
        ]
        if self._dropped:
            lines.append(f"({self._dropped} earlier command(s) not listed)")
        for n, ran in enumerate(self._ran):
            command = ran.command
            if len(command) > NOTE_COMMAND_CHARS:
                command = command[: NOTE_COMMAND_CHARS - 1] + "\u2026"
            lines.append(f"$ {command}")
            last = n == len(self._ran) - 1
            if ran.full_screen:
                lines.append(f"(exit {ran.exit_code}; a full-screen program, output not kept)")
                continue
            text = plain(ran.output).strip("\n")
            if not last or not text.strip():
                lines.append(f"(exit {ran.exit_code})")
                continue
            out = text.splitlines()
            cut = len(out) > NOTE_LINES
            tail = "\n".join(out[-NOTE_LINES:])
            if len(tail) > NOTE_CHARS:
                tail, cut = tail[-NOTE_CHARS:], True
            more = "last lines of its output" if cut else "its output"
            lines.append(f"(exit {ran.exit_code}; {more}:)\n{tail}")
        self._ran.clear()
        self._dropped = 0
        return "\n".join(lines) + "]"


class BangRunner:
    """Runs `!` lines for one REPL; `attach`: lend the terminal to native commands."""

    def __init__(self, out: TextIO, *, attach: bool, stdin_fd: int = 0) -> None:
        self.out = out
        self.attach = attach
        self.stdin_fd = stdin_fd

    def _write(self, stream: str, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def run(self, router: BashRouter, command: str) -> RouteResult | None:
        """Run one `!` line; prints its output and `Command exited with code N` on a
        failure. None when it was interrupted before it finished."""
        if self.attach and all_native(router, command):
            result = await self._attached(router, command)
        else:
            result = await self._streamed(router, command)
        if result is None:
            self.out.write(f"Command exited with code {INTERRUPTED}\n")
        elif result.exit_code != 0:
            self.out.write(f"Command exited with code {result.exit_code}\n")
        self.out.flush()
        return result

    async def _streamed(self, router: BashRouter, command: str) -> RouteResult | None:
        wrote = False

        def on_output(stream: str, text: str) -> None:
            nonlocal wrote
            wrote = wrote or bool(text)
            self._write(stream, text)

        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(router.route(command, on_output=on_output))
        handler = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            handler = True
        try:
            result = await task
        except asyncio.CancelledError:
            return None
        finally:
            if handler:
                loop.remove_signal_handler(signal.SIGINT)
        if not wrote:  # a built-in answers at the end
            text = result.stdout + result.stderr
            if not text.strip() and result.exit_code != 0:
                text = result.text
            if text:
                self._write("stdout", text if text.endswith("\n") else text + "\n")
        return result

    async def _attached(self, router: BashRouter, command: str) -> RouteResult | None:
        shell = router.shell
        fd = self.stdin_fd
        loop = asyncio.get_running_loop()
        held = bytearray()

        def flush_held() -> None:
            if held and shell.forward_input(bytes(held)):
                held.clear()

        def on_output(stream: str, text: str) -> None:
            self._write(stream, text)
            flush_held()

        def on_key() -> None:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                return
            held.extend(data)
            flush_held()
            if held and b"\x03" in held:  # bash itself runs (a builtin loop): interrupt it
                held.clear()
                shell.interrupt()

        def resize() -> None:
            with contextlib.suppress(OSError):
                size = os.get_terminal_size(self.out.fileno())
                shell.set_window_size(size.lines, size.columns)

        saved = termios.tcgetattr(fd)
        previous_size: tuple[int, int] | None = None
        with contextlib.suppress(OSError):
            size = os.get_terminal_size(self.out.fileno())
            previous_size = shell.set_window_size(size.lines, size.columns)
        term = os.environ.get("TERM") or "xterm-256color"
        task = asyncio.ensure_future(
            router.route(attach_script(command, term), on_output=on_output)
        )
        try:
            tty.setraw(fd, termios.TCSANOW)
            loop.add_reader(fd, on_key)
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGWINCH, resize)
                # Ctrl-C is a keystroke here (raw mode); a SIGINT sent to us is the command's
                loop.add_signal_handler(signal.SIGINT, shell.interrupt)
            try:
                result = await task
            except asyncio.CancelledError:
                return None
        finally:
            loop.remove_reader(fd)
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGWINCH)
                loop.remove_signal_handler(signal.SIGINT)
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            if previous_size is not None:
                shell.set_window_size(*previous_size)
        result.command = command  # what the user typed, not the wrapper around it
        return result


def all_native(router: BashRouter, command: str) -> bool:
    """Every simple command of the line runs in bash (none is a built-in or an
    extension command the router runs itself, e.g. `… | write f`)."""
    from synapse_lsp.cmdline import split_all
    from synapse_lsp.commands import Layer

    first = command.partition("\n")[0]
    return all(
        router.layer_of(part.strip()) is Layer.NATIVE
        for part, _ in split_all(first)
        if part.strip()
    )


def can_attach(stdin: TextIO | None = None, stdout: TextIO | None = None) -> bool:
    """A terminal on both ends: the `!` command can be given it."""
    try:
        return (stdin or sys.stdin).isatty() and (stdout or sys.stdout).isatty()
    except (AttributeError, ValueError):
        return False
