"""The linear, quote-aware scanner that read every line before the parser did. It
now reads only the lines the parser does not vouch for (`Parsed.problem`): the router
keeps planning them as before, and every judge of them is conservative."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tree_sitter import Tree

from synapse_lsp.bashparse.model import Command, Parsed, Substitution

# The scanner opens groups and substitutions this deep (linear: each level re-reads
# its text once).
_SCAN_DEPTH = 8

_OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "\n")
_SPECIAL = re.compile(r"[\\'\"`(){}&|;\n]")
_DQ_SPECIAL = re.compile(r'[\\"]')
_SUBST_SPECIAL = re.compile(r"[\\'\"`]|[$<>]\(")
_QUOTED_OR_ESCAPED = re.compile(r"'[^']*'?|\"(?:[^\"\\]|\\.)*\"?|\\.", re.DOTALL)
_BLANK = re.compile(r"[ \t\n]")
_RESERVED = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "time"})


def scan_operators(line: str) -> Iterator[tuple[int, str]]:
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


def _group_end(text: str, start: int) -> int:
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


def scan_substitutions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the scripts of the command substitutions in `text` (the
    inside of `$(…)`, backticks, `<(…)`/`>(…)`), also inside double quotes, not inside
    single quotes; not nested ones."""
    out: list[tuple[int, int, str]] = []
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
            out.append((i + 1, n if end < 0 else end, "`"))
            i = n if end < 0 else end + 1
        elif in_double and token != "$(":
            i += 2
        else:
            end = _group_end(text, i + 1)
            out.append((i + 2, end, token))
            i = end + 1


def scan_redirection(text: str) -> bool:
    """An unquoted `<` or `>` in `text` (outside quotes and escapes)."""
    return any(ch in text for ch in "<>") and bool(
        re.search(r"[<>]", _QUOTED_OR_ESCAPED.sub("", text))
    )


def _scan_commands(line: str) -> list[tuple[int, int]]:
    """(start, end) of every simple command the scanner sees: the top-level segments,
    the insides of groups and substitutions (up to `_SCAN_DEPTH` deep) and a group's
    own redirections; leading reserved words dropped."""
    out: list[tuple[int, int]] = []
    pending = [(0, len(line), 0)]
    while pending:
        base, stop, depth = pending.pop()
        text = line[base:stop]
        start = 0
        cuts = [(i, len(op)) for i, op in scan_operators(text)] + [(len(text), 0)]
        for index, width in cuts:
            lo, hi = start, index
            start = index + width
            while lo < hi and text[lo] in " \t\n":
                lo += 1
            while hi > lo and text[hi - 1] in " \t\n":
                hi -= 1
            while lo < hi:
                blank = _BLANK.search(text, lo, hi)
                space = blank.start() if blank is not None else hi
                if text[lo:space] not in _RESERVED:
                    break
                lo = space
                while lo < hi and text[lo] in " \t\n":
                    lo += 1
            if lo >= hi:
                continue
            own = lo  # where the command's own text starts (after a group)
            if text[lo] in "({" and hi - lo > 1:
                end = lo + _group_end(text[lo:hi], 0)
                if depth < _SCAN_DEPTH:
                    pending.append((base + lo + 1, base + min(end, hi), depth + 1))
                own = end + 1
                while own < hi and text[own] in " \t\n":
                    own += 1
            if depth < _SCAN_DEPTH and own < hi:
                for s, e, _ in scan_substitutions(text[own:hi]):
                    pending.append((base + own + s, base + own + e, depth + 1))
            if own < hi:
                out.append((base + own, base + hi))
    return sorted(out)


def scanned(line: str, problem: str, tree: Tree | None = None, data: bytes = b"") -> Parsed:
    """The scanner's reading of a line the parser does not vouch for."""
    commands = tuple(Command(s, e, line[s:e], (), (), False) for s, e in _scan_commands(line))
    substitutions = tuple(
        Substitution(s - (1 if kind == "`" else 2), e + 1, kind, line[s:e])
        for s, e, kind in scan_substitutions(line)
    )
    return Parsed(
        line,
        tuple(scan_operators(line)),
        commands,
        substitutions,
        problem,
        tree,
        data,
        scan_redirection(line),
    )
