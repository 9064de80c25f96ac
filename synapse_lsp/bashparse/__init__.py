"""One parse of a Bash command line, shared by the permission gate, the router's plan
and the summaries: tree-sitter-bash, read the way bash reads it.

`parse(line)` parses a line once (an LRU cache keyed by the line: the gate, the plan
and the titles of one line share it) and returns a `Parsed`:

- `operators`: the top-level list and pipeline operators with their index (`&&`, `||`,
  `|`, `|&`, `;`, `&`, and "\\n" between two statements), never inside quotes,
  comments, here-document bodies, groups, compound commands or substitutions;
- `commands`: every simple command bash may run, in source order: top-level ones and
  those in `( … )`/`{ …; }` groups, `if`/`while`/`for`/`case` bodies, functions and
  command or process substitutions (also inside double quotes and unquoted
  here-document bodies). Each has its words (the value after quote removal, and
  whether bash expands something in it: `'$(x).txt'` is a literal file name,
  `"$HOME"/x` is not) and its redirections (operator, fd, target word, here-document).
  A redirection of a group or compound command (`( … ) > f`) is a command of its own
  with no words;
- `substitutions`: the outermost `$( … )`, backticks, `<( … )` and `>( … )`, with
  their scripts;
- `problem`: why the parse is not to be trusted, else None. Then `operators`,
  `commands` (their texts only: no words, no redirections) and `substitutions` come
  from the linear quote-aware scanner below (today's router plan, unchanged), and
  every judge is conservative: the gate asks, the explore rule refuses, a title
  counts a write.

A problem is: an ERROR or MISSING node (bash would fail, or tree-sitter-bash cannot
read a construct such as `<>`); a backtick inside an unquoted here-document body
(bash runs it, tree-sitter-bash does not parse it); a line over `MAX_PARSED_CHARS`;
or a parse that ran out of its time budget.

**Linear time.** tree-sitter-bash is linear on well-formed lines, but its error
recovery is quadratic on some malformed ones (a long pipeline followed by a stray
`)`: 80,000 characters took 16 s and 3 GB). Each parse therefore runs with a budget
of `BUDGET_BASE` + `BUDGET_PER_CHAR` per character (checked by tree-sitter's progress
callback every ~100 parser operations, which also lets other threads run), and lines
over `MAX_PARSED_CHARS` are not given to tree-sitter at all; either way the linear
scanner reads the line and the judgment is conservative. The walk over the tree is
iterative (no recursion, whatever the nesting) and visits each node once.
`benchmarks/bench_parse.py` prints the figures.

**tree-sitter-bash's misreadings repaired here** (found by reading its trees):
`[ a > b ]` is a comparison to it but a redirection into `b` to bash; `0<in` and
`{fd}>f` lose their fd (it becomes an argument); words after a redirection's target
(`> f x`) are put into the redirection, they are arguments; `a && b > f` hangs the
redirection on the list, it is `b`'s; a here-document swallows what follows its
start on the line (`cat <<EOF > f && x`): those are still `cat`'s redirections and
the next commands; `time` is read as a command name, it is a keyword.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

from synapse_lsp.bashparse.model import (
    Command,
    Parsed,
    Redirect,
    Substitution,
    Word,
    ansi_c,
)
from synapse_lsp.bashparse.scan import scanned
from synapse_lsp.bashparse.walk import UntrustedError, Walker

__all__ = [
    "BUDGET_BASE",
    "BUDGET_PER_CHAR",
    "MAX_PARSED_CHARS",
    "MAX_PIPES",
    "Command",
    "Parsed",
    "Redirect",
    "Substitution",
    "Word",
    "ansi_c",
    "bash_language",
    "bash_parser",
    "clear_cache",
    "parse",
]

# Lines longer than this are never given to tree-sitter (its memory grows to a few
# hundred bytes per character on long pipelines); the scanner reads them.
MAX_PARSED_CHARS = 1 << 20
# The time a parse may take: a valid line parses in ~1-2 µs a character.
BUDGET_BASE = 0.25
BUDGET_PER_CHAR = 4e-6
# tree-sitter-bash's error recovery among many pipes is quadratic in one stretch that
# the budget cannot interrupt (10,000 stages and a stray `)`: 2 s; 1,200 pipes with
# `&` between: 0.7 s): a line with more `|` operators than this is read by the scanner.
MAX_PIPES = 500

# ---------------------------------------------------------------- the parser

_LANGUAGE: Language | None = None
_LOCAL = threading.local()


def bash_language() -> Language:
    global _LANGUAGE
    if _LANGUAGE is None:
        _LANGUAGE = Language(tree_sitter_bash.language())
    return _LANGUAGE


def bash_parser() -> Parser:
    """One parser per thread (a tree-sitter Parser is not thread-safe), made once."""
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = Parser(bash_language())
        _LOCAL.parser = parser
    return parser


def _tree(data: bytes) -> Tree | None:
    """tree-sitter's tree of `data`, or None when the time budget ran out."""
    parser = bash_parser()
    deadline = time.monotonic() + BUDGET_BASE + BUDGET_PER_CHAR * len(data)
    view = memoryview(data)

    def read(offset: int, _point: tuple[int, int]) -> memoryview:
        return view[offset:]

    def progress(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline  # True cancels the parse

    try:
        return parser.parse(read, progress_callback=progress)  # type: ignore[arg-type]
    except ValueError:  # cancelled ("Parsing failed")
        parser.reset()  # else the next parse would resume this one
        return None


# ------------------------------------------------------------------ the cache


class _Cache:
    """The most recent parses, by line: at most `entries` of them and `chars` characters."""

    def __init__(self, entries: int = 256, chars: int = 8 << 20) -> None:
        self._items: OrderedDict[str, Parsed] = OrderedDict()
        self._entries = entries
        self._chars = chars
        self._size = 0
        self._lock = threading.Lock()

    def get(self, line: str) -> Parsed | None:
        with self._lock:
            found = self._items.get(line)
            if found is not None:
                self._items.move_to_end(line)
            return found

    def put(self, line: str, parsed: Parsed) -> None:
        if len(line) > self._chars:
            return
        with self._lock:
            if line in self._items:
                return
            self._items[line] = parsed
            self._size += len(line)
            while len(self._items) > self._entries or self._size > self._chars:
                old, _ = self._items.popitem(last=False)
                self._size -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0


_CACHE = _Cache(entries=64, chars=2 << 20)


def parse(line: str) -> Parsed:
    """The one parse of `line` (cached; see the module docstring). Never raises."""
    found = _CACHE.get(line)
    if found is None:
        found = _parse(line)
        _CACHE.put(line, found)
    return found


def _parse(line: str) -> Parsed:
    if len(line) > MAX_PARSED_CHARS:
        return scanned(
            line,
            f"the line is over {MAX_PARSED_CHARS:,} characters, too long to parse "
            "(read by the scanner)",
        )
    data = line.encode("utf-8", "surrogatepass")
    if data.count(b"|") > MAX_PIPES and _operator_pipes(data) > MAX_PIPES:
        return scanned(
            line,
            f"the line has more than {MAX_PIPES:,} `|` operators, too many to parse "
            "(read by the scanner)",
        )
    tree = _tree(data)
    if tree is None:
        return scanned(line, "the line took too long to parse (read by the scanner)")
    root = tree.root_node
    if root.has_error:
        return scanned(line, _error_problem(root, data), tree, data)
    try:
        with _collector_paused(len(line) > 65536):
            return Walker(line, data).run(tree)
    except UntrustedError as exc:
        return scanned(line, str(exc), tree, data)
    except (UnicodeDecodeError, ValueError, IndexError) as exc:  # a byte split by tree-sitter
        return scanned(line, f"the parse could not be walked ({exc})", tree, data)


_COLLECTOR = threading.Lock()
_walking = 0  # walks that paused the cyclic garbage collector
_collector_was_on = False


@contextlib.contextmanager
def _collector_paused(pause: bool) -> Iterator[None]:
    """The walk of a long line makes a few objects per word and frees none: with the
    cyclic garbage collector on, its repeated full passes cost it ~40% more."""
    global _walking, _collector_was_on
    if not pause:
        yield
        return
    with _COLLECTOR:
        if _walking == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _walking += 1
    try:
        yield
    finally:
        with _COLLECTOR:
            _walking -= 1
            if _walking == 0 and _collector_was_on:
                gc.enable()


_TEXT_QUERY: Query | None = None


def _operator_pipes(data: bytes) -> int:
    """How many of the line's `|` may be operators (upper bound): those outside the
    text of quotes, comments and here-document bodies, found in a parse of the line
    with every `|` made a `&` (the same structure, no pipeline to recover from; an
    error in it, or the budget running out, counts every `|`)."""
    global _TEXT_QUERY
    tree = _tree(data.replace(b"|", b"&"))
    if tree is None or tree.root_node.has_error:
        return data.count(b"|")
    if _TEXT_QUERY is None:
        _TEXT_QUERY = Query(
            bash_language(),
            "[(heredoc_body) (heredoc_content) (string_content) (raw_string) (comment)"
            " (ansi_c_string)] @text",
        )
    hidden: list[tuple[int, int]] = []
    for node in QueryCursor(_TEXT_QUERY).captures(tree.root_node).get("text", []):
        start = node.start_byte
        if node.type == "heredoc_body":  # its text is what is between its expansions
            for child in node.children:
                if child.type != "heredoc_content":
                    hidden.append((start, child.start_byte))
                    start = child.end_byte
        hidden.append((start, node.end_byte))
    pipes, reached = data.count(b"|"), 0
    for start, end in sorted(hidden):
        start = max(start, reached)
        if end > start:
            pipes -= data.count(b"|", start, end)
            reached = end
    return pipes


def _error_problem(root: Node, data: bytes) -> str:
    """Where tree-sitter-bash could not read the line: its first ERROR or MISSING node."""
    node = root
    while not (node.is_error or node.is_missing):
        inner = next((c for c in node.children if c.has_error), None)
        if inner is None:
            break
        node = inner
    at = len(data[: node.start_byte].decode("utf-8", "replace"))
    snippet = data[node.start_byte : node.start_byte + 30].decode("utf-8", "replace")
    what = f"a missing `{node.type}`" if node.is_missing else f"`{snippet.strip()}`"
    return f"bash syntax that could not be read at character {at}: {what}"


def clear_cache() -> None:
    """Forget every cached parse (tests and benchmarks)."""
    _CACHE.clear()
