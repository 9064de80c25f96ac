"""`synapse chat -p`, the one-shot face for scripts and CI: `--output-format
text|json|stream-json` and `--input-format text|stream-json` (docs/user-guide.md
"Headless runs: JSON in and out").

`text` (the default) prints the final answer on stdout, the activity on stderr
(render.py). `json` prints the turn's `result` object alone; `stream-json` one JSON
object a line, each written at once: `init`, then the turn's events (json_events.py),
ending with its `result`. In the JSON modes stdout carries JSON only: it is written to
a private copy of fd 1 and fd 1 itself is pointed at stderr (as `synapse acp` does),
so neither a stray print nor a program started meanwhile can write into it.

`-p -` (or `-p` alone) reads the prompt from stdin. With `--input-format stream-json`
(which needs `--output-format stream-json`) stdin holds the turns, one JSON line each
(`{"type": "user", "message": {"role": "user", "content": "…" or [text blocks]}}`,
other keys ignored), run in order in one session, each ending with its `result`. A
line that is no such message is an `error` event; the lines after it still run, and
the run then exits 2. Blank lines are skipped.

Exit status, one table for every format (`ENDINGS`): 0 the answer came; 1 the turn
failed (an API error, an error during execution, the shell could not start, the model
ended without an answer, cut at the output limit, refused); 2 a usage error (a bad
flag, an empty prompt, a malformed input line); 3 the turn limit (`--max-turns`)
stopped it; 130 / 143 SIGINT / SIGTERM cancelled it. Several turns: 2 when an input
line was malformed, else the first failing turn's status; a signal wins over both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from synapse_lsp import __version__
from synapse_lsp.cli import stop_signals
from synapse_lsp.cli.json_events import TurnFace, usage_dict
from synapse_lsp.cli.render import Renderer, Style
from synapse_lsp.cli.startup import quiet_notes
from synapse_lsp.events import NO_ANSWER, Event, TurnFinished, Usage

if TYPE_CHECKING:
    from pathlib import Path

    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.cli.oneshot import DeferredStart
    from synapse_lsp.config import LiveSettings

FORMATS_OUT = ("text", "json", "stream-json")
FORMATS_IN = ("text", "stream-json")
FROM_STDIN = "-"  # `-p -`, or `-p` without a prompt
EXIT_ERROR, EXIT_USAGE, EXIT_MAX_TURNS, EXIT_CANCELLED = 1, 2, 3, 130
# How a turn ended -> (the result's `subtype`, the exit status).
ENDINGS: dict[str, tuple[str, int]] = {
    "end_turn": ("success", 0),
    "max_turns": ("error_max_turns", EXIT_MAX_TURNS),
    "max_tokens": ("error_max_tokens", EXIT_ERROR),
    "refusal": ("error_refusal", EXIT_ERROR),
    "error": ("error_during_execution", EXIT_ERROR),
    "cancelled": ("cancelled", EXIT_CANCELLED),
}
NO_ANSWER_ENDING = ("error_no_answer", EXIT_ERROR)
NO_ANSWER_TEXT = "the model ended the turn without an answer (no text); nothing to print"


class Runtime(Protocol):
    """What `-p` needs of `cli.chat.Runtime` (a protocol: `chat` imports this module)."""

    settings: LiveSettings
    cwd: Path
    model: ModelClient | None
    session: ChatSession | None
    notes: list[str]
    quiet: tuple[str, ...]
    deferred: DeferredStart | bool

    def model_name(self) -> str: ...


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-format", choices=FORMATS_OUT, default="text", metavar="FORMAT",
        help="with -p: text (the answer, default), json (one result object) or "
        "stream-json (one JSON event a line)",
    )  # fmt: skip
    parser.add_argument(
        "--input-format", choices=FORMATS_IN, default="text", metavar="FORMAT",
        help="with -p: text (the prompt) or stream-json (user messages on stdin, one JSON "
        "line each, run as turns of one session; needs --output-format stream-json)",
    )  # fmt: skip


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the format flags (a usage error), else None."""
    if args.prompt is None and (args.output_format != "text" or args.input_format != "text"):
        return "--output-format and --input-format go with -p"
    if args.input_format == "stream-json":
        if args.output_format != "stream-json":
            return "--input-format stream-json needs --output-format stream-json"
        if args.prompt != FROM_STDIN:
            return "--input-format stream-json reads the prompts from stdin: give -p alone"
    return None


def take_prompt(args: argparse.Namespace) -> str | None:
    """`-p -` with text input: the prompt is stdin's text. What is wrong, else None."""
    if args.input_format == "stream-json":
        return None
    if args.prompt == FROM_STDIN:
        args.prompt = sys.stdin.read()
    if not args.prompt.strip():
        return "-p needs a non-empty prompt"
    return None


