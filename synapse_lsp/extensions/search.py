"""`command:search <keyword|regex> [--type mcp|skill] [--limit N]` (alias `tools search`).

The rule: a query holding any of `. * + ? [ ] ( ) { } | ^ $ \\` that compiles is a
regular expression (Python `re`, case-insensitive, `search` semantics); anything
else is keywords, each of which must appear (case-insensitively) in the name or
the description. Name matches rank before description-only matches.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput

if TYPE_CHECKING:
    from synapse_lsp.extensions.registry import IndexEntry

DEFAULT_LIMIT = 50
_REGEX_CHARS = set(".*+?[](){}|^$\\")


class SearchSource(Protocol):
    def search_index(self) -> SearchIndex: ...

    def notes(self) -> list[str]: ...


class SearchIndex:
    """Entries (sorted by name) plus one lowercase text blob per kind, so a query is a
    C-speed scan (`str.find` / `re.search` from a position) instead of a Python loop."""

    def __init__(self, entries: list[IndexEntry]) -> None:
        self.entries = entries
        self._blobs: dict[str | None, tuple[list[IndexEntry], str, list[int]]] = {}

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
        self, query: str, kind: str | None = None, limit: int | None = None
    ) -> list[IndexEntry]:
        """Matching entries ranked: exact name, name prefix, name match, description match."""
        pool, blob, starts = self._blob(kind)
        pattern = _regex(query)
        words = query.lower().split()
        if pattern is not None:
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
        return found if limit is None else found[:limit]

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


def _start(match: re.Match[str] | None) -> int:
    return -1 if match is None else match.start()


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


def compile_query(query: str) -> Callable[[str], bool]:
    """A predicate over lowercase text by the module's rule (for callers without an index)."""
    pattern = _regex(query)
    if pattern is not None:
        return lambda text: pattern.search(text) is not None
    words = query.lower().split()
    return lambda text: all(w in text for w in words)


def search(
    entries: list[IndexEntry], query: str, kind: str | None = None, limit: int | None = None
) -> list[IndexEntry]:
    """One-off search (builds an index); the registry keeps a cached one."""
    return SearchIndex(sorted(entries, key=lambda e: e.name)).find(query, kind, limit)


class CommandSearchCommand:
    name = "command:search"
    summary = "Find extension commands (mcp:*, skill:*) by keyword or regular expression."
    usage = "command:search <keyword|regex> [--type mcp|skill] [--limit N]"

    def __init__(self, source: SearchSource) -> None:
        self.source = source

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Alias: tools search <keyword|regex>
  <keyword|regex>  words that must all appear in a command's name or description
                   (case-insensitive); a query containing any of . * + ? [ ] ( ) {{ }} | ^ $ \\
                   is a regular expression instead (case-insensitive, matched anywhere).
                   Empty query ("") lists every command.
  --type T         only mcp or only skill commands
  --limit N        at most N results (default {DEFAULT_LIMIT})
  Name matches are listed before description matches. Then use `<name> -h` for the
  usage line and `<name> --help` for the full page.
Examples:
  command:search pdf
  command:search "mcp:git-.*"
  tools search commit --type mcp"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"type", "limit"})
            kind = args.options.get("type")
            if kind is not None and kind not in ("mcp", "skill"):
                raise ArgError(f"--type must be mcp or skill, not {kind!r}")
            limit = non_negative_int("limit", args.options.get("limit"), DEFAULT_LIMIT)
            if len(args.positional) > 1:
                raise ArgError(
                    f"one query expected, got {len(args.positional)} words; quote it: "
                    f'command:search "{" ".join(args.positional)}"'
                )
            if not args.positional:
                raise ArgError('missing <keyword|regex> (use "" to list every command)')
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        query = args.positional[0]
        index = self.source.search_index()
        found = index.find(query, kind, None)
        shown = found[:limit]
        lines = [f"{e.name}  {e.summary}" if e.summary else e.name for e in shown]
        if not found:
            what = f"{kind} commands" if kind else "extension commands"
            lines.append(f"No {what} match {query!r} ({len(index.entries)} commands known).")
        elif len(found) > len(shown):
            lines.append(f"[{len(found) - len(shown)} more; narrow the query or raise --limit]")
        lines += self.source.notes()
        data = {"matches": [e.name for e in shown], "total": len(found)}
        return CommandOutput("\n".join(lines) + "\n", data=data)
