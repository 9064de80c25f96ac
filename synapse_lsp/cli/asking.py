"""How the terminal faces ask: the flags `--sandbox`, `--network` and `--yes`, and the
REPL's questions in the terminal.

`synapse exec` and `synapse chat -p` have nobody to ask: what the permission gate
would ask (a write outside the workspace, re-running a command the sandbox blocked
outside it, ...) is denied with the reason, unless `--yes` answers "Allow once" to
every such question. `--sandbox`/`--network` set the modes for this run (over the
settings files and `SYNAPSE_SANDBOX`/`SYNAPSE_NETWORK`).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Protocol, TextIO

from synapse_lsp.cli.terminal_forms import ask_form
from synapse_lsp.config import NETWORK_MODES, SANDBOX_MODES
from synapse_lsp.question import ALLOW_ONCE, DENY, ElicitAnswer, Elicitation, Question


def add_permission_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox", choices=SANDBOX_MODES, metavar="MODE",
        help="what commands may write: read-only, workspace-write (default) or full-access",
    )  # fmt: skip
    parser.add_argument(
        "--network", choices=NETWORK_MODES, metavar="on|off",
        help="whether sandboxed commands reach the network (default off)",
    )  # fmt: skip
    parser.add_argument(
        "-y", "--yes", action="store_true",
        help="allow what would be asked (writes outside the workspace, re-running a command "
        "the sandbox blocked outside it); without it such commands are denied",
    )  # fmt: skip


def face_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags set."""
    values: dict[str, Any] = {}
    if args.sandbox is not None:
        values["sandbox"] = args.sandbox
    if args.network is not None:
        values["network"] = args.network
    return values


async def yes_asker(question: Question) -> str | None:
    """`--yes`: every question is answered "Allow once" (never remembered)."""
    return ALLOW_ONCE


# Nobody reads these questions: the gate refuses what must be confirmed by a person
# (a change to what governs the agent, `policy.governing`).
yes_asker.answers_everything = True  # type: ignore[attr-defined]


class Answering(Protocol):
    """Where the answer comes from: the REPL's reader of lines typed during a turn
    (`repl.TypeAhead`) resolves `answer` with the next line."""

    answer: asyncio.Future[str] | None


class TerminalQuestions:
    """The REPL's permission questions (`question.Asker`): asked in the terminal
    during a turn, rendered from the question's data (its prose, then its options
    numbered), answered by number or a title's start (Enter alone = Deny); lines typed
    meanwhile are the answer, not queued prompts. Without a terminal nothing can be
    asked: the gate denies, saying so."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.typeahead: Answering | None = None  # set while a turn runs in a terminal
        self._lock = asyncio.Lock()

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        """An MCP server's form, asked field by field (cli/terminal_forms.py)."""
        if self.typeahead is None:
            return ElicitAnswer("decline", reason="no terminal to ask in")
        async with self._lock:
            return await ask_form(self.out, self._line, request)

    async def _line(self, prompt: str) -> str:
        typeahead = self.typeahead
        if typeahead is None:  # the turn ended meanwhile
            raise EOFError
        self.out.write(prompt)
        self.out.flush()
        typeahead.answer = asyncio.get_running_loop().create_future()
        try:
            return await typeahead.answer
        finally:
            typeahead.answer = None

    async def ask(self, question: Question) -> str | None:
        typeahead = self.typeahead
        if typeahead is None:
            raise RuntimeError("no terminal to ask in")
        actions = question.actions  # the buttons: a hidden option is never offered here
        async with self._lock:  # one question at a time
            choices = "  ".join(f"[{i}] {title}" for i, title in enumerate(actions, 1))
            self.out.write(f"\n{question.message}\n{choices}\n")
            while True:
                self.out.write(f"Answer 1-{len(actions)} (Enter = Deny)> ")
                self.out.flush()
                typeahead.answer = asyncio.get_running_loop().create_future()
                try:
                    text = (await typeahead.answer).strip()
                finally:
                    typeahead.answer = None
                if not text:
                    return DENY
                if text.isdigit() and 1 <= int(text) <= len(actions):
                    chosen = actions[int(text) - 1]
                    self.out.write(f"({chosen})\n")
                    self.out.flush()
                    return chosen
                matches = [a for a in actions if a.lower().startswith(text.lower())]
                if len(matches) == 1:
                    return matches[0]
