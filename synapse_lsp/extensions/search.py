"""The one search over extension commands (`mcp:*`, `skill:*`).

`search_commands(commands, query, kind=None, limit=None)` is the only matcher and
ranker: `command:search` (alias `tools search`, `CommandSearchCommand` below),
`synapse tools search|list` (`cli/tools.py`) and the LSP command
`synapse.tools.search` (`core.Workspace.search`) all call it and list its matches
in its order.

The rule:

- Matching. An empty query (or none) matches every command. A query whose only
  special characters are `*` and `?` is a glob on the whole name (`mcp:test:*` lists
  the tools of server `test`, not those of `testing`; `*` lists everything).
  `regex=True` (`--regex`) makes the query a regular expression whatever it holds.
  Otherwise a query holding any of `. * + ? [ ] ( ) { } | ^ $ \\` that compiles is a
  regular expression (Python `re`, `search` semantics, case-insensitive, `^`/`$`
  anchor at the start/end of the name or of the description); anything else is
  keywords, each of which must appear (case-insensitively) in the name or the
  description (for a skill's script: also its skill's description, domain and tags
  from SKILL.md, which rank as description).
- Ranking, best first: 0 the name equals the query; 1 the name starts with the query
  text; 2 the query matches the name (a regex matches it, or the one keyword / every
  keyword is in it); 3 it matches only through the description. Ties are broken by
  name (code-point order). Case is ignored throughout.

This module imports no other module of `extensions/`: the registry hands it the
commands (or its cached `SearchIndex`), so the dependency runs one way.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput

DEFAULT_LIMIT = 50
KINDS = ("mcp", "skill")
_REGEX_CHARS = set(".*+?[](){}|^$\\")
_GLOB_CHARS = set("*?")

# Ranks (lower is better); see the module docstring.
RANK_EXACT = 0
RANK_PREFIX = 1
RANK_NAME = 2
RANK_DESCRIPTION = 3


class Searchable(Protocol):
    """What the search needs of a command: any `commands.Command` is one."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def usage(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Match:
    """One command found: `type` is "mcp" or "skill"; `rank` as in the module docstring."""

    name: str
    type: str
    summary: str
    usage: str
    rank: int

    def as_dict(self) -> dict[str, str]:
        """The LSP `synapse.tools.search` shape (docs/protocol.md)."""
        return {"name": self.name, "type": self.type, "summary": self.summary, "usage": self.usage}

    def line(self) -> str:
        """How every text listing shows a match: `name  summary`."""
        return f"{self.name}  {self.summary}" if self.summary else self.name


class Matches(list[Match]):
    """`search_commands`' result: the matches (after any limit), best first, and
    `total`, how many matched before the limit."""

    def __init__(self, matches: Iterable[Match], total: int) -> None:
        super().__init__(matches)
        self.total = total


