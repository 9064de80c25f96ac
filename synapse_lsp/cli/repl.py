"""The interactive loop of `synapse chat` (SPEC §9).

A `You (N)>` prompt (N: the turn the prompt starts, as `/checkpoints` and `/rewind N`
name it; agent/turn_numbers.py: it goes on after `/resume`), the answer streamed,
each command shown by its title and command line with the first and last lines of
its output dimmed, its exit status and duration (render.py), a separator between
turns. Ctrl-C cancels the running turn, not the program. In a terminal, lines typed
during a turn are queued as the next prompt (and shown as queued); `/exit` typed then
is honoured at once. After a cancel, queued lines are not sent: each waits at the next
prompt, already typed and editable, until the user presses Enter (`held`). A line
starting with `!` runs in the chat session's own shell, with the terminal attached
(bang.py); the next prompt tells the model what the user ran. Slash commands come
from the one table (agent/slash.py): case-insensitive, with aliases.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from synapse_lsp.agent.slash import SESSION_COMMANDS, SlashHost
from synapse_lsp.cli.asking import TerminalQuestions
from synapse_lsp.cli.bang import USAGE as BANG_USAGE
from synapse_lsp.cli.bang import BangLog, BangRunner, can_attach
from synapse_lsp.cli.render import DEFAULT_OUTPUT_LINES, Renderer, Style

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.events import Event
    from synapse_lsp.router import BashRouter


class Shows(Protocol):
    """What shows a turn's events: the terminal's `Renderer`, `chat -p`'s JSON face."""

    def show(self, event: Event) -> None: ...


class ReplHost(SlashHost, Protocol):
    """What the REPL needs of `cli.chat.Runtime` (a protocol, so `chat` -> `repl` stays
    the only import between the two)."""

    session: ChatSession | None
    exit_requested: bool
    sandbox_line: str  # the sandbox mode, for the banner
    quiet: tuple[str, ...]  # parts of notices said once already (an unwritable home)
    questions: TerminalQuestions

    def bang_router(self) -> BashRouter: ...


