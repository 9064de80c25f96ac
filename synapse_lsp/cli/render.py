"""How `synapse chat` shows a turn in a terminal (SPEC §9): the answer streamed, and for
each command its title and command line, the first and last N lines of its output
dimmed, its exit status and duration; a separator between turns.

Colour (ANSI) only when the stream is a terminal and `NO_COLOR` is not set; lines are
fitted to the terminal's width (`COLUMNS`, else the terminal, else 80).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from synapse_lsp import catalog, cmdline

if TYPE_CHECKING:
    from synapse_lsp.events import Event

DEFAULT_OUTPUT_LINES = 4
# Escape sequences (CSI, OSC, two-byte) and the control characters a preview must not
# pass to the terminal (they would move the cursor or change colours).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: str) -> str:
    """`text` without escape sequences and control characters (tabs kept); a carriage
    return keeps what was written after it (a progress bar's last state)."""
    text = _ESCAPES.sub("", text)
    if "\r" in text:
        text = "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _CONTROLS.sub("", text.replace("\t", "    "))


def wants_color(stream: TextIO) -> bool:
    """ANSI only for a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int:
    return max(20, shutil.get_terminal_size((80, 24)).columns)


@dataclass
class Style:
    color: bool = False
    width: int = 80
    output_lines: int = DEFAULT_OUTPUT_LINES

    @classmethod
    def for_stream(cls, stream: TextIO, output_lines: int = DEFAULT_OUTPUT_LINES) -> Style:
        return cls(wants_color(stream), terminal_width(), output_lines)

    def _sgr(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color and text else text

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def bold(self, text: str) -> str:
        return self._sgr("1", text)

    def red(self, text: str) -> str:
        return self._sgr("31", text)

    def green(self, text: str) -> str:
        return self._sgr("32", text)

    def wrap(self, text: str, indent: str, hanging: str | None = None) -> list[str]:
        """`text` wrapped to the width: the first line after `indent`, the rest after
        `hanging` (default: `indent` plus two spaces). Long words are broken."""
        rest = indent + "  " if hanging is None else hanging
        width = max(self.width - 1, len(rest) + 10)
        out: list[str] = []
        for n, para in enumerate(text.split("\n") or [""]):
            first = indent if n == 0 else rest
            out += textwrap.wrap(
                para,
                width,
                initial_indent=first,
                subsequent_indent=rest,
                break_on_hyphens=False,
                drop_whitespace=True,
                replace_whitespace=False,
            ) or [first.rstrip()]
        return out

    def fit(self, text: str, room: int) -> str:
        """One line cut to `room` columns with an ellipsis."""
        room = max(room, 8)
        return text if len(text) <= room else text[: room - 1] + "\u2026"

    def separator(self) -> str:
        return self.dim("\u2500" * min(self.width - 1, 60))


def format_duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@dataclass
class _Call:
    """One running command's preview: the head shown live, a rolling tail held back."""

    indent: str
    started: float
    shown: int = 0  # head lines printed
    total: int = 0  # complete lines seen
    partial: str = ""
    tail: list[str] = field(default_factory=list)
    streamed: bool = False


def status_words(status: str, exit_code: int | None, category: str | None) -> str:
    if status == "denied" or category == "permission_denied":
        return "Denied"
    if status == "cancelled":
        return "cancelled"
    if exit_code is None:
        return "failed" if status == "failed" else "done"
    return f"exit {exit_code}"


def task_description(command: str) -> str:
    """A `task:*` line's -d/--description (else its type), for labelling its commands."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for i, word in enumerate(words):
        if word in ("-d", "--description") and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--description="):
            return word.partition("=")[2]
    return words[0] if words else "task"


def _title(command: str) -> str:
    # A line is often run again (`git status`, a test command): its title is kept.
    return _kept_title(command) if len(command) <= 4096 else _made_title(command)


def _made_title(command: str) -> str:
    from synapse_lsp.summaries.titles import summarize

    try:
        return summarize(command).title
    except Exception:  # a summary is cosmetic: never fail a turn over it
        return command


_kept_title = functools.lru_cache(maxsize=256)(_made_title)


class Renderer:
    """Prints one turn's events. `answer_out` gets the answer; `activity` the rest."""

    def __init__(
        self,
        answer_out: TextIO,
        activity: TextIO,
        *,
        one_shot: bool,
        style: Style | None = None,
        quiet: tuple[str, ...] = (),
    ) -> None:
        self.out = answer_out
        self.quiet = quiet  # notices containing one of these were said already
        self.activity = activity
        self.one_shot = one_shot
        self.style = style or Style()
        self.buffer: list[str] = []  # one-shot: the current message's text
        self.mid_line = False
        self.answered = False  # a model response ended: its next text is a new paragraph
        self.thinking = False  # inside a run of thinking deltas
        self.calls: dict[str, _Call] = {}
        # Running `task:*` calls -> their description: while several run at once, each
        # nested command's header names the sub-agent it belongs to.
        self.subagents: dict[str, str] = {}
        self._now = time.monotonic

    # ---------------------------------------------------------------- output

    def _end_text_line(self) -> None:
        if self.mid_line:  # end the streamed text's line first
            self.out.write("\n")
            self.out.flush()
            self.mid_line = False

    def _line(self, text: str, stream: TextIO | None = None) -> None:
        target = stream or self.activity
        self._end_text_line()
        target.write(text + "\n")
        target.flush()

    def _lines(self, lines: list[str]) -> None:
        if lines:
            self._line("\n".join(lines))

    # -------------------------------------------------------- command preview

    def _output_line(self, call: _Call, line: str) -> str:
        bar = f"{call.indent}  \u2502 "
        room = self.style.width - 1 - len(bar)
        return self.style.dim(bar + self.style.fit(line, room))

    def _feed(self, call: _Call, text: str) -> None:
        limit = self.style.output_lines
        text = call.partial + text
        *complete, call.partial = text.split("\n")
        show: list[str] = []
        for raw in complete:
            line = plain(raw).rstrip()
            call.total += 1
            if call.shown < limit:
                call.shown += 1
                show.append(self._output_line(call, line))
            elif limit > 0:
                call.tail.append(line)
                if len(call.tail) > limit:
                    del call.tail[0]
        self._lines(show)

    def _flush_call(self, call: _Call) -> None:
        if call.partial:
            self._feed(call, "\n")
        limit = self.style.output_lines
        hidden = call.total - call.shown - len(call.tail)
        lines: list[str] = []
        if hidden > 0:
            more = f"\u2026 {hidden} more line{'s' if hidden != 1 else ''} \u2026"
            lines.append(self.style.dim(f"{call.indent}  \u2502 {more}"))
        if limit > 0:
            lines += [self._output_line(call, line) for line in call.tail]
        self._lines(lines)

    def command_started(
        self, key: str, command: str, indent: str = "", note: str = "", label: str = ""
    ) -> None:
        """A command's header: its title (after `label`, e.g. which sub-agent runs it), and
        its command line when the title is not it."""
        self.calls[key] = _Call(indent, self._now())
        title = _title(command)
        head = f"[{label}] " if label else ""
        lines = [self.style.bold(x) for x in self.style.wrap(f"\u25b8 {head}{title}{note}", indent)]
        if command.strip() not in title:  # a title quoting the whole command says it
            lines += [
                self.style.dim(x)
                for x in self.style.wrap(f"$ {cmdline.visible(command)}", indent + "  ")
            ]
        self._lines(lines)

    def command_output(self, key: str, text: str) -> None:
        call = self.calls.get(key)
        if call is not None:
            call.streamed = True
            self._feed(call, text)

    def command_finished(
        self,
        key: str,
        *,
        status: str,
        exit_code: int | None,
        is_error: bool,
        category: str | None = None,
        text: str = "",
    ) -> None:
        call = self.calls.pop(key, None)
        if call is None:
            call = _Call("", self._now())
        if not call.streamed and text.strip():
            self._feed(call, text if text.endswith("\n") else text + "\n")
        self._flush_call(call)
        words = status_words(status, exit_code, category)
        took = format_duration(self._now() - call.started)
        if is_error or status in ("failed", "cancelled", "denied"):
            mark = self.style.red(f"\u2717 {words}")
        else:
            mark = self.style.green("\u2713") + f" {words}"
        dot = self.style.dim(" \u00b7 " + took)
        self._line(f"{call.indent}  {mark}{dot}")

    # ----------------------------------------------------------------- events

    def separator(self) -> None:
        self._line(self.style.separator())

    def show(self, event: Event) -> None:
        from synapse_lsp.events import (
            Notice,
            PlanUpdated,
            TextDelta,
            ThinkingDelta,
            ToolCallFinished,
            ToolCallStarted,
            ToolOutput,
            TurnFinished,
            UsageUpdated,
        )

        nested = getattr(event, "parent_tool_call_id", None) is not None
        indent = "    " if nested else ""
        if self.thinking and not isinstance(event, ThinkingDelta):
            self.thinking = False
            self._end_text_line()
        if isinstance(event, TextDelta):
            if nested:
                return  # a sub-agent's prose stays in its card; its tool calls are shown
            # A turn a Stop hook continued: the next response's text is a paragraph of
            # its own, not glued to the last one's words.
            fresh, self.answered = self.answered, False
            if self.one_shot:
                self.buffer.append(("\n\n" if fresh and self.buffer else "") + event.text)
            else:
                if fresh and self.mid_line:
                    self.out.write("\n\n")
                self.out.write(event.text)
                self.out.flush()
                self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ThinkingDelta):
            if nested or self.one_shot:
                return  # thinking is for the person watching, not for scripts
            if not self.thinking:
                self._line(self.style.dim("(thinking)"))
                self.thinking = True
            self.out.write(self.style.dim(event.text))
            self.out.flush()
            self.mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            if self.one_shot and self.buffer:
                self.activity.write("".join(self.buffer).rstrip() + "\n")
                self.buffer.clear()
            note = " (restarting the shell)" if event.restart else ""
            parent = event.parent_tool_call_id
            label = ""
            starts = catalog.traits_of(cmdline.first_word(event.command.lstrip()))
            if parent is None and starts is not None and starts.starts_agent:
                self.subagents[event.tool_call_id] = task_description(event.command)
            elif parent in self.subagents and len(self.subagents) > 1:
                label = self.subagents[parent]
            self.command_started(event.tool_call_id, event.command, indent, note, label)
        elif isinstance(event, UsageUpdated):
            self.answered = self.answered or not nested
        elif isinstance(event, ToolOutput):
            self.command_output(event.tool_call_id, event.chunk)
        elif isinstance(event, ToolCallFinished):
            self.subagents.pop(event.tool_call_id, None)
            self.command_finished(
                event.tool_call_id,
                status=event.status,
                exit_code=event.exit_code,
                is_error=event.is_error,
                category=event.category,
                text=event.text,
            )
        elif isinstance(event, Notice):
            if any(part in event.message for part in self.quiet):
                return
            if event.discards_text and self.one_shot and not nested:
                self.buffer.clear()  # stdout carries only the final answer
            self._lines(self.style.wrap(f"[{event.level}] {event.message}", indent))
        elif isinstance(event, PlanUpdated):
            marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
            lines = [f"{indent}Plan:"] + [
                f"{indent}  {marks.get(e.status, '[ ]')} {e.step}"
                + (f" ({e.active_form})" if e.status == "in_progress" and e.active_form else "")
                for e in event.entries
            ]
            self._line("\n".join(lines))
        elif isinstance(event, TurnFinished):
            for key in list(self.calls):  # a call the turn never finished (cancelled)
                self._flush_call(self.calls.pop(key))
            if self.one_shot:
                answer = "".join(self.buffer).strip()
                self.buffer.clear()
                if answer and event.stop_reason == "error":
                    # the failed call's partial text is no answer: stdout stays clean
                    self.activity.write(answer + "\n")
                elif answer:
                    self.out.write(answer + "\n")
                    self.out.flush()
            else:
                self._end_text_line()
            if event.stop_reason == "error":
                self._line(f"Error: {event.error}", sys.stderr)
            elif event.stop_reason == "cancelled":
                self._line("(turn cancelled)")
            elif event.stop_reason != "end_turn":
                self._line(f"(turn ended: {event.stop_reason})")
            elif event.note and not self.one_shot:
                self._line(event.note)  # "(no answer)": the model ended without text
