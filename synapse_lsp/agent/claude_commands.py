"""Claude Code's custom slash commands (`.claude/commands/**/*.md`): `/name args` is
sent as the user's prompt, the file's body with `$ARGUMENTS` (all the arguments) and
`$1`, `$2`… (shell-like words) filled in.

Front matter: `description` (else the body's first line) and `argument-hint` are shown
in `/help` and the ACP command list; `allowed-tools` is shown, not granted: Synapse's
permission gate and sandbox judge the turn's commands as for any prompt (a folder file
must not widen what runs unasked; an "Always allow" rule does that). A subfolder is a
namespace: `frontend/test.md` is `/frontend:test`. A name that is a built-in slash
command (or one of its aliases) is not offered: the built-in wins (`shadowed`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from synapse_lsp.agent.claude_files import read_text, replaced, split_list
from synapse_lsp.frontmatter import parse_front_matter

LINE = re.compile(r"/(\S+)(?:\s+(.*))?", re.DOTALL)  # `/name args…`
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|\d+)")
_NAME = re.compile(r"[\w.-]+(:[\w.-]+)*")
MAX_FILES = 500  # per folder: a huge tree is not read whole


@dataclass(frozen=True)
class CustomCommand:
    name: str  # `frontend:test`
    body: str
    path: Path
    scope: str  # "user", "project" or "synapse" (its own: /init)
    description: str = ""
    argument_hint: str = ""
    allowed_tools: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.argument_hint}".strip()

    def expand(self, args: str) -> str:
        """The prompt for `/name args`. A body without `$ARGUMENTS` or `$N` gets the
        arguments appended (`ARGUMENTS: …`), as Claude Code does."""
        args = args.strip()
        if not _PLACEHOLDER.search(self.body):
            return f"{self.body}\n\nARGUMENTS: {args}" if args else self.body
        words = positional(args)

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "ARGUMENTS":
                return args
            index = int(key)
            return words[index - 1] if 1 <= index <= len(words) else ""

        return _PLACEHOLDER.sub(fill, self.body)


def positional(args: str) -> list[str]:
    """Shell-like words (`"two words"` is one); unbalanced quotes: split on spaces."""
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


@dataclass
class CommandSet:
    """The commands offered, those a built-in shadows, and what was not read."""

    commands: dict[str, CustomCommand] = field(default_factory=dict)  # by lower-case name
    shadowed: list[CustomCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    withheld: tuple[Path, str] | None = None  # the folder's own commands folder, unused: why

    def get(self, name: str) -> CustomCommand | None:
        return self.commands.get(name.removeprefix("/").lower())

    def listing(self) -> str:
        """The lines `/help` adds ("" when there is nothing to say)."""
        lines: list[str] = []
        offered = sorted(self.commands.values(), key=lambda c: c.name)
        if offered:
            width = max(len(c.usage) for c in offered)
            lines.append("Custom commands (.claude/commands; sent to the model as your prompt):")
            for c in offered:
                text = c.description or "(no description)"
                lines.append(f"  {c.usage:<{width}}  {text} ({c.scope})")
        lines += [
            f"  not offered: {c.path} (/{c.name} is built in and wins)" for c in self.shadowed
        ]
        if self.withheld is not None:
            lines.append(f"  not loaded ({self.withheld[1]}): {self.withheld[0]}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def load(places: list[tuple[str, Path]], builtin: Callable[[str], object | None]) -> CommandSet:
    """Every `*.md` under each (scope, folder), later folders winning a name (one
    `problems` line per file a later one replaces); names a built-in takes go to
    `shadowed`."""
    found: dict[str, CustomCommand] = {}
    out = CommandSet()
    for scope, folder in places:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.md"))[:MAX_FILES]:
            command = _read(path, folder, scope, out.problems)
            if command is not None:
                out.problems += replaced(found.get(command.name.lower()), command.path)
                found[command.name.lower()] = command
    for key, command in sorted(found.items()):
        if builtin(key) is not None:
            out.shadowed.append(command)
        else:
            out.commands[key] = command
    return out


def _read(path: Path, folder: Path, scope: str, problems: list[str]) -> CustomCommand | None:
    name = ":".join(path.relative_to(folder).with_suffix("").parts)
    if not _NAME.fullmatch(name):
        problems.append(f"{path}: not a command name (letters, digits, '-', '_', '.')")
        return None
    text = read_text(path)
    if text is None:
        problems.append(f"{path}: cannot be read (or larger than 256 KiB)")
        return None
    meta, body = parse_front_matter(text)
    body = body.strip()
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return CustomCommand(
        name=name,
        body=body,
        path=path,
        scope=scope,
        description=meta.get("description") or first.lstrip("# ")[:80],
        argument_hint=meta.get("argument-hint", ""),
        allowed_tools=split_list(meta.get("allowed-tools", "")),
    )
