"""Remembered permission decisions: "always allow / always deny this command prefix".

Two files hold rules, both JSON:

- `$SYNAPSE_HOME/permissions.json`, the user's own: per workspace folder, keyed by the
  folder's real path (`trust.folder_key`: a symlink and its target share rules),
  an `allow` and a `deny` list of command prefixes::

      {"version": 1, "folders": {"/real/path": {"allow": ["git commit"], "deny": ["rm"]}}}

  Written only here, under an exclusive `flock` on `permissions.json.lock` (so two
  Synapse processes remembering at once lose nothing), to a temporary file that is
  fsynced and renamed over the old one (a reader never sees half a file).
- `<folder>/.synapse/permissions.json`, the folder's own: `{"deny": [...]}`. It may
  only ADD denies; an `allow` there is ignored and reported as a problem (a folder
  cannot grant itself permissions: the agent can write inside the folder, so nothing
  there may loosen anything).

A prefix is a sequence of shell words (`git commit`, `rm`, `npm run build`); it
matches a simple command whose words start with those words, so `git commit` matches
`git commit -m x`, never `git commitx` nor `git status`. Deny beats allow, and a
line is allowed only when EVERY simple command of it is allowed, denied when ANY is
denied (`Rules.decide_line`). The two sides are deliberately not symmetric:

- an allow matches the command exactly as written: not after leading `VAR=value`
  assignments (`GIT_SSH_COMMAND=… git fetch`, `LD_PRELOAD=… ls` change what runs),
  not through wrappers (`sudo`, `env`, `xargs`, `bash -c` …), and never a command
  that redirects output into a file as `bashparse` reads it (`> f`, `>| f`, `&> f`;
  `2>&1` and `/dev/null` are fine), nor one whose words cannot be read (an unclosed quote);
- a deny also matches after leading assignments, through the wrappers `sudo`, `doas`,
  `env`, `nohup`, `time`, `command`, `builtin`, `exec`, `nice`, `ionice`, `timeout`,
  `stdbuf`, `setsid`, `xargs` (and their options), `find -exec`, inside
  `bash/sh/zsh/dash -c SCRIPT` and `eval`, by the program's base name (deny `rm`
  also denies `/bin/rm`), and past a subcommand tool's leading options (deny
  `git push` also denies `git -C x push`).

Denies are a guard against the agent's ordinary commands, not a sandbox: a command
built at run time (`$(echo rm) -rf x`) is not recognised.

An unreadable home file (bad JSON, a wrong shape, a newer version, an I/O error)
is a problem reported with the file's name and the fix, and it fails CLOSED: its
allows are gone, and since its denies are unknown, every command of the affected
folders is denied until the file is fixed or removed; `remember` and `revoke` refuse
to overwrite it (`UnreadableRulesError`), so the user's denies are never lost silently.
A folder file that cannot be read is reported and adds nothing (it is writable by
the agent, so its denies were never a guard a broken copy could weaken).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from synapse_lsp import bashparse, cmdline
from synapse_lsp.policy import trust
from synapse_lsp.policy.trust import folder_key

# "outside": allowed, and run outside the sandbox (the answer "Always run … outside the
# sandbox here" to a command the sandbox blocked); a plain "allow" only spares the
# question: the command still runs in the sandbox.
Decision = Literal["allow", "deny", "outside"]
DECISIONS: tuple[Decision, ...] = ("allow", "deny", "outside")
STORE_NAME = "permissions.json"
FOLDER_FILE = Path(".synapse") / "permissions.json"
VERSION = 1

log = logging.getLogger(__name__)

# ----------------------------------------------------------------- words

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SUBCOMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:-]*")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_UNKNOWN_PROGRAM = re.compile(r"[$`*?\[\]{}()<>|;&!~]")

# Tools whose first argument is a subcommand: the prefix is `tool subcommand`.
SUBCOMMAND_TOOLS = frozenset({
    "apt", "apt-get", "brew", "bun", "cargo", "conda", "docker", "dotnet", "gh", "git", "go",
    "helm", "kubectl", "make", "npm", "pip", "pip3", "pipenv", "pnpm", "podman", "poetry",
    "rustup", "systemctl", "terraform", "uv", "yarn",
})  # fmt: skip
# (tool, subcommand) pairs that name one more thing: `npm run build`, `uv run pytest`,
# `docker compose up`, `gh pr create` ("*": every subcommand of the tool).
NESTED: Mapping[str, frozenset[str]] = {
    "npm": frozenset({"run", "run-script", "exec"}),
    "pnpm": frozenset({"run", "exec", "dlx"}),
    "yarn": frozenset({"run", "dlx", "workspace"}),
    "bun": frozenset({"run", "x"}),
    "uv": frozenset({"run", "tool", "pip"}),
    "poetry": frozenset({"run"}),
    "pipenv": frozenset({"run"}),
    "docker": frozenset({"compose", "buildx", "container", "image", "network", "volume"}),
    "podman": frozenset({"compose", "container", "image", "network", "volume"}),
    "kubectl": frozenset({"config", "rollout"}),
    "git": frozenset({"stash", "remote", "submodule", "worktree"}),
    "gh": frozenset({"*"}),
}
# Programs whose first argument is the program they run: `npx prettier`.
RUNNERS = frozenset({"npx", "bunx", "pnpx", "uvx", "pipx"})
# Wrappers run the command after them; shells and `eval` run a script. No prefix is
# offered for them ("always allow `sudo`" would allow everything), and a deny looks
# through them. Value: options of the wrapper that take a value.
WRAPPERS: Mapping[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "setsid": frozenset(),
    "xargs": frozenset(
        {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file"}
    ),
}
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_NO_PREFIX = SHELLS | {"eval", "source", "."}
# A subcommand tool's leading options that take a value, skipped by denies only.
_TOOL_OPTIONS: Mapping[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}),
    "docker": frozenset({"-H", "--host", "--context", "-c", "--config", "-l", "--log-level"}),
    "podman": frozenset({"--connection", "-c", "--url", "--root", "--runroot"}),
    "kubectl": frozenset(
        {"-n", "--namespace", "--context", "--cluster", "--kubeconfig", "-s", "--server"}
    ),
    "cargo": frozenset({"-C", "-Z", "--config"}),
    "make": frozenset({"-C", "-f", "--file", "--directory", "-j", "-l", "-o", "-W"}),
    "npm": frozenset({"--prefix", "-w", "--workspace"}),
    "pnpm": frozenset({"-C", "--dir", "--filter", "-F"}),
    "yarn": frozenset({"--cwd"}),
    "uv": frozenset({"--directory", "--project", "--python", "-p"}),
    "go": frozenset({"-C"}),
    "helm": frozenset({"-n", "--namespace", "--kube-context"}),
    "terraform": frozenset({"-chdir"}),
}


def _argv(simple_command: str) -> list[str] | None:
    """The words of a simple command (None: they cannot be read)."""
    try:
        return cmdline.split_argv(simple_command.strip())
    except ValueError:
        return None


def _strip_assignments(words: list[str]) -> list[str]:
    index = 0
    while index < len(words) and _ASSIGNMENT.match(words[index]):
        index += 1
    return words[index:]


def writes_to_file(simple_command: str) -> bool:
    """Whether the command redirects output into a file (not `2>&1`, not /dev/null), as
    the parse reads it (a quoted `>` is text); one the parser cannot read counts."""
    if ">" not in simple_command:
        return False
    parsed = bashparse.parse(simple_command)
    return parsed.problem is not None or any(
        r.writes_beyond(_HARMLESS_TARGETS) for c in parsed.commands for r in c.redirects
    )


def _unwrap(words: list[str]) -> list[str] | None:
    """The command a wrapper runs (`sudo -u x rm y` -> `rm y`), or None if not a wrapper."""
    name = cmdline.program_name(words[0]) if words else ""
    if name not in WRAPPERS:
        return None
    valued = WRAPPERS[name]
    i = 1
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if word.startswith("-") and len(word) > 1:
            i += 2 if word in valued else 1
            continue
        if name in ("env", "sudo") and _ASSIGNMENT.match(word):
            i += 1
            continue
        break
    if name == "timeout" and i < len(words):
        i += 1  # the duration
    return words[i:]


def _shell_script(words: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` / `sh -lc SCRIPT` / `eval WORDS`, if any."""
    name = cmdline.program_name(words[0]) if words else ""
    if name == "eval":
        return " ".join(words[1:]) or None
    return cmdline.shell_c_script(words) if name in SHELLS else None


