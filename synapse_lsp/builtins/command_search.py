"""`command:search <keyword|regex> [--type mcp|skill] [--limit N]` (alias `tools search`).

The rule: a query holding any of `. * + ? [ ] ( ) { } | ^ $ \\` that compiles is a
regular expression (Python `re`, case-insensitive, `search` semantics); anything
else is keywords, each of which must appear (case-insensitively) in the name or
the description. Name matches rank before description-only matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput
from synapse_lsp.registry import IndexEntry

DEFAULT_LIMIT = 50
_REGEX_CHARS = set(".*+?[](){}|^$\\")


class SearchSource(Protocol):
    def index(self) -> list[IndexEntry]: ...

    def notes(self) -> list[str]: ...


def compile_query(query: str) -> Callable[[str], bool]:
    """A predicate over lowercase text, by the rule in the module docstring."""
    if set(query) & _REGEX_CHARS:
        try:
            pattern = re.compile(query, re.IGNORECASE)
        except re.error:
            pass
        else:
            return lambda text: pattern.search(text) is not None
    words = query.lower().split()
    return lambda text: all(w in text for w in words)


def search(
    entries: list[IndexEntry], query: str, kind: str | None = None, limit: int | None = None
) -> list[IndexEntry]:
    """Matching entries, ranked: exact name, name prefix, name match, description match."""
    matches = compile_query(query)
    q = query.lower()
    ranked: list[tuple[int, IndexEntry]] = []
    for entry in entries:
        if kind is not None and entry.kind != kind:
            continue
        if matches(entry.name_lower):
            rank = 0 if entry.name_lower == q else 1 if entry.name_lower.startswith(q) else 2
        elif matches(entry.summary_lower) or matches(f"{entry.name_lower} {entry.summary_lower}"):
            rank = 3
        else:
            continue
        ranked.append((rank, entry))
    ranked.sort(key=lambda pair: (pair[0], pair[1].name))
    found = [entry for _, entry in ranked]
    return found if limit is None else found[:limit]


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
        entries = self.source.index()
        found = search(entries, query, kind, None)
        shown = found[:limit]
        lines = [f"{e.name}  {e.summary}" if e.summary else e.name for e in shown]
        if not found:
            what = f"{kind} commands" if kind else "extension commands"
            lines.append(f"No {what} match {query!r} ({len(entries)} commands known).")
        elif len(found) > len(shown):
            lines.append(f"[{len(found) - len(shown)} more; narrow the query or raise --limit]")
        lines += self.source.notes()
        data = {"matches": [e.name for e in shown], "total": len(found)}
        return CommandOutput("\n".join(lines) + "\n", data=data)