def kind_of(name: str) -> str:
    return "mcp" if name.startswith("mcp:") else "skill"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One searchable command: name, summary, usage and their lowercase forms,
    precomputed so a search over 10,000 commands is a tight loop of `in` /
    `re.search` calls."""

    name: str
    summary: str
    kind: str  # "mcp" | "skill"
    name_lower: str
    haystack: str  # "<name>\n<summary>", lowercase
    usage: str = ""

    @classmethod
    def of(cls, name: str, summary: str, usage: str = "", keywords: str = "") -> IndexEntry:
        """`keywords`: more text matched like the description (a skill script's skill's
        description, domain and tags), never shown."""
        lowered = name.lower()
        text = f"{summary} {keywords}" if keywords else summary
        return cls(name, summary, kind_of(name), lowered, f"{lowered}\n{text.lower()}", usage)

    def match(self, rank: int) -> Match:
        return Match(self.name, self.kind, self.summary, self.usage or self.name, rank)


class SearchIndex:
    """Entries (sorted by name) plus one lowercase text blob per kind, so a query is a
    C-speed scan (`str.find` / `re.search` from a position) instead of a Python loop.
    Build one with `SearchIndex.of(commands)`; the registry keeps one per command set."""

    def __init__(self, entries: list[IndexEntry]) -> None:
        self.entries = entries
        self._blobs: dict[str | None, tuple[list[IndexEntry], str, list[int]]] = {}

    @classmethod
    def of(cls, commands: Iterable[Searchable]) -> SearchIndex:
        entries = [
            IndexEntry.of(c.name, c.summary, c.usage, getattr(c, "keywords", "")) for c in commands
        ]
        entries.sort(key=lambda e: e.name)
        return cls(entries)

    def _blob(self, kind: str | None) -> tuple[list[IndexEntry], str, list[int]]:
        cached = self._blobs.get(kind)
        if cached is None:
            pool = self.entries if kind is None else [e for e in self.entries if e.kind == kind]
            starts: list[int] = []
            parts: list[str] = []
            pos = 0
            for entry in pool:
                starts.append(pos)
                parts.append(entry.haystack)
                pos += len(entry.haystack) + 1
            cached = (pool, "\n".join(parts), starts)
            self._blobs[kind] = cached
        return cached

    def find(
        self, query: str, kind: str | None = None, *, regex: bool = False
    ) -> tuple[list[IndexEntry], tuple[int, int, int]]:
        """Every match, best first (the module's rule), and the positions in that list
        where ranks 1, 2 and 3 start (so no per-match rank object is built)."""
        pool, blob, starts = self._blob(kind)
        glob = None if regex else _glob(query)
        pattern = _forced_regex(query) if regex else None if glob is not None else _regex(query)
        words = query.lower().split()
        if glob is not None:
            hits = named = [e for e in pool if glob.fullmatch(e.name_lower)]
        elif pattern is not None:
            # Rare hits in a big blob: let the regex engine skip ahead in C.
            locate = pattern.search
            hits = self._scan(pool, starts, lambda pos: _start(locate(blob, pos)))
            hits = [e for e in hits if locate(e.haystack)]  # no match across entries
            named = [e for e in hits if locate(e.name_lower)]
        elif not words:
            hits = named = list(pool)
        else:
            first_word = words[0]
            if blob.count(first_word) * 8 < len(pool):  # rare: skip ahead with str.find
                hits = self._scan(pool, starts, lambda pos: blob.find(first_word, pos))
            else:  # common: one pass in a comprehension is cheaper per hit
                hits = [e for e in pool if first_word in e.haystack]
            for word in words[1:]:
                hits = [e for e in hits if word in e.haystack]
            if len(words) == 1:
                named = [e for e in hits if first_word in e.name_lower]
            else:
                named = [e for e in hits if all(w in e.name_lower for w in words)]
        q = query.lower()
        exact = [e for e in named if e.name_lower == q]
        prefix = [e for e in named if e.name_lower.startswith(q) and e.name_lower != q]
        first = {id(e) for e in exact} | {id(e) for e in prefix}
        other_named = [e for e in named if id(e) not in first] if first else named
        in_name = {id(e) for e in named}
        described = [e for e in hits if id(e) not in in_name]
        found = exact + prefix + other_named + described
        a = len(exact)
        b = a + len(prefix)
        return found, (a, b, b + len(other_named))

    @staticmethod
    def _scan(
        pool: list[IndexEntry], starts: list[int], next_hit: Callable[[int], int]
    ) -> list[IndexEntry]:
        hits: list[IndexEntry] = []
        pos = 0
        while True:
            at = next_hit(pos)
            if at < 0:
                return hits
            index = bisect.bisect_right(starts, at) - 1
            hits.append(pool[index])
            if index + 1 >= len(starts):
                return hits
            pos = starts[index + 1]


def search_commands(
    commands: SearchIndex | Iterable[Searchable],
    query: str,
    kind: str | None = None,
    limit: int | None = None,
    *,
    regex: bool = False,
) -> Matches:
    """The one search: matches of `query` among `commands`, best first (module docstring).

    `commands` is any iterable of commands (name, summary, usage), or a `SearchIndex`
    built from them (the registry keeps one: `registry.search_index()`), which saves
    rebuilding it per query. `kind` keeps only "mcp" or only "skill" commands;
    `limit` keeps the first N (`.total` of the result counts them all); `regex` forces
    the query to be a regular expression (ValueError when it does not compile)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} or None, not {kind!r}")
    index = commands if isinstance(commands, SearchIndex) else SearchIndex.of(commands)
    found, rank_starts = index.find(query, kind, regex=regex)
    shown = found if limit is None else found[: max(0, limit)]
    matches = [e.match(bisect.bisect_right(rank_starts, i)) for i, e in enumerate(shown)]
    return Matches(matches, len(found))