def _skip_tool_options(words: list[str]) -> list[str] | None:
    """`git -C x push` -> `git push` (for denies), or None when there is nothing to skip."""
    name = cmdline.program_name(words[0]) if words else ""
    if name not in SUBCOMMAND_TOOLS or len(words) < 2 or not words[1].startswith("-"):
        return None
    valued = _TOOL_OPTIONS.get(name, frozenset())
    i = 1
    while i < len(words) and words[i].startswith("-"):
        if words[i] == "--":
            i += 1
            break
        i += 2 if words[i] in valued else 1
    return [words[0], *words[i:]]


def _deny_views(simple_command: str, depth: int = 0) -> Iterator[list[str]]:
    """Every way a deny looks at a command: as written, after assignments, through
    wrappers, past a tool's options, and the simple commands of a `-c` script."""
    words = _argv(simple_command)
    if words is None:
        words = [w.strip("'\"\\") for w in simple_command.split()]
    pending = [words]
    seen = 0
    while pending and seen < 32:
        current = _strip_assignments(pending.pop())
        seen += 1
        if not current:
            continue
        yield current
        skipped = _skip_tool_options(current)
        if skipped is not None:
            yield skipped
        inner = _unwrap(current)
        if inner is not None:
            pending.append(inner)
        if cmdline.program_name(current[0]) == "find":  # find … -exec CMD … ; (each one)
            pending += [current[i + 1 :] for i, w in enumerate(current) if w in _FIND_EXEC]
        script = _shell_script(current)
        if script is not None and depth < 4:
            for part in cmdline.simple_commands(script):
                yield from _deny_views(part, depth + 1)