def ending(finished: TurnFinished) -> tuple[str, int]:
    """The result's subtype and the exit status of a turn that ended so."""
    stops = stop_signals.installed()
    if finished.stop_reason == "end_turn" and finished.note == NO_ANSWER:
        subtype, code = NO_ANSWER_ENDING
    elif finished.stop_reason == "cancelled" and (stops is None or not stops.fired):
        subtype, code = ENDINGS["error"]  # no signal: the tools could not start (said so)
    else:
        subtype, code = ENDINGS.get(finished.stop_reason, ENDINGS["error"])
    return subtype, stop_signals.exit_code(code)  # a signal taken: 128 + its number


def run(
    runtime: Runtime,
    args: argparse.Namespace,
    loop: asyncio.AbstractEventLoop,
    *,
    output_lines: int,
) -> int:
    """Run `-p`'s turn(s) in `runtime`'s session; the exit status."""
    session = runtime.session
    assert session is not None
    session.skill_enhance = False  # the process ends with its turns
    # One turn, then the close: it takes the turn's after-snapshot, beside the shells' end.
    session.checkpoints.closes_after_turn = args.input_format != "stream-json"
    if args.output_format == "text":
        return _text(session, args.prompt, loop, output_lines, runtime.quiet)
    out = JsonOut(_take_stdout(), stream=args.output_format == "stream-json")
    out.event(_init(runtime, args))
    for note in quiet_notes(runtime.notes, runtime.quiet):
        out.event(_notice(note))
    deferred = runtime.deferred
    if not isinstance(deferred, bool):  # the tools start after the first request
        deferred.listeners.append(lambda note: out.event(_notice(note)))
    if args.input_format == "stream-json":
        reader = Lines(_take_stdin())
        return loop.run_until_complete(_turns(runtime, session, out, reader))
    return loop.run_until_complete(_turn(runtime, session, out, args.prompt))


class _TextRenderer(Renderer):
    """Text mode's renderer, keeping how the turn ended (`TurnFinished`)."""

    finished: TurnFinished | None = None

    def show(self, event: Event) -> None:
        if isinstance(event, TurnFinished):
            self.finished = event
        super().show(event)


def _text(
    session: ChatSession,
    prompt: str,
    loop: asyncio.AbstractEventLoop,
    lines: int,
    quiet: tuple[str, ...],
) -> int:
    from synapse_lsp.cli.repl import run_turn

    style = Style.for_stream(sys.stderr, lines)
    renderer = _TextRenderer(sys.stdout, sys.stderr, one_shot=True, style=style, quiet=quiet)
    loop.run_until_complete(run_turn(session, prompt, renderer))
    finished = renderer.finished or TurnFinished("error", Usage())
    subtype, code = ending(finished)
    if subtype == NO_ANSWER_ENDING[0]:
        print(f"synapse chat: {NO_ANSWER_TEXT}", file=sys.stderr)
    return code


# ------------------------------------------------------------------ the JSON modes


class JsonOut:
    """Where the JSON goes: one object a line, written at once (a private copy of
    stdout). Events only in stream-json; results always. A reader that went away is
    noted (`gone`, and `on_gone` is called), never raised mid-turn."""

    def __init__(self, fd: int, *, stream: bool) -> None:
        self.fd = fd
        self.stream = stream
        self.gone = False
        self.on_gone: Callable[[], object] | None = None

    def event(self, obj: dict[str, Any]) -> None:
        if self.stream:
            self.write(obj)

    def write(self, obj: dict[str, Any]) -> None:
        if self.gone:
            return
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except BrokenPipeError:
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()


