"""What the parse of a line yields (`bashparse.Parsed` and its parts), and bash's
`$'…'` quoting."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Node, Tree

# ------------------------------------------------------------------ results


class Word(NamedTuple):
    """One shell word: its place and source text, its value after quote removal
    (`$VAR`, `$(…)` and globs stay as written), and whether bash takes it literally
    (no expansion, substitution, brace expansion or leading `~` in it)."""

    start: int
    end: int
    text: str
    value: str
    literal: bool


# Output redirections that write their target file; `>&` writes one unless the target
# is an fd (`2>&1`, `>&-`).
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_FD = re.compile(r"\d+|-")


class Redirect(NamedTuple):
    """A redirection: `fd` as written ("" when none; `{name}` for a named one), the
    operator (`>`, `>>`, `>|`, `&>`, `&>>`, `<`, `>&`, `<&`, `>&-`, `<&-`, `<<<`, `<<`,
    `<<-`), its target word (None for `>&-`/`<&-`; the delimiter for a here-document),
    and for a here-document its body (`heredoc`) and whether the delimiter is quoted."""

    start: int
    end: int
    fd: str
    op: str
    target: Word | None
    heredoc: str | None = None
    quoted: bool = False

    @property
    def writes(self) -> bool:
        """Whether it writes a file (its target): `>`, `>>`, `>|`, `&>`, `&>>`, and
        `>&`/`N>&` with a target that is not an fd number or `-`."""
        if self.op in _WRITES:
            return True
        return self.op == ">&" and self.target is not None and not _FD.fullmatch(self.target.value)

    def writes_beyond(self, harmless: frozenset[str]) -> bool:
        """It writes a file that is not one of `harmless` named literally (`/dev/null`)."""
        target = self.target
        return self.writes and (
            target is None or not target.literal or target.value not in harmless
        )


class Command(NamedTuple):
    """One simple command: its source span and text (here-document bodies that follow
    it directly included), its words (leading `VAR=value` assignments first) and its
    redirections; `top` when it is a statement of the line itself (not in a group, a
    compound command or a substitution)."""

    start: int
    end: int
    text: str
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    top: bool

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.words]


class Substitution(NamedTuple):
    """A command or process substitution: its span, kind (`$(`, `` ` ``, `<(`, `>(`)
    and the script inside."""

    start: int
    end: int
    kind: str
    script: str


@dataclass(frozen=True, eq=False)
class Parsed:
    text: str
    operators: tuple[tuple[int, str], ...]
    commands: tuple[Command, ...]
    substitutions: tuple[Substitution, ...]
    problem: str | None = None
    # The tree-sitter tree (None when tree-sitter did not finish) and the bytes it was
    # parsed from: the tree was parsed through a callback, so `Node.text` is not
    # available (it crashes); use `node_text`.
    tree: Tree | None = None
    source: bytes = b""
    # The scanner's answer to `has_redirection` when the tree is not trusted.
    _scanned_redirection: bool = False

    def node_text(self, node: Node) -> str:
        raw = self.source[node.start_byte : node.end_byte]
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # tree-sitter split an unpaired surrogate
            return raw.decode("utf-8", "replace")

    @property
    def plain(self) -> bool:
        """The text is one simple command and only that (no group, reserved word or
        `time`), with no substitution and no redirection, read without a problem: what
        an allow glob may vouch for."""
        return (
            self.problem is None
            and len(self.commands) == 1
            and not self.substitutions
            and not self.commands[0].redirects
            and self.commands[0].text == self.text.strip()
        )

    @property
    def redirects_at_top(self) -> bool:
        """A top-level command has a redirection, or a top-level word a process
        substitution (what `cmdline.has_redirection` answers)."""
        if self.problem is not None:
            return self._scanned_redirection
        return any(
            c.redirects or any(not w.literal and ("<(" in w.value or ">(" in w.value)
                               for w in c.words)
            for c in self.commands
            if c.top
        )  # fmt: skip


# ------------------------------------------------------------------ quoting

_ANSI_ESCAPE = re.compile(
    r"\\(?:[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|c.|.)", re.DOTALL
)
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


def ansi_c(body: str) -> str:
    """The text of bash's `$'…'` quoting (`body` is what is between the quotes)."""

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


class Chars:
    """Byte offsets of the UTF-8 text to character offsets of the line."""

    def __init__(self, line: str, data: bytes) -> None:
        self.same = len(line) == len(data)
        self.starts: list[int] = []  # byte offset of each multi-byte character
        self.extra: list[int] = []  # bytes beyond one, up to and including it
        if not self.same:
            extra = 0
            for match in re.finditer(r"[^\x00-\x7f]", line):
                width = len(match.group().encode("utf-8", "surrogatepass"))
                self.starts.append(match.start() + extra)
                extra += width - 1
                self.extra.append(extra)

    def at(self, byte: int) -> int:
        if self.same:
            return byte
        index = bisect.bisect_left(self.starts, byte)
        return byte - (self.extra[index - 1] if index else 0)