# --------------------------------------------------------------- prefixes


def prefix_words(prefix: str) -> tuple[str, ...]:
    """The words of a stored prefix (it is shell text: `'my tool' run` is two words)."""
    words = _argv(prefix)
    return tuple(words) if words else ()


def normalize_prefix(text: str | Sequence[str]) -> str:
    """A prefix as stored: its words, shell-quoted, one space apart. `text` is one
    string of shell words or a list of words. Raises ValueError when it is not the
    start of one simple command."""
    if isinstance(text, str):
        if len(cmdline.split_all(text)) != 1 or any(t in text for t in ("$(", "`", "<(", ">(")):
            raise ValueError(f"{text!r}: a prefix is the first words of one simple command")
        words = _argv(text)
        if words is None:
            raise ValueError(f"{text!r}: unbalanced quotes")
    else:
        words = list(text)
    if not words or not all(words):
        raise ValueError("a prefix needs at least one word (the program)")
    if _ASSIGNMENT.match(words[0]):
        raise ValueError(
            f"{words[0]!r}: a prefix starts with the program, not a VAR=value assignment"
        )
    return " ".join(cmdline.quote(w) for w in words)


def command_prefix(simple_command: str, *, with_flags: bool = False) -> str:
    """What "always for this command prefix" remembers for `simple_command`: the program
    name as written, plus its subcommand for a tool with subcommands (`git commit -m x`
    -> `git commit`; `npm run build` -> `npm run build`; `python -m pytest -x` ->
    `python -m pytest`; `npx prettier --write .` -> `npx prettier`; `ls -la` -> `ls`).
    Never a file argument or an option value.

    "" (nothing can be remembered) when an allow of the prefix would not cover the
    command or would cover far more than it: leading `VAR=value` assignments, an
    output redirection into a file, unreadable words, a program that is not a plain
    word (`$EDITOR`), a wrapper, shell or `eval` (`sudo …`, `bash -c …`), or a tool
    with subcommands whose first argument is an option or a path (`git -C d status`).

    `with_flags` (an "always run outside" rule): the narrowest prefix that still
    matches — the flags written right after the program or subcommand are part of it
    (`rm -rf build` -> `rm -rf`, `cp -p a b` -> `cp -p`): a rule to leave the sandbox
    covers no more than what the user saw.
    """
    words = _argv(simple_command)
    if not words or _ASSIGNMENT.match(words[0]) or writes_to_file(simple_command):
        return ""
    program = words[0]
    name = Path(program).name
    if _UNKNOWN_PROGRAM.search(program) or name in WRAPPERS or name in _NO_PREFIX:
        return ""
    chosen = [program]
    rest = words[1:]
    if name in RUNNERS:
        if rest and _SUBCOMMAND.fullmatch(rest[0]):
            chosen.append(rest[0])
        elif rest:
            return ""
    elif _PYTHON.fullmatch(name) and len(rest) >= 2 and rest[0] == "-m":
        if not _MODULE.fullmatch(rest[1]):
            return ""
        chosen += rest[:2]
    elif name in SUBCOMMAND_TOOLS and rest:
        if not _SUBCOMMAND.fullmatch(rest[0]):
            return ""
        chosen.append(rest[0])
        nested = NESTED.get(name, frozenset())
        wants = len(rest) > 1 and ("*" in nested or rest[0] in nested)
        if wants and _SUBCOMMAND.fullmatch(rest[1]):
            chosen.append(rest[1])
    if with_flags:
        for word in words[len(chosen) :]:
            if not _FLAG.fullmatch(word):
                break
            chosen.append(word)
    return " ".join(cmdline.quote(w) for w in chosen)