def _start(match: re.Match[str] | None) -> int:
    return -1 if match is None else match.start()


def _glob(query: str) -> re.Pattern[str] | None:
    """A query whose only special characters are `*`/`?`: a whole-name glob."""
    special = set(query) & _REGEX_CHARS
    if not special or not special <= _GLOB_CHARS:
        return None
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in query.lower())
    return re.compile(body, re.DOTALL)


def _forced_regex(query: str) -> re.Pattern[str]:
    """`--regex`: the query is a regular expression (ValueError when it does not compile)."""
    flags = re.MULTILINE | (re.IGNORECASE if query != query.lower() else 0)
    try:
        return re.compile(query, flags)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {query!r} ({exc})") from None


def _regex(query: str) -> re.Pattern[str] | None:
    """The rule: a query with a regex metacharacter that compiles is a regex.

    Entries are stored lowercase, so an all-lowercase pattern needs no IGNORECASE
    (which would switch off the engine's literal-prefix search)."""
    if set(query) & _REGEX_CHARS:
        flags = re.MULTILINE | (re.IGNORECASE if query != query.lower() else 0)
        try:
            return re.compile(query, flags)
        except re.error:
            return None
    return None


def query_mode(query: str, regex: bool = False) -> tuple[str, re.Pattern[str] | None]:
    """How the module's rule reads `query`: ("all", None), ("glob", whole-name pattern),
    ("regex", pattern) or ("keywords", None). ValueError for a bad forced regex."""
    if regex:
        return "regex", _forced_regex(query)
    if not query.strip():
        return "all", None
    glob = _glob(query)
    if glob is not None:
        return "glob", glob
    pattern = _regex(query)
    return ("regex", pattern) if pattern is not None else ("keywords", None)


def compile_query(query: str) -> Callable[[str], bool]:
    """A predicate over lowercase text by the module's matching rule (no ranking; a glob
    is matched against the text's first line, the name)."""
    glob = _glob(query)
    if glob is not None:
        return lambda text: glob.fullmatch(text.split("\n", 1)[0]) is not None
    pattern = _regex(query)
    if pattern is not None:
        return lambda text: pattern.search(text) is not None
    words = query.lower().split()
    return lambda text: all(w in text for w in words)


def no_match_line(query: str, kind: str | None, known: int | None = None) -> str:
    what = f"{kind} commands" if kind else "extension commands"
    counted = f" ({known} commands known)" if known is not None else ""
    return f"No {what} match {query!r}{counted}."


def how_to_add(kind: str | None, home: Path, folder: Path | None = None) -> list[str]:
    """Where the commands of `kind` (None: both) come from, for a search that found
    nothing: the files to write and the docs section that explains them."""
    lines: list[str] = []
    if kind in (None, "mcp"):
        where = f"{home / 'mcp' / 'mcp_servers.json'} (every folder)"
        if folder is not None:
            where += f" or {folder / 'mcp_servers.json'} (this folder)"
        lines.append(
            f"To add an MCP server: describe it in {where}, then run `synapse tools refresh "
            'mcp`; see docs/extensions.md, "Adding an MCP server".'
        )
    if kind in (None, "skill"):
        lines.append(
            f"To add a skill: write {home / 'skills' / '<name>' / 'SKILL.md'} and its "
            'scripts in scripts/ beside it; see docs/extensions.md, "Writing a skill".'
        )
    return lines


