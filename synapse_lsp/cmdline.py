"""Small, quote-aware scanning of one Bash command line, for routing decisions.

The router only needs a few facts about a line: its first word, whether it is a
single simple command, where the first top-level shell operator is, and a
heredoc body. A full parse is not needed for that, and must not change the text
that the native shell will receive.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Operators that end a simple command at top level.
_OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2[ \t]*\n", re.DOTALL)
# Characters no POSIX shell treats specially inside a word (ASCII only; no `~`, `*`, `$`…).
_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


@dataclass(frozen=True)
class Split:
    """A line cut at its first top-level operator: `head op rest`."""

    head: str
    operator: str | None
    rest: str


def first_word(line: str) -> str:
    """The first shell word of `line`, unquoted, or "" (best effort, never raises)."""
    text = line.lstrip()
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        return lexer.get_token() or ""
    except ValueError:
        return text.split(maxsplit=1)[0] if text.split() else ""


def split_top_level(line: str) -> Split:
    """Cut `line` at the first operator outside quotes, escapes, `$(…)`, backticks and braces."""
    i, n = 0, len(line)
    depth = 0
    quote: str | None = None
    while i < n:
        ch = line[i]
        if quote == "'":
            if ch == "'":
                quote = None
        elif quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = None
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "`":
            end = line.find("`", i + 1)
            i = n if end < 0 else end
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth = max(0, depth - 1)
        elif depth == 0:
            for op in _OPERATORS:
                if line.startswith(op, i):
                    return Split(line[:i], op, line[i + len(op) :])
        i += 1
    return Split(line, None, "")


def has_redirection(head: str) -> bool:
    """True if a simple command has an unquoted `<` or `>` (outside quotes)."""
    try:
        lexer = shlex.shlex(head, posix=True, punctuation_chars="<>")
        lexer.whitespace_split = True
        return any(tok and set(tok) <= set("<>") for tok in lexer)
    except ValueError:
        return False


def extract_heredoc(line: str) -> tuple[str, str] | None:
    """`cmd args <<'EOF'\\nbody\\nEOF` -> (`cmd args`, `body\\n`), else None.

    Only a line that is exactly one command plus one heredoc qualifies; the body
    is taken literally (no expansion), which is what a quoted delimiter means and
    what a model almost always intends.
    """
    match = _HEREDOC.search(line)
    if match is None:
        return None
    strip_tabs, delimiter = match.group(1) == "-", match.group(3)
    head = line[: match.start()].rstrip()
    body_and_end = line[match.end() :]
    lines = body_and_end.split("\n")
    for index, text in enumerate(lines):
        candidate = text.lstrip("\t") if strip_tabs else text
        if candidate.rstrip("\r") == delimiter:
            if any(rest.strip() for rest in lines[index + 1 :]):
                return None  # more commands after the heredoc: not a simple built-in call
            body = lines[:index]
            if strip_tabs:
                body = [b.lstrip("\t") for b in body]
            return head, "".join(b + "\n" for b in body)
    return None


def split_argv(head: str) -> list[str]:
    """Shell-style words of a simple command; raises ValueError on unbalanced quotes."""
    return shlex.split(head, posix=True)


def base_command(line: str) -> str:
    """The command a `--help` hint should name.

    `git comit` -> `git`; `mcp:github:create_issue {...}` -> the whole name;
    leading `VAR=value` words and a leading `cd DIR &&` are skipped, since the
    hint is about the command that did the work.
    """
    text = line.strip()
    split = split_top_level(text)
    if first_word(split.head) == "cd" and split.operator in ("&&", ";") and split.rest.strip():
        return base_command(split.rest)
    try:
        words = shlex.split(split.head, posix=True)
    except ValueError:
        words = split.head.split()
    for word in words:
        if not _ASSIGNMENT.match(word):
            return word
    return words[0] if words else ""


def quote(text: str) -> str:
    """`text` as one POSIX shell word: bare when every character is safe
    (`A-Z a-z 0-9 _ @ % + = : , . / -`), else single-quoted, a `'` inside written
    as `'\\''`; the empty string is `''`. For building shell text (paths, example
    arguments); Codex's summaries use `summaries.shell_words.shlex_quote` instead."""
    if _SAFE_WORD.fullmatch(text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"