# A flag as a prefix may hold it: `-rf`, `--force`, `-p` (no value glued to it).
_FLAG = re.compile(r"-[A-Za-z0-9]+|--[a-z][a-z0-9-]*")


# ------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """One remembered prefix and where it came from."""

    prefix: str
    decision: Decision
    source: Path  # the file that holds it
    words: tuple[str, ...] = ()

    def matches(self, words: Sequence[str], *, by_name: bool = False) -> bool:
        """Whether `words` start with the rule's words (`by_name`: the program may be
        given by path, `/bin/rm` for `rm`)."""
        if not self.words or len(words) < len(self.words):
            return False
        head = list(words[: len(self.words)])
        if by_name and "/" not in self.words[0]:
            head[0] = cmdline.program_name(head[0])
        return tuple(head) == self.words


def _rule(prefix: str, decision: Decision, source: Path) -> Rule:
    return Rule(prefix, decision, source, prefix_words(prefix))


@dataclass(frozen=True)
class Rules:
    """The rules that apply in one folder: remembered allows and denies, the folder
    file's denies, and the problems met reading them. `closed` (a reason) when the
    home file's rules for the folder cannot be read: every command is denied."""

    root: Path
    rules: tuple[Rule, ...] = ()
    problems: tuple[str, ...] = ()
    closed: str | None = None

    @property
    def allows(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.decision != "deny")

    @property
    def denies(self) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.decision == "deny")

    def match(self, simple_command: str) -> Rule | None:
        """The rule that decides one simple command: a deny first, else an allow."""
        views = list(_deny_views(simple_command)) if self.rules else []  # none: no parse
        for rule in self.denies:
            if any(rule.matches(view, by_name=True) for view in views):
                return rule
        if not self.allows or writes_to_file(simple_command):
            return None
        words = _argv(simple_command)
        if not words or _ASSIGNMENT.match(words[0]):
            return None
        # The longest allow, so a listing shows the most specific one.
        for rule in sorted(self.allows, key=lambda r: -len(r.words)):
            if rule.matches(words):
                return rule
        return None

    def why_denied(self, prefix: str) -> str:
        """How a refusal by the deny rule `prefix` is worded (the gate's "denied: …")."""
        return f"by the remembered rule `{prefix}` (see `synapse permissions list`)"

    def decide(self, simple_command: str) -> Decision | None:
        """The decision for one simple command: "allow", "deny" or None (no rule)."""
        if self.closed is not None:
            return "deny"
        rule = self.match(simple_command)
        return None if rule is None else rule.decision

    def outside_line(self, commands: str | Sequence[str]) -> bool:
        """Whether every command of the line is remembered to run outside the sandbox
        (and none is denied)."""
        parts = cmdline.simple_commands(commands) if isinstance(commands, str) else commands
        parts = [p.strip() for p in parts if p.strip()]
        if not parts or self.closed is not None or all(r.decision != "outside" for r in self.rules):
            return False
        return all((r := self.match(p)) is not None and r.decision == "outside" for p in parts)

    def decide_line(self, commands: str | Sequence[str]) -> tuple[Decision | None, str | None]:
        """(decision, rule) for a line: a str is walked with `cmdline.simple_commands`,
        a sequence is taken as the line's simple commands (what `permissions` passes).
        Denied when ANY command is denied (the first deny rule), allowed only when EVERY
        command is allowed (the rules, comma-separated), else (None, None)."""
        parts = cmdline.simple_commands(commands) if isinstance(commands, str) else commands
        parts = [p.strip() for p in parts if p.strip()]
        if not parts:
            return None, None
        if self.closed is not None:
            return "deny", self.closed
        used: list[str] = []
        undecided = False
        for part in parts:
            rule = self.match(part)
            if rule is not None and rule.decision == "deny":
                return "deny", rule.prefix
            if rule is None:
                undecided = True
            elif rule.prefix not in used:
                used.append(rule.prefix)
        return (None, None) if undecided else ("allow", ", ".join(used))


