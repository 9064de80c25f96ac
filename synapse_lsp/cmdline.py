"""Small, quote-aware scanning of one Bash command line, for routing decisions.

The router only needs a few facts about a line: its first word, whether it is a
single simple command, where the first top-level shell operator is, and a
heredoc body. A full parse is not needed for that, and must not change the text
that the native shell will receive.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Operators that end a simple command at top level.
_OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2[ \t]*\n", re.DOTALL)
# The characters `top_level_operators` stops at; inside double quotes, `\\` and `"`.
_SPECIAL = re.compile(r"[\\'\"`(){}&|;\n]")
_DQ_SPECIAL = re.compile(r'[\\"]')
_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")
# Quoted strings and escapes, removed before looking for unquoted `<`/`>`.
_QUOTED_OR_ESCAPED = re.compile(r"'[^']*'?|\"(?:[^\"\\]|\\.)*\"?|\\.", re.DOTALL)
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
_SUBST_SPECIAL = re.compile(r"[\\'\"`]|[$<>]\(")
_PUNCT_RUN = re.compile(r"[;&|<>()]+")
_ANSI_ESCAPE = re.compile(
    r"\\(?:[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|c.|.)", re.DOTALL
)
# Characters no POSIX shell treats specially inside a word (ASCII only; no `~`, `*`, `$`…).
_SAFE_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


@dataclass(frozen=True)
class Split:
    """A line cut at its first top-level operator: `head op rest`."""

    head: str
    operator: str | None
    rest: str


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
    """Cut `line` at the first operator outside quotes, escapes, `$(…)`, backticks and braces."""
    for index, op in top_level_operators(line):
        return Split(line[:index], op, line[index + len(op) :])
    return Split(line, None, "")


def split_all(line: str) -> list[tuple[str, str | None]]:
    """Every simple command of `line` with the operator after it (None for the last),
    in one linear pass: `a && b | c` -> [("a ", "&&"), (" b ", "|"), (" c", None)]."""
    out: list[tuple[str, str | None]] = []
    start = 0
    for index, op in top_level_operators(line):
        out.append((line[start:index], op))
        start = index + len(op)
    out.append((line[start:], None))
    return out


def top_level_operators(line: str) -> Iterator[tuple[int, str]]:
    """(index, operator) of each operator of `line` at top level: outside quotes,
    escapes, backticks and `( … )`/`{ … }` nesting (which covers `$(…)` and `${…}`).
    `>&`, `<&` and `&>` are redirections, not the `&` operator. Linear: the scan
    jumps from one special character to the next."""
    i, n, depth = 0, len(line), 0
    while True:
        match = _SPECIAL.search(line, i)
        if match is None:
            return
        i = match.start()
        ch = line[i]
        if ch == "\\":
            i += 2
        elif ch == "'":
            end = line.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif ch == '"':
            i = _double_quote_end(line, i + 1)
        elif ch == "`":
            end = line.find("`", i + 1)
            i = n if end < 0 else end + 1
        elif ch in "({":
            depth += 1
            i += 1
        elif ch in ")}":
            depth = max(0, depth - 1)
            i += 1
        elif depth > 0 or (
            ch == "&" and ((i > 0 and line[i - 1] in "<>") or line.startswith("&>", i))
        ):
            i += 1
        else:
            op = next(o for o in _OPERATORS if line.startswith(o, i))
            yield i, op
            i += len(op)


def _double_quote_end(line: str, i: int) -> int:
    """The index just past the `"` closing a double-quoted string that starts at `i`."""
    while True:
        match = _DQ_SPECIAL.search(line, i)
        if match is None:
            return len(line)
        if match.group() == "\\":
            i = match.start() + 2
        else:
            return match.start() + 1


def group_end(text: str, start: int) -> int:
    """The index of the `)`/`}` that closes the `(`/`{` at `start` (quotes and escapes
    skipped, nesting counted), or len(text) when it is never closed."""
    i, n, depth = start, len(text), 0
    while True:
        match = _SPECIAL.search(text, i)
        if match is None:
            return n
        i = match.start()
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif ch == '"':
            i = _double_quote_end(text, i + 1)
        elif ch == "`":
            end = text.find("`", i + 1)
            i = n if end < 0 else end + 1
        else:
            if ch in "({":
                depth += 1
            elif ch in ")}":
                depth -= 1
                if depth == 0:
                    return i
            i += 1


def substitutions(text: str) -> list[str]:
    """The scripts of the command substitutions in `text`: `$(…)`, backticks and
    process substitutions `<(…)`/`>(…)`, also inside double quotes (where they still
    run), not inside single quotes. Not recursive: a caller scans each result again."""
    out: list[str] = []
    i, n, in_double = 0, len(text), False
    while True:
        match = _SUBST_SPECIAL.search(text, i)
        if match is None:
            return out
        i = match.start()
        token = match.group()
        if token == "\\":
            i += 2
        elif token == "'":
            if in_double:
                i += 1
            else:
                end = text.find("'", i + 1)
                i = n if end < 0 else end + 1
        elif token == '"':
            in_double = not in_double
            i += 1
        elif token == "`":
            end = text.find("`", i + 1)
            out.append(text[i + 1 : n if end < 0 else end])
            i = n if end < 0 else end + 1
        elif in_double and token != "$(":
            i += 2
        else:
            end = group_end(text, i + 1)
            out.append(text[i + 2 : end])
            i = end + 1


def has_redirection(head: str) -> bool:
    """True if a simple command has an unquoted `<` or `>` (outside quotes)."""
    return any(ch in head for ch in "<>") and bool(
        re.search(r"[<>]", _QUOTED_OR_ESCAPED.sub("", head))
    )


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


def first_word_marked(text: str) -> tuple[str, bool]:
    """The first shell word of `text` (ending at a blank or an operator) and whether bash
    would expand something in it (`split_argv_marked`); ("", False) when none."""
    marks: list[bool] = []
    try:
        words = _words(text.lstrip(), stop_at_punct=True, limit=1, marks=marks)
    except ValueError:
        return "", False
    return (words[0], marks[0]) if words else ("", False)


def mask_quotes(text: str) -> str:
    """`text` with what is inside quotes (and escaped characters) replaced by `_`, the
    same length: a scan for operators or redirections then sees only bash's own
    (`echo 'a > /etc/x'` has no redirection). Unbalanced quotes mask to the end."""
    out = list(text)
    for match in _WORD.finditer(text):
        if match.lastgroup in ("sq", "dq", "ansi", "esc"):
            for index in range(match.start(), match.end()):
                if out[index] != "\n":
                    out[index] = "_"
    return "".join(out)


def _closed(piece: str, body_start: int, quote_char: str) -> bool:
    """Whether a matched quoted piece really ends with its closing quote (not an escaped one)."""
    if len(piece) <= body_start or not piece.endswith(quote_char):
        return False
    backslashes = len(piece) - 1 - len(piece[:-1].rstrip("\\"))
    return backslashes % 2 == 0 and len(piece) > body_start


def _dq_unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return "" if char == "\n" else char


_ANSI_SIMPLE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_c(body: str) -> str:
    """The text of bash's `$'…'` quoting."""

    def replace(match: re.Match[str]) -> str:
        esc = match.group()[1:]
        head = esc[0]
        if head in _ANSI_SIMPLE:
            return _ANSI_SIMPLE[head]
        if head in "01234567":
            return chr(int(esc, 8) & 0xFF)
        if head in "xuU" and len(esc) > 1:
            try:
                return chr(int(esc[1:], 16))
            except ValueError:
                return match.group()
        if head == "c" and len(esc) == 2:
            return chr(ord(esc[1].upper()) ^ 0x40)
        return match.group()

    return _ANSI_ESCAPE.sub(replace, body)


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


# Reserved words that may lead a simple command: `if rm x; then …` runs `rm x`.
_RESERVED = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "time"})


def simple_commands(line: str) -> list[str]:
    """Every simple command `line` runs: its top-level segments, the insides of
    `( … )` and `{ …; }` groups and of command and process substitutions, and
    a group's own redirections (`( … ) > f` yields `> f`). Leading reserved words are
    dropped (`then rm x` -> `rm x`). Linear in the line's length. The one walk the
    permission gate, the explore sub-agent's rule and the summaries' write check use."""
    out: list[str] = []
    pending = [line]
    while pending:
        for raw, _ in split_all(pending.pop()):
            part = raw.strip()
            words = part.split(maxsplit=1)
            while words and words[0] in _RESERVED:
                part = words[1] if len(words) > 1 else ""
                words = part.split(maxsplit=1)
            if not part:
                continue
            pending.extend(substitutions(part))
            if part[0] in "({" and part not in ("(", "{"):
                end = group_end(part, 0)
                pending.append(part[1:end])
                after = part[end + 1 :].strip()
                if after:
                    out.append(after)
                continue
            out.append(part)
    return out


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
