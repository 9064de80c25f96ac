"""Reading one Bash command line, for routing decisions.

The structure of a line — its top-level operators, its simple commands, its
redirections and substitutions — comes from the one parse of the line
(`bashparse.parse`, tree-sitter-bash; the functions here are thin adapters over it).
What stays here is lexical: a simple command's words with bash's quoting
(`split_argv`, `first_word`), quoting text for the shell (`quote`), showing it to a
person (`visible`), and a built-in's heredoc. Nothing here changes the text that
the native shell will receive.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp import bashparse
from synapse_lsp.bashparse import ansi_c as _ansi_c

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2[ \t]*\n", re.DOTALL)
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
_WORD_PIECES = r"""
    (?P<ws>[ \t\n]+)
  | (?P<ansi>\$'(?:[^'\\]|\\.)*'?)
  | (?P<sq>'[^']*'?)
  | (?P<dq>\$?"(?:[^"\\]|\\.)*"?)
  | (?P<esc>\\.?)
"""
_WORD = re.compile(_WORD_PIECES + r"""| (?P<plain>[^ \t\n'"\\$]+|\$)""", re.VERBOSE | re.DOTALL)
_WORD_PUNCT = re.compile(
    _WORD_PIECES + r"""| (?P<punct>[;&|<>()]) | (?P<plain>[^ \t\n'"\\$;&|<>()]+|\$)""",
    re.VERBOSE | re.DOTALL,
)
_PUNCT_RUN = re.compile(r"[;&|<>()]+")
# Characters no POSIX shell treats specially inside a word (ASCII only; no `~`, `*`, `$`…).
_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


@dataclass(frozen=True)
class Split:
    """A line cut at its first top-level operator: `head op rest`."""

    head: str
    operator: str | None
    rest: str


def program_name(word: str) -> str:
    """`Path(word).name` (`/bin/rm` -> `rm`), without building a path for a plain word:
    the gate asks it several times of every command it checks."""
    return word if "/" not in word and word != "." else Path(word).name


def first_word(line: str) -> str:
    """The first shell word of `line`, unquoted, or "" (never raises).

    A word ends at unquoted blank or at one of `; & | < > ( )`; a line that starts
    with those characters has them as its first word (`(cd x)` -> `(`). Linear in
    the length of that word.
    """
    text = line.lstrip()
    punct = _PUNCT_RUN.match(text)
    if punct is not None:
        return punct.group()
    try:
        words = _words(text, stop_at_punct=True, limit=1)
    except ValueError:
        return text.split(maxsplit=1)[0] if text.split() else ""
    return words[0] if words else ""


def split_top_level(line: str) -> Split:
    """Cut `line` at its first top-level operator (`bashparse`: outside quotes,
    comments, heredoc bodies, groups, compound commands and substitutions)."""
    for index, op in top_level_operators(line):
        return Split(line[:index], op, line[index + len(op) :])
    return Split(line, None, "")


def split_all(line: str) -> list[tuple[str, str | None]]:
    """Every top-level item of `line` with the operator after it (None for the last):
    `a && b | c` -> [("a ", "&&"), (" b ", "|"), (" c", None)]. The pieces tile the
    line exactly."""
    out: list[tuple[str, str | None]] = []
    start = 0
    for index, op in top_level_operators(line):
        out.append((line[start:index], op))
        start = index + len(op)
    out.append((line[start:], None))
    return out


def top_level_operators(line: str) -> Iterator[tuple[int, str]]:
    """(index, operator) of each top-level operator of `line`: `&&`, `||`, `|`, `|&`,
    `;`, `&`, and "\\n" between two statements (`bashparse.Parsed.operators`)."""
    return iter(bashparse.parse(line).operators)


def substitutions(text: str) -> list[str]:
    """The scripts of the outermost command substitutions in `text`: `$(…)`, backticks
    and process substitutions `<(…)`/`>(…)`, also inside double quotes (where they
    still run), not inside single quotes or quoted heredocs."""
    return [s.script for s in bashparse.parse(text).substitutions]


def has_redirection(head: str) -> bool:
    """True if a top-level command of `head` has a redirection (`<`, `>`, `2>&1`, a
    heredoc…) or a process substitution; quoted `<`/`>` are text."""
    if "<" not in head and ">" not in head:
        return False
    return bashparse.parse(head).redirects_at_top


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
    """Shell-style words of a simple command; raises ValueError on unbalanced quotes.

    POSIX quoting as bash reads it: `'…'`, `"…"` (a backslash escapes only `$ ` \\ "`
    and newline there), `\\x`, `$'…'` with its C escapes and `$"…"`. `$VAR`, globs and
    `~` stay literal: built-ins get the text the model wrote. Linear in the line's length
    (`shlex` is quadratic on a long word).
    """
    return _words(head, stop_at_punct=False, limit=None)


def split_argv_marked(head: str) -> list[tuple[str, bool]]:
    """`split_argv`'s words, each with whether bash would expand something in it (a
    `$` or backtick outside single quotes, a leading `~`): `'$(x).txt'` is a literal
    file name, `"$HOME"/x` is not. Raises ValueError as `split_argv` does."""
    marks: list[bool] = []
    words = _words(head, stop_at_punct=False, limit=None, marks=marks)
    return list(zip(words, marks, strict=True))


def _words(
    text: str, *, stop_at_punct: bool, limit: int | None, marks: list[bool] | None = None
) -> list[str]:
    words: list[str] = []
    parts: list[str] = []
    started = False
    expands = False
    pattern = _WORD_PUNCT if stop_at_punct else _WORD
    for match in pattern.finditer(text):
        kind, piece = match.lastgroup, match.group()
        if kind == "ws" or kind == "punct":
            if started:
                words.append("".join(parts))
                if marks is not None:
                    marks.append(expands)
                parts, started, expands = [], False, False
                if limit is not None and len(words) >= limit:
                    return words
            if kind == "punct":
                break
            continue
        if marks is not None and kind not in ("sq", "ansi", "esc"):
            expands = (
                expands or "$" in piece or "`" in piece or (not started and piece.startswith("~"))
            )
        started = True
        if kind == "sq":
            if len(piece) < 2 or not piece.endswith("'"):
                raise ValueError("No closing quotation")
            parts.append(piece[1:-1])
        elif kind == "ansi":
            if len(piece) < 3 or not _closed(piece, 2, "'"):
                raise ValueError("No closing quotation")
            parts.append(_ansi_c(piece[2:-1]))
        elif kind == "dq":
            body_start = 2 if piece.startswith("$") else 1
            if len(piece) <= body_start or not _closed(piece, body_start, '"'):
                raise ValueError("No closing quotation")
            parts.append(_DQ_ESCAPE.sub(_dq_unescape, piece[body_start:-1]))
        elif kind == "esc":
            if len(piece) < 2:
                raise ValueError("No escaped character")
            parts.append("" if piece[1] == "\n" else piece[1])
        else:
            parts.append(piece)
    if started:
        words.append("".join(parts))
        if marks is not None:
            marks.append(expands)
    return words


def _closed(piece: str, body_start: int, quote_char: str) -> bool:
    """Whether a matched quoted piece really ends with its closing quote (not an escaped one)."""
    if len(piece) <= body_start or not piece.endswith(quote_char):
        return False
    backslashes = len(piece) - 1 - len(piece[:-1].rstrip("\\"))
    return backslashes % 2 == 0 and len(piece) > body_start


def _dq_unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return "" if char == "\n" else char


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
        words = split_argv(split.head)
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


def simple_commands(line: str) -> list[str]:
    """The text of every simple command `line` runs (`bashparse.Parsed.commands`): its
    top-level commands, those in `( … )`/`{ …; }` groups, compound commands and
    command and process substitutions, and a group's own redirections (`( … ) > f`
    yields `> f`); reserved words are not commands (`if rm x; then …` runs `rm x`).
    The one walk the permission gate, the explore sub-agent's rule and the summaries
    use."""
    return [command.text for command in bashparse.parse(line).commands]


def shell_c_script(words: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` / `sh -lc SCRIPT` when `words` is such a call
    (options up to the one holding `c`), else None. The caller checks the name."""
    for i, word in enumerate(words[1:], start=1):
        if not word.startswith("-") or word.startswith("--"):
            return None
        if "c" in word[1:]:
            return words[i + 1] if i + 1 < len(words) else None
    return None


def visible(text: str, *, newlines: bool = True) -> str:
    """`text` as it may be shown to a person deciding about it: control and format
    characters (ESC sequences, `\\r`, backspace, bidi overrides) escaped (`\\x1b`,
    `\\r`, `\\u202e`), so a terminal or an editor cannot show something else than
    what runs. Newlines stay unless `newlines` is False."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or (newlines and c == "\n") else repr(c)[1:-1] for c in text
    )