# ------------------------------------------------------------------- files


class UnreadableRulesError(OSError):
    """The home file cannot be read, so it is not overwritten (an OSError: callers that
    handle an unwritable store handle this too)."""


@dataclass(frozen=True)
class FolderRules:
    """One folder's entry in the home file."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    problem: str | None = None  # the entry cannot be read: its folder fails closed
    outside: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.allow) + len(self.deny) + len(self.outside)


@dataclass(frozen=True)
class Store:
    """The home file as read. `problem`: the whole file cannot be read."""

    path: Path
    folders: dict[str, FolderRules] = field(default_factory=dict)
    problem: str | None = None
    fingerprint: str | None = None  # of the text read (`trust.digest`); None: no file

    @property
    def problems(self) -> list[str]:
        found = [self.problem] if self.problem else []
        return found + [e.problem for e in self.folders.values() if e.problem]


def store_path(home: Path) -> Path:
    return home / STORE_NAME


def folder_file(root: Path) -> Path:
    return root / FOLDER_FILE


_FIX = "fix it or remove it (removing forgets every remembered rule)"


def _prefix_list(value: object, where: str) -> tuple[list[str], str | None]:
    if not isinstance(value, list):
        return [], f"{where} is not a list"
    out: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            return [], f"{where}[{index}] is not a string"
        try:
            prefix = normalize_prefix(item)
        except ValueError as exc:
            return [], f"{where}[{index}]: {exc}"
        if prefix not in out:
            out.append(prefix)
    return out, None


def _parse_entry(key: str, entry: object) -> FolderRules:
    where = f"folders[{key!r}]"
    if not isinstance(entry, dict):
        return FolderRules(problem=f"{where} is not an object")
    lists: dict[str, list[str]] = {}
    for decision in DECISIONS:
        lists[decision], problem = _prefix_list(entry.get(decision, []), f"{where}.{decision}")
        if problem is not None:
            return FolderRules(problem=problem)
    return FolderRules(tuple(lists["allow"]), tuple(lists["deny"]), outside=tuple(lists["outside"]))


def read_store(home: Path) -> Store:
    """The home file; a missing file is empty, an unreadable one has a `problem`."""
    path = store_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # a file in the path: none here
        return Store(path)
    except (OSError, UnicodeDecodeError) as exc:
        return Store(path, problem=f"{path} cannot be read ({exc}); {_FIX}")
    fingerprint = trust.digest(text)
    try:
        raw: Any = json.loads(text)
    except ValueError as exc:
        return Store(path, problem=f"{path} is not valid JSON ({exc}); {_FIX}")
    if not isinstance(raw, dict):
        return Store(path, problem=f"{path} is not a JSON object; {_FIX}")
    version = raw.get("version")
    if version != VERSION:
        why = (
            f"was written by a newer Synapse (version {version})"
            if isinstance(version, int) and version > VERSION
            else f"has no known version ({version!r}, expected {VERSION})"
        )
        return Store(path, problem=f"{path} {why}; {_FIX}")
    folders = raw.get("folders", {})
    if not isinstance(folders, dict):
        return Store(path, problem=f"{path}: `folders` is not an object; {_FIX}")
    parsed: dict[str, FolderRules] = {}
    for key, entry in folders.items():
        found = _parse_entry(key, entry)
        if found.problem:
            found = FolderRules(problem=f"{path}: {found.problem}; {_FIX}")
        parsed[key] = found
    return Store(path, parsed, fingerprint=fingerprint)


def read_folder_file(root: Path) -> tuple[list[str], list[str]]:
    """(denies, problems) of the folder's own `.synapse/permissions.json`."""
    path = folder_file(root)
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], []
    except (OSError, ValueError) as exc:
        return [], [f"{path} cannot be read ({exc}); its denies do not apply"]
    if not isinstance(raw, dict):
        return [], [f"{path} is not a JSON object; its denies do not apply"]
    problems: list[str] = []
    if "allow" in raw or "outside" in raw:
        problems.append(
            f"{path}: `allow`/`outside` ignored: a folder cannot grant itself permissions "
            "(use `synapse permissions allow PREFIX`)"
        )
    unknown = sorted(set(raw) - {"deny", "allow", "version"})
    if unknown:
        problems.append(f"{path}: unknown keys ignored: {', '.join(unknown)}")
    denies, problem = _prefix_list(raw.get("deny", []), f"{path}: deny")
    if problem is not None:
        problems.append(f"{problem}; its denies do not apply")
    return denies, problems


