"""Editor feedback after the agent's edits: the problems a language server found in the
files it touched, and the user's own changes to them, as one compact note for the model.

A face reports what the editor saw (`diagnostics`, `user_changed`); `ChatSession` tells
it which files the agent changed (`edited`, from each ToolCallFinished's diffs); the
loop takes the note once (`take`), at the end of the next tool results or at the start
of the next prompt. Nothing is noted for a file the agent did not change, and nothing at
all while the setting `editorFeedback` is off (nor is any file's text kept then).

What the editor reports is not trusted: a language server can echo a repository's text
in a message, so every field is bounded (message, source, code) and `<system-reminder>`
or `</system-reminder>` anywhere in the note's body (messages, paths, the user's diff)
has its `<` escaped as `&lt;`, so nothing can close the note and speak for Synapse.
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from synapse_lsp.events import FileDiff, ToolCallFinished

MAX_PROBLEMS = 10  # per note, over every file
MAX_DIFF_LINES = 40  # of one user change
MAX_MESSAGE_CHARS = 300  # of one problem's message
MAX_ORIGIN_CHARS = 50  # of its source, and of its code
MAX_KEPT_MESSAGE_CHARS = 500  # of a message as it arrives (before spaces are collapsed)
# `<system-reminder>` / `</system-reminder>` (any case, spaces inside): the `<` escaped.
_REMINDER_TAG = re.compile(r"<(?=\s*/?\s*system-reminder)", re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    """One diagnostic the editor reported (only errors and warnings are kept)."""

    line: int  # 0-based, as LSP counts
    severity: str  # "error" or "warning"
    message: str
    source: str | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        # An editor's text, bounded as it arrives (then shown shorter still: `take`).
        object.__setattr__(self, "message", str(self.message)[:MAX_KEPT_MESSAGE_CHARS])
        for name in ("source", "code"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, str(value)[:MAX_ORIGIN_CHARS])

    def key(self) -> tuple[str, str, str | None, str | None]:
        """What identifies a problem across edits: lines move, the problem stays."""
        return (self.severity, self.message, self.source, self.code)


@dataclass
class _File:
    text: str  # what the agent's last edit left (then: what the last note showed)
    known: Counter[tuple[str, str, str | None, str | None]] | None = None
    problems: list[Problem] = field(default_factory=list)  # new, not yet noted
    changed_to: str | None = None  # the user's text, not yet noted


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


class EditorFeedback:
    """One chat session's feedback: the files its agent touched and what is pending."""

    def __init__(
        self,
        *,
        enabled: Callable[[], bool],
        root: Path | None = None,
        tool_running: Callable[[], bool] = lambda: False,
    ) -> None:
        self._enabled = enabled
        self._root = Path(_real(root)) if root is not None else None
        self._tool_running = tool_running
        self._files: dict[str, _File] = {}

    def touches(self, path: str | Path) -> bool:
        return _real(path) in self._files

    def observe(self, event: object) -> None:
        """Every event of a turn passes here; a finished call's diffs are the edits."""
        if isinstance(event, ToolCallFinished) and event.diffs:
            self.edited(event.diffs)

    def edited(self, diffs: Iterable[FileDiff]) -> None:
        """The agent changed these files: they are watched from now on; a user change
        noticed before this edit is moot (the edit succeeded against the text it read)."""
        if not self._enabled():
            self._files.clear()  # keep nothing (no file's text) while the setting is off
            return
        for diff in diffs:
            key = _real(diff.path)
            entry = self._files.get(key)
            if entry is None:
                self._files[key] = _File(diff.new_text)
                continue
            entry.text = diff.new_text
            entry.changed_to = None

    def diagnostics(
        self, path: str | Path, problems: list[Problem], before: list[Problem] | None = None
    ) -> int:
        """The editor's settled problems of a touched file (`before`: those it had when the
        edit started, if the client kept them). Returns how many are new."""
        entry = self._files.get(_real(path))
        if entry is None or not self._enabled():
            return 0
        current = [p for p in problems if p.severity in ("error", "warning")]
        if before is not None:
            known = Counter(p.key() for p in before)
        elif entry.known is not None:
            known = entry.known
        else:  # nothing to compare with (or a new file, which had none): all are new
            known = Counter()
        remaining = Counter(known)
        fresh: list[Problem] = []
        for problem in current:
            if remaining[problem.key()] > 0:
                remaining[problem.key()] -= 1
            else:
                fresh.append(problem)
        entry.known = Counter(p.key() for p in current)
        # The latest report wins: a problem fixed meanwhile is not noted.
        entry.problems = fresh
        return len(fresh)

    def user_changed(self, path: str | Path, text: str) -> bool:
        """The editor's text of a file changed outside the agent's edits. Ignored while
        one of this session's tool calls runs (a reload after the agent's own command
        is not the user's doing). True when it is noted."""
        entry = self._files.get(_real(path))
        if entry is None or not self._enabled() or self._tool_running():
            return False
        entry.changed_to = None if text == entry.text else text
        return entry.changed_to is not None

    def take(self) -> str | None:
        """The pending note, once (None when there is nothing to say)."""
        if not self._enabled():
            self._files.clear()
            return None
        problems: list[tuple[str, Problem]] = []
        changes: list[str] = []
        for key, entry in self._files.items():
            shown = self._shown(key)
            problems += [(shown, p) for p in entry.problems]
            entry.problems = []
            if entry.changed_to is not None:
                changes.append(_change_text(shown, entry.text, entry.changed_to))
                entry.text, entry.changed_to = entry.changed_to, None
        if not problems and not changes:
            return None
        parts: list[str] = []
        if problems:
            lines = [
                f"- {where}:{p.line + 1}: {p.severity}: {_one_line(p.message)}{_origin(p)}"
                for where, p in problems[:MAX_PROBLEMS]
            ]
            if len(problems) > MAX_PROBLEMS:
                lines.append(f"- … and {len(problems) - MAX_PROBLEMS} more")
            head = "New problems after your edit (reported by the editor):\n"
            parts.append(head + "\n".join(lines))
        parts += changes
        body = _REMINDER_TAG.sub("&lt;", "\n\n".join(parts))
        return f"<system-reminder>Editor feedback from Synapse:\n{body}\n</system-reminder>"

    def _shown(self, key: str) -> str:
        if self._root is not None:
            try:
                return str(Path(key).relative_to(self._root))
            except ValueError:
                pass
        return key


def _one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _origin(problem: Problem) -> str:
    named = " ".join(_one_line(x, MAX_ORIGIN_CHARS) for x in (problem.source, problem.code) if x)
    return f" [{named}]" if named else ""


def _change_text(shown: str, before: str, after: str) -> str:
    diff = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), shown, shown, n=1, lineterm=""
        )
    )[2:]
    cut = len(diff) > MAX_DIFF_LINES
    body = "\n".join(diff[:MAX_DIFF_LINES]) + (
        f"\n… ({len(diff) - MAX_DIFF_LINES} more diff lines)" if cut else ""
    )
    return (
        f"The user changed {shown} since your last edit of it (read it again before "
        f"editing it):\n```diff\n{body}\n```"
    )
