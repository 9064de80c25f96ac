"""What each built-in is, declared once by the built-in itself.

A built-in (`read`, `write`, `edit`, `plan`, `task:*`, `command:search`, `skill:*`…)
is a class with a `name` and a `traits: ClassVar[Traits]`, decorated with
`@builtin`. Its traits and its `invocation(argv, body)` say what one call does:
its effect, the paths it reads and writes, its Claude Code tool (for hooks and
for the hint when the model calls a tool that does not exist), how it is
summarised, whether a read-only sub-agent may run it, where it stands in the
system prompt, its aliases. The permission gate, the explore gate, the prompt, the
summaries, hooks, tool-name hints and skill enhancement ask this catalog; none of
them knows a built-in by its name.

The catalog is process-wide (a built-in is a kind of command, not a session's
object); the router still runs only the built-ins it was given. It fills itself on
first use from `PROVIDERS`, the modules that define built-ins (discovery by name, as
entry points do: this floor module imports none of them), so a summary made before
any router exists knows them all.
"""

from __future__ import annotations

import enum
import importlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar


class Effect(enum.StrEnum):
    """What a call does to the machine."""

    READ = "read"  # looks at files or the command directory; changes nothing
    WRITE = "write"  # changes the files its `Invocation.writes` names
    STATE = "state"  # changes only the chat session's own state (the plan)
    RUN = "run"  # runs other work: a sub-agent, a script, a server's tool


class Shape(enum.StrEnum):
    """How a call is summarised (the summary's type, `summaries.codex`)."""

    READ = "read"  # Read <file>
    EDIT = "edit"  # Edit / Write <file>
    PLAN = "plan"  # Update plan
    SEARCH = "search"  # Search <query>
    TASK = "task"  # Task: <description>
    TOOL = "tool"  # <source>: <tool>
    NONE = "none"  # no summary of its own: shown as the command