_reported: set[str] = set()


def load(home: Path, root: Path) -> Rules:
    """The rules that apply in `root`: the home file's entry for its real path, then
    the folder file's denies. Problems are returned (and logged once per process)."""
    store = read_store(home)
    key = folder_key(root)
    entry = store.folders.get(key, FolderRules())
    problems: list[str] = []
    if (entry.allow or entry.outside) and trust.changed_since_confirmed(
        home, trust.HOME_PERMISSIONS, store.fingerprint
    ):
        # Written since Synapse last loaded or wrote it (trust.home_unconfirmed): its
        # denies apply, what it allows does not until the user confirms the change.
        problems.append(
            f"{store.path} changed since Synapse last loaded or wrote it; its allow and "
            "outside rules are not applied until you confirm the change (an agent may "
            "have written them): check it, then run `synapse trust --home`"
        )
        entry = FolderRules(deny=entry.deny, problem=entry.problem)
    rules = [_rule(p, "allow", store.path) for p in entry.allow]
    rules += [_rule(p, "deny", store.path) for p in entry.deny]
    rules += [_rule(p, "outside", store.path) for p in entry.outside]
    denies, found = read_folder_file(root)
    problems += found
    rules += [_rule(p, "deny", folder_file(root)) for p in denies]
    closed = store.problem or entry.problem
    if closed is not None:
        problems.insert(0, closed)
    for problem in problems:
        if problem not in _reported:
            _reported.add(problem)
            log.warning("permission rules: %s", problem)
    reason = None if closed is None else f"every command: {closed}"
    return Rules(Path(key), tuple(rules), tuple(problems), reason)


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """Hold the store's lock: one read-modify-write at a time, across processes."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / (STORE_NAME + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_json_atomically(path: Path, data: object) -> None:
    """Write `data` to `path` so a reader sees the old file or the whole new one, and a
    crash leaves one of them: a temporary file in the same folder, fsynced, renamed
    over `path`, then the folder fsynced (the rename itself is durable)."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _writable(store: Store) -> dict[str, FolderRules]:
    problems = store.problems
    if problems:
        raise UnreadableRulesError(f"not changed, since it cannot be read: {problems[0]}")
    return dict(store.folders)