def more_line(hidden: int) -> str:
    return f"[{hidden} more; narrow the query or raise --limit]"


class SearchSource(Protocol):
    """What `command:search` reads: the registry's cached index and its notes."""

    def search_index(self) -> SearchIndex: ...

    def notes(self) -> list[str]: ...


@runtime_checkable
class WaitsForServers(Protocol):
    """A source whose MCP servers may still be connecting (the registry)."""

    async def wait_for_pending(self, limit: float) -> None: ...


def search_invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
    """A search built-in's call: what it looks for (its words), no file touched."""
    words = parse_args(list(argv[1:]), options={"type", "limit"}, flags={"regex"}).positional
    return catalog.Invocation(query=" ".join(words) if words else None)


@catalog.builtin
class CommandSearchCommand(catalog.Described):
    name = "command:search"
    traits = catalog.Traits(
        effect=catalog.Effect.READ,
        shape=catalog.Shape.SEARCH,
        read_only_safe=True,
        prompt_rank=5,
        aliases=("tools search",),
    )
    invocation = staticmethod(search_invocation)
    summary = "Find extension commands (mcp:*, skill:*) by keyword or regular expression."
    usage = "command:search [<keyword|glob|regex>] [--type mcp|skill] [--regex] [--limit N]"

    def __init__(self, source: SearchSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: tools search <keyword|glob|regex>
  (none)           no query lists every command (of --type T)
  <keyword>        words that must all appear in a command's name or description
                   (case-insensitive)
  <glob>           a query whose only special characters are * and ? matches whole
                   names: "mcp:github:*" lists server github's tools, "*" everything
  <regex>          a query containing any of . + [ ] ( ) {{ }} | ^ $ \\ (or * ? with
                   them) is a regular expression (case-insensitive, matched anywhere)
  --regex          the query is a regular expression whatever it holds
  --type T         only mcp or only skill commands
  --limit N        at most N results (default {DEFAULT_LIMIT})
  MCP servers still connecting are waited for (up to their connectTimeout) first.
  Order: exact name, name starting with the query, name match, description match;
  by name within each. Then use `<name> -h` for the usage line and `<name> --help`
  for the full page.
Examples:
  command:search pdf
  command:search --type mcp
  command:search "mcp:github:*"
  command:search "mcp:git-.*"
  tools search commit --type mcp"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"type", "limit"}, flags={"regex"})
            kind = args.options.get("type")
            if kind is not None and kind not in KINDS:
                raise ArgError(f"--type must be mcp or skill, not {kind!r}")
            limit = non_negative_int("limit", args.options.get("limit"), DEFAULT_LIMIT)
            if len(args.positional) > 1:
                raise ArgError(
                    f"one query expected, got {len(args.positional)} words; quote it: "
                    f'command:search "{" ".join(args.positional)}"'
                )
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        query = args.positional[0] if args.positional else ""
        if isinstance(self.source, WaitsForServers):
            await self.source.wait_for_pending(ctx.settings.command_timeout)
        index = self.source.search_index()
        try:
            shown = search_commands(index, query, kind, limit, regex="regex" in args.flags)
        except ValueError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        lines = [m.line() for m in shown]
        if not shown.total:
            lines.append(no_match_line(query, kind, len(index.entries)))
        elif shown.total > len(shown):
            lines.append(more_line(shown.total - len(shown)))
        lines += self.source.notes()
        data = {"matches": [m.name for m in shown], "total": shown.total}
        return CommandOutput("\n".join(lines) + "\n", data=data)
