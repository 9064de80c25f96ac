"""The rule stores the gate reads (`policy.gate.RuleStore`): `RuleFile`, the remembered
rules (`rules.py`'s files), and `RunRules`, command prefixes allowed or denied for
one run only (`synapse chat --allow/--deny`), layered over them and never written.

The run's prefixes join the folder's rules as if remembered, so they match exactly as
remembered ones do (an allow the command as written, a deny through wrappers and
paths; a deny beats an allow, whichever layer either comes from), and a refusal by
one of them says it was given for this run. What the gate remembers ("Always allow")
still goes to the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp.policy import trust
from synapse_lsp.policy.rules import (
    DECISIONS,
    Decision,
    Rule,
    Rules,
    command_prefix,
    folder_file,
    load,
    normalize_prefix,
    prefix_words,
    remember,
    store_path,
)

# The `source` of a run's rule: no file holds it.
RUN_SOURCE = Path("<this run>")


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)  # noqa: PTH116 - per command line; no path object to build
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class RuleFile:
    """The rule store `policy.gate.AskingGate` uses (its `RuleStore`): the rules of
    `$SYNAPSE_HOME/permissions.json` plus each folder's own file."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._loaded: dict[Path, tuple[tuple[object, ...], Rules]] = {}
        self._files: dict[Path, tuple[str, ...]] = {}

    def load(self, root: Path) -> Rules:
        """`rules.load`, read again only when a file it reads changed (reading and
        parsing each time cost ~0.15 ms); the gate asks once per command line."""
        files = self._files.get(root)
        if files is None:
            found = (store_path(self.home), folder_file(root), trust.store_path(self.home))
            files = self._files[root] = tuple(map(str, found))
        key = tuple(_signature(f) for f in files)
        cached = self._loaded.get(root)
        if cached is None or cached[0] != key:
            cached = self._loaded[root] = (key, load(self.home, root))
        return cached[1]

    def remember(self, root: Path, prefix: str, decision: str) -> None:
        if decision not in DECISIONS:
            raise ValueError(f"{decision!r}: the decision is 'allow', 'deny' or 'outside'")
        remember(self.home, root, prefix, decision)  # type: ignore[arg-type]

    def prefix(self, simple_command: str, *, with_flags: bool = False) -> str:
        return command_prefix(simple_command, with_flags=with_flags)


@dataclass(frozen=True)
class RunLayered(Rules):
    """A folder's rules with the run's own among them."""

    run_denies: frozenset[str] = frozenset()

    def why_denied(self, prefix: str) -> str:
        if prefix in self.run_denies:
            return f"by `--deny {prefix}`, given for this run"
        return super().why_denied(prefix)


class RunRules:
    """A rule store (`policy.gate.RuleStore`): `stored`'s rules plus this run's `allow`
    and `deny` prefixes. ValueError names a prefix that is not one (`normalize_prefix`)."""

    def __init__(self, stored: RuleFile, allow: Sequence[str] = (), deny: Sequence[str] = ()):
        self.stored = stored
        self.allow = tuple(dict.fromkeys(_prefix(p, "--allow") for p in allow))
        self.deny = tuple(dict.fromkeys(_prefix(p, "--deny") for p in deny))

    def load(self, root: Path) -> RunLayered:
        found = self.stored.load(root)
        mine = [_rule(p, "deny") for p in self.deny] + [_rule(p, "allow") for p in self.allow]
        return RunLayered(
            found.root, (*mine, *found.rules), found.problems, found.closed, frozenset(self.deny)
        )

    def remember(self, root: Path, prefix: str, decision: str) -> None:
        self.stored.remember(root, prefix, decision)

    def prefix(self, simple_command: str, *, with_flags: bool = False) -> str:
        return self.stored.prefix(simple_command, with_flags=with_flags)


def _prefix(text: str, flag: str) -> str:
    try:
        return normalize_prefix(text)
    except ValueError as exc:
        raise ValueError(f"{flag} {exc}") from None


def _rule(prefix: str, decision: Decision) -> Rule:
    return Rule(prefix, decision, RUN_SOURCE, prefix_words(prefix))