def _unconfirmed(home: Path) -> bool:
    return trust.HOME_PERMISSIONS in trust.home_unconfirmed(home)


def _save(home: Path, folders: dict[str, FolderRules]) -> None:
    """Write the store; Synapse's own write is confirmed unless the file held an
    unconfirmed change already (that one must not be confirmed by this write)."""
    confirmed = not _unconfirmed(home)
    _write_store(home, folders)
    if confirmed:
        trust.record_home(home, (trust.HOME_PERMISSIONS,))


def _write_store(home: Path, folders: dict[str, FolderRules]) -> None:
    data = {
        "version": VERSION,
        "folders": {
            key: {"allow": list(entry.allow), "deny": list(entry.deny)}
            | ({"outside": list(entry.outside)} if entry.outside else {})
            for key, entry in sorted(folders.items())
            if len(entry)
        },
    }
    write_json_atomically(store_path(home), data)


def remember(home: Path, root: Path, prefix: str, decision: Decision) -> bool:
    """Remember `decision` for `prefix` in `root`; it replaces the opposite decision
    for the same prefix. False when it was already remembered. Raises ValueError for
    a bad prefix or decision, `UnreadableRulesError` when the file cannot be read."""
    if decision not in DECISIONS:
        raise ValueError(f"{decision!r}: the decision is 'allow', 'deny' or 'outside'")
    text = normalize_prefix(prefix)
    key = folder_key(root)
    with _locked(home):
        folders = _writable(read_store(home))
        entry = folders.get(key, FolderRules())
        lists = {d: list(getattr(entry, d)) for d in DECISIONS}
        if text in lists[decision]:
            return False
        lists[decision].append(text)
        # One decision per prefix: it replaces any other for the same prefix.
        for other in DECISIONS:
            if other != decision:
                lists[other] = [p for p in lists[other] if p != text]
        folders[key] = FolderRules(
            tuple(lists["allow"]), tuple(lists["deny"]), outside=tuple(lists["outside"])
        )
        _save(home, folders)
    return True


def revoke(home: Path, root: Path | None, prefix: str | None) -> int:
    """Forget remembered rules: `prefix` (both decisions; None: every prefix) in `root`
    (None: every folder). The number of rules removed. Folder files are not touched."""
    text = None if prefix is None else normalize_prefix(prefix)
    key = None if root is None else folder_key(root)
    with _locked(home):
        folders = _writable(read_store(home))
        removed = 0
        for name, entry in list(folders.items()):
            if key is not None and name != key:
                continue
            keep = {d: [p for p in getattr(entry, d) if text is not None and p != text]
                    for d in DECISIONS}  # fmt: skip
            removed += len(entry) - sum(len(v) for v in keep.values())
            folders[name] = FolderRules(
                tuple(keep["allow"]), tuple(keep["deny"]), outside=tuple(keep["outside"])
            )
        if removed:
            _save(home, folders)
    return removed


def list_rules(home: Path) -> dict[str, FolderRules]:
    """Every folder's remembered rules, by real path (entries that cannot be read
    carry their `problem`). An unreadable file raises `UnreadableRulesError`."""
    store = read_store(home)
    if store.problem:
        raise UnreadableRulesError(store.problem)
    return dict(sorted(store.folders.items()))
