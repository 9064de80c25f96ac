"""An MCP server's elicitation (`question.Elicitation`) asked on the REPL's terminal.

The server's message, then one line per field: its title, kind and choices, the default
in brackets (Enter takes it). A value is checked against the field's kind and choices
and asked again when it does not fit; Enter on a required field with no default declines
the whole form. A form with no fields is a yes/no question (Enter = decline). A cancelled
turn (Ctrl-C) cancels the form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from synapse_lsp.question import ElicitAnswer, Elicitation, ElicitField

Read = Callable[[str], Awaitable[str]]  # the prompt -> the line typed
_TRUE = ("y", "yes", "true", "1", "on")
_FALSE = ("n", "no", "false", "0", "off")


def describe(f: ElicitField) -> str:
    """How a field is asked: `Color (red, green; required) [red]> `."""
    notes: list[str] = []
    if f.choices:
        titles = f.choice_titles if len(f.choice_titles) == len(f.choices) else f.choices
        notes.append(", ".join(f"{i}={t}" for i, t in enumerate(titles, 1)))
    elif f.kind == "boolean":
        notes.append("y/n")
    elif f.kind != "string":
        notes.append(f.kind)
    if f.required:
        notes.append("required")
    shown = f"{f.title or f.name}" + (f" ({'; '.join(notes)})" if notes else "")
    if f.default is not None:
        default = ("y" if f.default else "n") if f.kind == "boolean" else f.default
        shown += f" [{default}]"
    return shown + "> "


def parse(f: ElicitField, text: str) -> tuple[Any, str | None]:
    """The value typed for `f`, or why it does not fit."""
    if f.choices:
        titles = f.choice_titles if len(f.choice_titles) == len(f.choices) else f.choices
        if text.isdigit() and 1 <= int(text) <= len(f.choices):
            return f.choices[int(text) - 1], None
        for choice, title in zip(f.choices, titles, strict=True):
            if text.lower() in (choice.lower(), title.lower()):
                return choice, None
        return None, f"one of {', '.join(f.choices)} (or its number)"
    if f.kind == "boolean":
        if text.lower() in _TRUE:
            return True, None
        if text.lower() in _FALSE:
            return False, None
        return None, "y or n"
    if f.kind == "integer":
        try:
            return int(text), None
        except ValueError:
            return None, "a whole number"
    if f.kind == "number":
        try:
            return float(text), None
        except ValueError:
            return None, "a number"
    return text, None


async def ask_form(out: TextIO, read: Read, request: Elicitation) -> ElicitAnswer:
    """The user's answer to `request` (module docstring)."""
    out.write(f"\nThe MCP server {request.server} asks:\n{request.message}\n")
    try:
        if not request.fields:
            answer = (await read("Accept? [y/N]> ")).strip().lower()
            return ElicitAnswer("accept" if answer in _TRUE else "decline")
        content: dict[str, Any] = {}
        for f in request.fields:
            while True:
                text = (await read("  " + describe(f))).strip()
                if not text:
                    if f.default is not None:
                        content[f.name] = f.default
                    elif f.required:
                        out.write(f"(declined: {f.title or f.name} is required)\n")
                        return ElicitAnswer("decline", reason=f"{f.name} left empty")
                    break
                value, problem = parse(f, text)
                if problem is None:
                    content[f.name] = value
                    break
                out.write(f"  ({problem})\n")
        return ElicitAnswer("accept", content)
    except (asyncio.CancelledError, EOFError):
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        out.write("(cancelled)\n")
        return ElicitAnswer("cancel", reason="the turn was cancelled")
    finally:
        out.flush()