def _take_stdout() -> int:
    """A private descriptor for the JSON; fd 1 (and `sys.stdout`) now go to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.set_inheritable(fd, False)
    os.dup2(2, 1)
    return fd


def _take_stdin() -> int:
    """A private descriptor for the input lines; fd 0 now reads nothing (/dev/null), so
    no program the agent starts can take a line meant for the next turn."""
    fd = os.dup(0)
    os.set_inheritable(fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return fd


def _notice(note: str) -> dict[str, Any]:
    level = "warning" if note.startswith(("warning", "synapse chat:")) else "info"
    return {"type": "notice", "level": level, "message": note, "code": None,
            "parent_tool_call_id": None}  # fmt: skip


def _init(runtime: Runtime, args: argparse.Namespace) -> dict[str, Any]:
    session = runtime.session
    assert session is not None
    settings = runtime.settings()
    return {
        "type": "init",
        "session_id": session.id,
        "resumed": args.resume is not None,
        "cwd": str(runtime.cwd),
        "model": runtime.model_name(),
        "tools": ["Bash"],
        "commands": sorted(session.router.builtins),
        "permission_mode": settings.permission,
        "questions": "allowed" if args.yes else "denied",
        "allow": list(dict.fromkeys(args.allow)),
        "deny": list(dict.fromkeys(args.deny)),
        "sandbox": settings.sandbox,
        "network": settings.network,
        "version": __version__,
    }


class Lines:
    """Input lines, read from `fd` by a thread of their own (a regular file, a pipe or
    a terminal alike; the thread never keeps the process alive)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.queue: asyncio.Queue[bytes | None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        queue = self.queue = asyncio.Queue()

        def pump() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody reads
                with os.fdopen(self.fd, "rb") as stream:
                    for line in stream:
                        loop.call_soon_threadsafe(queue.put_nowait, line)
                loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=pump, name="synapse-input", daemon=True).start()

    async def next(self) -> bytes | None:
        """The next line; None at the end of input (or when a signal stops the wait)."""
        if self.queue is None:
            self.start()
        assert self.queue is not None
        waiter = asyncio.ensure_future(self.queue.get())
        stops = stop_signals.installed()
        loop = asyncio.get_running_loop()
        with stops.while_running(loop, waiter.cancel) if stops else contextlib.nullcontext():
            await asyncio.wait({waiter})
        return None if waiter.cancelled() else waiter.result()


def user_text(line: bytes) -> str:
    """The text of one stream-json user message; ValueError says what is wrong."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("type") != "user":
        raise ValueError('expected {"type": "user", "message": {...}}')
    message = data.get("message")
    if not isinstance(message, dict) or message.get("role", "user") != "user":
        raise ValueError('"message" must be an object with "role": "user"')
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list) and content:
        parts = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "text":
                raise ValueError('only text blocks are read: {"type": "text", "text": "…"}')
            if not isinstance(block.get("text"), str):
                raise ValueError('a text block needs a string "text"')
            parts.append(block["text"])
        text = "\n\n".join(parts)
    else:
        raise ValueError('"content" must be a string or a list of text blocks')
    if not text.strip():
        raise ValueError("the message has no text")
    return text


async def _turns(runtime: Runtime, session: ChatSession, out: JsonOut, lines: Lines) -> int:
    """Each input line's turn, in order; the run's exit status."""
    failed = 0  # the first failing turn's status
    malformed = False
    number = 0
    while not out.gone:
        line = await lines.next()
        if line is None:
            break
        number += 1
        if not line.strip():
            continue
        try:
            text = user_text(line)
        except ValueError as exc:
            malformed = True
            out.event({"type": "error", "subtype": "invalid_input", "line": number,
                       "message": f"input line {number}: {exc}; skipped"})  # fmt: skip
            continue
        code = await _turn(runtime, session, out, text)
        failed = failed or code
        stops = stop_signals.installed()
        if stops is not None and stops.fired:
            break  # a signal ends the run
    if number == 0 and not out.gone:
        malformed = True
        out.event({"type": "error", "subtype": "no_input", "line": 0,
                   "message": "stdin held no user message"})  # fmt: skip
    return stop_signals.exit_code(_finally(out, EXIT_USAGE if malformed else failed))


def _finally(out: JsonOut, code: int) -> int:
    from synapse_lsp.cli.entry import BROKEN_PIPE_EXIT

    return BROKEN_PIPE_EXIT if out.gone else code


async def _turn(runtime: Runtime, session: ChatSession, out: JsonOut, text: str) -> int:
    """One turn, its events and its `result`; its exit status."""
    from synapse_lsp.cli.repl import run_turn
    from synapse_lsp.cli.run_options import RunModel

    model = runtime.model
    clock = model.clock if isinstance(model, RunModel) else None
    api_before = clock.seconds if clock is not None else 0.0
    face = TurnFace(out.event)
    task = asyncio.current_task()
    out.on_gone = task.cancel if task is not None else None  # nobody reads: stop the turn
    try:
        await run_turn(session, text, face)
    except asyncio.CancelledError:
        if not out.gone:
            raise
    finally:
        out.on_gone = None
    finished = face.finished or TurnFinished("cancelled" if out.gone else "error", Usage())
    subtype, code = ending(finished)
    cost = session.turn_cost().amount if finished.usage != Usage() else 0.0
    api_ms = None if clock is None else round((clock.seconds - api_before) * 1000)
    out.write(
        {
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "result": face.answer if finished.stop_reason != "error" else "",
            "session_id": session.id,
            "num_turns": face.model_calls,
            "duration_ms": round((time.monotonic() - face.started) * 1000),
            "duration_api_ms": api_ms,
            "total_cost_usd": None if cost is None else round(cost, 6),
            "usage": usage_dict(finished.usage),
            "permission_denials": face.denials,
            "exit_code": code,
            "stop_reason": finished.stop_reason,
            "error": finished.error,
        }
    )
    return _finally(out, code)