HELP_INTRO = """\
Type a request and press Enter; lines typed while the agent works are queued as the
next request (after Ctrl-C they wait at the prompt until Enter). A line starting
with ! runs in the session's shell with this terminal (e.g. !git status, !cd src,
!vim f); the agent is told what you ran with your next request. Ctrl-C cancels a
running turn; Ctrl-D or /exit leaves."""


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class TypeAhead:
    """Lines typed while a turn runs (in a terminal): `/exit` (or an alias) ends the
    turn at once and then the program, like Ctrl-C then /exit; any other line is queued
    as the next prompt and shown as queued."""

    def __init__(self, fd: int, out: TextIO, style: Style, queue: deque[str]) -> None:
        self.fd = fd
        self.out = out
        self.style = style
        self.queue = queue
        self.partial = b""
        self.exit = False
        self.cancel: Callable[[], object] | None = None  # the running turn's, while it runs
        self.answer: asyncio.Future[str] | None = None  # a permission question waits

    def on_readable(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:
            return  # Ctrl-D at the start of a line: ignored while the agent works
        # Enter is "\r" where the terminal does not map it (a program run with `!` may
        # leave ICRNL off): a line ends at either.
        data = (self.partial + data).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, self.partial = data.split(b"\n")
        for raw in lines:
            self.line(raw.decode("utf-8", "replace").strip())

    def line(self, text: str) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_result(text)
            return
        if not text:
            return
        command = SESSION_COMMANDS.get(text.split()[0]) if text.startswith("/") else None
        if command is not None and command.name == "exit":
            self.exit = True
            if self.cancel is not None:
                self.cancel()
            return
        self.queue.append(text)
        self.out.write(self.style.dim(f"(queued: {text})") + "\n")
        self.out.flush()


async def run_turn(
    session: ChatSession,
    text: str,
    renderer: Shows,
    typeahead: TypeAhead | None = None,
    questions: TerminalQuestions | None = None,
) -> str:
    """Run one turn through the one turn driver (agent/turns.py), printing it; Ctrl-C
    cancels it (`chat -p`: its SIGINT/SIGTERM handler, cli/stop_signals.py). Returns the
    stop reason. The turn first waits for the model SDK's background import (off the loop,
    so a cancel meanwhile ends the turn before it starts)."""
    from synapse_lsp.agent.turns import LiveChat
    from synapse_lsp.cli import stop_signals
    from synapse_lsp.cli.preload import sdk_ready

    loop = asyncio.get_running_loop()
    stops = stop_signals.installed()  # chat -p's (None in the REPL)
    # A terminal shows live output as it comes: no output throttle.
    live = LiveChat(session, None, throttle=None)

    async def render(event: Event) -> None:
        renderer.show(event)

    handler_set = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        if stops is None:
            loop.add_signal_handler(signal.SIGINT, live.cancel)
            handler_set = True
    reading = False
    if typeahead is not None:
        typeahead.cancel = live.cancel
        with contextlib.suppress(OSError, ValueError, NotImplementedError):
            loop.add_reader(typeahead.fd, typeahead.on_readable)
            reading = True
    if questions is not None and reading:
        questions.typeahead = typeahead
        session.mcp.elicitor = questions.elicit  # an MCP server's form: asked here
    try:
        with stops.while_running(loop, live.cancel) if stops else contextlib.nullcontext():
            finished = await live.run(text, None, render, prepare=sdk_ready)
    finally:
        if questions is not None:
            questions.typeahead = None
            session.mcp.elicitor = None
        if typeahead is not None and typeahead.answer is not None:
            typeahead.answer.cancel()  # a form still asking ends with the turn
        if handler_set:
            loop.remove_signal_handler(signal.SIGINT)
        if typeahead is not None:
            if reading:
                loop.remove_reader(typeahead.fd)
            typeahead.cancel = None
    return finished.stop_reason


def interactive(
    runtime: ReplHost,
    loop: asyncio.AbstractEventLoop,
    read: Callable[[str], str],
    *,
    output_lines: int = DEFAULT_OUTPUT_LINES,
    terminal: bool | None = None,
) -> int:
    """The REPL. `terminal`: stdin and stdout are a terminal (default: asked), which
    lends it to `!` commands and reads lines typed during a turn; from a pipe, lines
    are read one at a time, in order."""
    out = sys.stdout
    held: deque[str] = deque()  # queued lines a cancel stopped: each waits for Enter
    style = Style.for_stream(out, output_lines)
    renderer = Renderer(out, out, one_shot=False, style=style, quiet=runtime.quiet)
    terminal = can_attach() if terminal is None else terminal
    bang = BangRunner(out, attach=terminal)
    told = BangLog()
    queued: deque[str] = deque()
    typeahead = TypeAhead(sys.stdin.fileno(), out, style, queued) if terminal else None
    assert runtime.session is not None
    out.write(f"Synapse chat \u2014 session {runtime.session.id}. /help for help.\n")
    if runtime.sandbox_line:
        out.write(style.dim(f"Sandbox: {runtime.sandbox_line}") + "\n")
    if runtime.session.turns:  # resumed: where the conversation is
        from synapse_lsp.agent.recap import recap

        out.write(style.dim(recap(runtime.session)) + "\n")
    out.flush()
    echoed = _isatty(sys.stdin)  # a terminal echoes what is typed
    while True:
        assert runtime.session is not None
        prompt = f"You ({runtime.session.turns + 1})> "  # the turn this prompt starts
        if queued:
            line = queued.popleft()
            out.write(f"{prompt}{line}\n")
            out.flush()
        else:
            try:
                line = held_line(read, prompt, held.popleft(), out, style) if held else read(prompt)
                if not echoed:  # from a pipe: the transcript shows what was read
                    out.write(line + "\n")
                    out.flush()
            except EOFError:
                out.write("\n")
                return 0
            except KeyboardInterrupt:
                out.write("\n")
                continue
        text = line.strip()
        if not text:
            continue
        if text.startswith("!"):
            command = text[1:].strip()
            if not command:
                out.write(BANG_USAGE + "\n")
                out.flush()
                continue
            assert runtime.session is not None
            result = loop.run_until_complete(bang.run(runtime.bang_router(), command))
            if result is None:
                told.add(command, 130, "")
            else:
                told.add(command, result.exit_code, result.stdout + result.stderr)
            continue
        if text.startswith("/") and not SESSION_COMMANDS.is_prompt(runtime, text):
            slash = SESSION_COMMANDS.get(text.split()[0])
            if slash is not None and slash.name == "help":
                out.write(HELP_INTRO + "\n")
            shown = loop.run_until_complete(SESSION_COMMANDS.run(runtime, text))
            if runtime.exit_requested:
                return 0
            if shown:
                out.write(shown + "\n")
            out.flush()
            continue
        assert runtime.session is not None
        note = told.take()
        # A custom command (.claude/commands) is expanded first: the `!` note is no argument.
        prompt_text = runtime.session.claude.expand(text) + ("\n\n" + note if note else "")
        reason = loop.run_until_complete(
            run_turn(runtime.session, prompt_text, renderer, typeahead, runtime.questions)
        )
        renderer.separator()
        if typeahead is not None and typeahead.exit:
            return 0
        if reason == "cancelled" and queued:  # not sent: they may repeat what was stopped
            held.extend(queued)
            queued.clear()


def held_line(read: Callable[[str], str], prompt: str, text: str, out: TextIO, style: Style) -> str:
    """Read the next prompt with `text` (typed during a cancelled turn) already in it:
    editable with line editing (readline), else shown, and sent as it is on a bare Enter."""
    readline = sys.modules.get("readline")
    hook = getattr(readline, "set_pre_input_hook", None)
    if read is not input or hook is None:
        out.write(style.dim(f"(typed during the cancelled turn: {text} - Enter sends it)") + "\n")
        out.flush()
        return read(prompt).strip() or text

    def fill() -> None:
        readline.insert_text(text)  # type: ignore[union-attr]
        readline.redisplay()  # type: ignore[union-attr]

    hook(fill)
    try:
        return read(prompt)
    finally:
        hook(None)
