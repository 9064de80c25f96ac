"""One-line summaries of Bash tool calls for the UI: an ACP tool kind and a title.

`summarize("rg -n TODO src | head")` -> kind `search`, title "Search `TODO` in src".
The model's command is a bash line, so it is parsed as `bash -lc LINE` (the
tree-sitter path of `parse_command`). Titles never show raw `bash -lc` strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synapse_lsp import catalog, cmdline
from synapse_lsp.summaries.codex import (
    Edit,
    Fetch,
    Format,
    Lint,
    ListFiles,
    Noop,
    ParsedCommand,
    Plan,
    Read,
    Search,
    Task,
    Test,
    Tool,
    Unknown,
)
from synapse_lsp.summaries.command_kinds import parse_command
from synapse_lsp.summaries.writes import writes

# ACP ToolKind values we use (agentclientprotocol.com, schema `ToolKind`).
ACP_KINDS = ("read", "edit", "search", "execute", "fetch", "think", "other")
TITLE_MAX = 80
COMMAND_MAX = 60


@dataclass(frozen=True)
class Summary:
    kind: str
    title: str
    parsed: list[dict[str, Any]] = field(default_factory=list)


def summarize(command: str) -> Summary:
    """The kind and title of a Bash tool call's `command` string.

    A summary never hides a write: when any part of the line may write a file
    (`writes.writes`), the kind is `edit`, and unless every part is one whose title
    names the write (`Write f`, `Edit f`, `Format … with …`) the title is the command
    itself (``Run `sed -i s/a/b/ x.py && cat x.py` ``). `parsed` stays Codex's answer.
    """
    if not command.strip():
        return Summary("other", "Empty command", [])
    summary = honest(summarize_parsed(parse_command(["bash", "-lc", command])), command)
    # A title is shown, not run: control characters as escapes (`\x1b[2K` cannot
    # rewrite what a terminal or an editor shows).
    title = cmdline.visible(summary.title, newlines=False)
    return summary if title == summary.title else Summary(summary.kind, title, summary.parsed)


def honest(summary: Summary, command: str) -> Summary:
    """`summary` corrected so that a line that writes reads as an edit (see `summarize`)."""
    if summary.kind == "edit" and all(p.get("type") in ("edit", "format") for p in summary.parsed):
        return summary
    if not writes(command):
        return summary
    return Summary("edit", f"Run {_code(shorten_command(command))}", summary.parsed)


def summarize_parsed(parsed: list[ParsedCommand]) -> Summary:
    dicts = [p.to_dict() for p in parsed]
    if not parsed:
        return Summary("other", "Empty command", dicts)
    kinds = {kind_of(p) for p in parsed}
    if len(kinds) == 1:
        kind = kinds.pop()
    elif kinds <= {"read", "search"}:
        kind = "search"
    else:
        kind = "execute"
    return Summary(kind, _clip(_title(parsed), TITLE_MAX), dicts)


def kind_of(parsed: ParsedCommand) -> str:
    """The ACP tool kind of one summary."""
    if isinstance(parsed, Read):
        return "read"
    if isinstance(parsed, ListFiles | Search):
        return "search"
    if isinstance(parsed, Edit | Format):
        return "edit"
    if isinstance(parsed, Task | Plan):
        return "think"
    if isinstance(parsed, Fetch):
        return "fetch"
    if isinstance(parsed, Tool):
        found = _builtin(parsed.cmd)
        return "read" if found is not None and found.effect is catalog.Effect.READ else "other"
    if isinstance(parsed, Noop):
        return "other"
    return "execute"  # Unknown, Test, Lint


def _title(parsed: list[ParsedCommand]) -> str:
    parts: list[str] = []
    index = 0
    while index < len(parsed):
        item = parsed[index]
        # Consecutive reads / listings read better merged: "Read a.py, b.py".
        if isinstance(item, Read | ListFiles):
            group: list[ParsedCommand] = [item]
            while index + 1 < len(parsed) and type(parsed[index + 1]) is type(item):
                index += 1
                group.append(parsed[index])
            parts.append(_group_title(group))
        else:
            parts.append(_one_title(item))
        index += 1
    return ", ".join(dict.fromkeys(parts))


def _group_title(group: list[ParsedCommand]) -> str:
    if isinstance(group[0], Read):
        names = [p.name for p in group if isinstance(p, Read)]
        return "Read " + ", ".join(dict.fromkeys(names))
    paths = [p.path for p in group if isinstance(p, ListFiles) and p.path is not None]
    return "List " + ", ".join(dict.fromkeys(paths)) if paths else "List files"


def _one_title(item: ParsedCommand) -> str:
    if isinstance(item, Search):
        if item.query is None:
            return f"Search files in {item.path}" if item.path else "Search files"
        where = f" in {item.path}" if item.path else ""
        return f"Search {_code(item.query)}{where}"
    if isinstance(item, Test):
        return "Run tests"
    if isinstance(item, Lint | Format):
        verb = "Lint" if isinstance(item, Lint) else "Format"
        targets = f" {', '.join(item.targets)}" if item.targets else ""
        return f"{verb}{targets} with {item.tool}"
    if isinstance(item, Edit):
        found = _builtin(item.cmd)
        return f"{found.verb if found is not None and found.verb else 'Edit'} {item.name}"
    if isinstance(item, Tool):
        return _tool_title(item)
    if isinstance(item, Task):
        return f"Task: {item.description or item.task_type}"
    if isinstance(item, Fetch):
        return f"Fetch {item.url}"
    if isinstance(item, Plan):
        return "Update plan"
    if isinstance(item, Read | ListFiles):
        return _group_title([item])
    assert isinstance(item, Unknown | Noop)
    return f"Run {_code(shorten_command(item.cmd))}"


def _builtin(cmd: str) -> catalog.Traits | None:
    """The traits of the built-in a summary's command calls (alias included), if any."""
    found = catalog.lookup(cmd.split(maxsplit=2)[:2])
    return catalog.traits(found) if found is not None else None


def _tool_title(item: Tool) -> str:
    found = _builtin(item.cmd)
    if found is not None and found.verb:  # `Load skill pdf`
        words = catalog.normalized(item.cmd.split())  # `skill load pdf` too
        return f"{found.verb} {_code(words[1])}" if len(words) > 1 else found.verb
    if item.source == "skill":
        return f"skill: {item.name}"
    namespace, _, server = item.source.partition(":")
    return f"{namespace} {server}: {item.name}"


def shorten_command(command: str, limit: int = COMMAND_MAX) -> str:
    """First line, blanks collapsed, cut to `limit` characters with an ellipsis."""
    lines = command.strip().splitlines() or [""]
    text = " ".join(lines[0].split())
    if len(lines) > 1:
        text += " …"
    return _clip(text, limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _code(text: str) -> str:
    """Inline code that survives backticks inside (CommonMark: a longer fence)."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