@dataclass(frozen=True)
class Invocation:
    """What one call touches, read from its argv alone (no I/O). Paths are as the
    model wrote them (relative to the shell's directory)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    query: str | None = None  # what a search looks for
    subtype: str | None = None  # `task:<subtype>`, `skill:<subtype>`
    description: str | None = None  # a task's own short description


@dataclass(frozen=True)
class Traits:
    effect: Effect
    shape: Shape = Shape.NONE
    # The title's verb, before the file (`Write a.txt`) or the first argument
    # (`Load skill pdf`); the shape's own when empty.
    verb: str = ""
    # Claude Code's tool this built-in is (`Read`, `Write`, `Edit`, `TodoWrite`, `Task`):
    # a hook's `tool_name`, and the hint when the model calls that tool by name.
    claude_tool: str | None = None
    # Other agents' names for the same tool (`view`, `str_replace`, `multiedit`).
    tool_aliases: tuple[str, ...] = ()
    # A read-only sub-agent (`task:explore`) may run it.
    read_only_safe: bool = False
    # Its place in the system prompt's list of built-ins (lower first; ties by name).
    prompt_rank: int = 100
    # Other spellings: one word (`todo`) or two (`tools search`), both -> this name.
    aliases: tuple[str, ...] = ()
    # Called as `<name>:<subtype>` (`task:explore`); the prompt lists it so.
    prefixed: bool = False
    # Starts a sub-agent: refused inside one, shown as nested work.
    starts_agent: bool = False
    # `cmd | <name> <file>` takes the pipe's content as its last argument.
    pipe_sink: bool = False
    # Text for the tool-name hint (`Bash(command="read path/to/file")`).
    example: str = ""


class Builtin(Protocol):
    """What the catalog keeps of a built-in: its class (the traits and the argv
    readers are the class's; a router holds its own instances)."""

    name: str
    traits: ClassVar[Traits]

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> Invocation | None:
        """What `argv` (the command's own words, its name first) does; `body` is a
        heredoc's text. None: a call the command would refuse as wrong usage."""
        ...

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        """Claude Code's `tool_input` for this call (`path` makes a path absolute as
        the host spells it); None: the call is shown to hooks as `Bash`."""
        ...

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        """The command line doing what Claude Code's tool call with `args` does."""
        ...


class Described:
    """Defaults for a built-in's argv readers (a base class): a call touches no file,
    hooks see it as `Bash`, and no other agent's tool is the same."""

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> Invocation | None:
        return Invocation()

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        return None

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        return None


B = TypeVar("B", bound=type)

# The modules whose classes are the package's built-ins (`@builtin`).
PROVIDERS = (
    "synapse_lsp.builtins",
    "synapse_lsp.extensions.search",
    "synapse_lsp.extensions.skill_commands",
)
_BY_NAME: dict[str, Any] = {}
_ALIASES: dict[tuple[str, ...], str] = {}
_loaded = False
_loading = threading.Lock()


def _table() -> dict[str, Any]:
    global _loaded
    if not _loaded:
        with _loading:
            if not _loaded:
                for module in PROVIDERS:
                    importlib.import_module(module)
                _loaded = True
    return _BY_NAME


def builtin(cls: B) -> B:
    """Class decorator: `cls` is a built-in; its name and traits enter the catalog."""
    register(cls)
    return cls


def register(cls: Any) -> None:
    name: str = cls.name
    traits: Traits = cls.traits
    _BY_NAME[name] = cls
    for alias in traits.aliases:
        _ALIASES[tuple(alias.split())] = name


def unregister(name: str) -> None:
    """Forget a built-in (tests that define their own)."""
    cls = _BY_NAME.pop(name, None)
    if cls is not None:
        for alias in traits(cls).aliases:
            _ALIASES.pop(tuple(alias.split()), None)


def names() -> list[str]:
    return list(_table())


def entries() -> Iterator[tuple[str, Any]]:
    return iter(list(_table().items()))


def get(name: str) -> Any | None:
    """The built-in called exactly `name` (no alias, no prefix)."""
    return _table().get(name)


def traits(cls: Any) -> Traits:
    found: Traits = cls.traits
    return found


EXTENSION = Traits(effect=Effect.RUN)


def of(command: object) -> Traits:
    """Any command's traits: a built-in's own; an extension command (`mcp:*`, a
    skill's script) has none and runs things (`EXTENSION`)."""
    found = getattr(command, "traits", None)
    return found if isinstance(found, Traits) else EXTENSION


def canonical(words: Sequence[str]) -> tuple[str, int] | None:
    """(the built-in's name, how many of `words` spelled it) for a call starting with
    `words`: its name, an alias (`todo`, `tools search`) or `<name>:<subtype>` of a
    prefixed one. None: not a built-in."""
    if not words:
        return None
    table = _table()
    word = words[0]
    if word in table:
        return word, 1
    if len(words) >= 2 and (word, words[1]) in _ALIASES:
        return _ALIASES[(word, words[1])], 2
    if (word,) in _ALIASES:
        return _ALIASES[(word,)], 1
    head, colon, rest = word.partition(":")
    if colon and rest:
        found = table.get(head)
        if found is not None and traits(found).prefixed:
            return head, 1
    return None


def may_start(word: str) -> bool:
    """May a call whose first word is `word` be a built-in (its name, an alias's first
    word such as `tools`, or `task:<type>`)?"""
    return canonical([word]) is not None or any(a[0] == word for a in _aliases())


def _aliases() -> dict[tuple[str, ...], str]:
    _table()
    return _ALIASES


def lookup(words: Sequence[str]) -> Any | None:
    """The built-in a call starting with `words` is (see `canonical`), or None."""
    found = canonical(words)
    return _table()[found[0]] if found is not None else None


def traits_of(word: str) -> Traits | None:
    """The traits of the built-in a command's first word names (alias and prefix
    included; two-word aliases need `lookup`)."""
    found = lookup([word])
    return traits(found) if found is not None else None


def normalized(argv: Sequence[str]) -> list[str]:
    """`argv` with an alias spelled as the built-in's name (`tools search x` ->
    `command:search x`, `todo …` -> `plan …`); other argv unchanged."""
    found = canonical(argv)
    if found is None or (found[1] == 1 and argv[0] == found[0]):
        return list(argv)
    name, used = found
    if used == 1 and ":" in argv[0] and argv[0].partition(":")[0] == name:
        return list(argv)  # `task:explore` keeps its subtype
    return [name, *argv[used:]]


def invocation(argv: Sequence[str], body: str | None = None) -> Invocation | None:
    """What a built-in call does (see `Builtin.invocation`); None when `argv` is not a
    built-in or its usage is wrong."""
    argv = normalized(argv)
    cls = lookup(argv)
    if cls is None:
        return None
    try:
        result: Invocation | None = cls.invocation(argv, body)
    except ValueError:
        return None
    return result


def starts_like_one(text: str) -> bool:
    """Cheap pre-check: may `text` (a command line) start with a built-in's name?"""
    stripped = text.lstrip()
    if not stripped:
        return False
    starts = [*_table(), *(a[0] for a in _ALIASES)]  # _table() has filled _ALIASES
    return stripped.startswith(tuple(starts))
