"""Argument parsing shared by built-ins: positionals, `--flag value`, `--flag=value`, `--`."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field


class ArgError(ValueError):
    """Wrong usage; the message is shown to the model with a `--help` pointer."""


@dataclass
class ParsedArgs:
    positional: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)


def parse_args(
    argv: list[str], *, options: AbstractSet[str], flags: AbstractSet[str] = frozenset()
) -> ParsedArgs:
    """Split argv into positionals, valued options and boolean flags.

    Anything that looks like `--name` and is not declared is an error (a typo the
    model should hear about). Single-dash words are positionals, so text such as
    `-1` or `- item` can be passed freely; `--` ends option parsing.
    """
    parsed = ParsedArgs()
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            parsed.positional.extend(argv[i + 1 :])
            break
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word[2:].partition("=")
            if name in flags and not eq:
                parsed.flags.add(name)
            elif name in options:
                if not eq:
                    if i + 1 >= len(argv):
                        raise ArgError(f"--{name} needs a value")
                    i += 1
                    value = argv[i]
                parsed.options[name] = value
            else:
                known = sorted([f"--{o} N" for o in options] + [f"--{f}" for f in flags])
                hint = f" (known: {', '.join(known)})" if known else ""
                raise ArgError(f"unknown option --{name}{hint}")
        else:
            parsed.positional.append(word)
        i += 1
    return parsed


def non_negative_int(name: str, value: str | None, default: int | None) -> int | None:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ArgError(f"--{name} must be a whole number, got {value!r}") from None
    if number < 0:
        raise ArgError(f"--{name} must be 0 or more, got {number}")
    return number
