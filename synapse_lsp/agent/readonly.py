"""The read-only rule of `task:explore`: a conservative allow-list of native commands.

Summaries are for people and never a security boundary, so this rule does not ask
them. Every simple command of a line (the one parse of the line, `bashparse`:
segments, groups, compound commands, command and process substitutions) must be on
the allow-list below, with arguments that cannot write or run other programs, and
without a redirection to a file, a heredoc or an output process substitution. A line
the parser does not vouch for is refused. Anything not listed is refused.

It is best effort until a read-only sandbox exists: a listed reader given a crafted
file name cannot write, but e.g. `cat` of a FIFO can block.
"""

from __future__ import annotations

import re

from synapse_lsp import bashparse

# Commands that only read or print, whatever their (non-listed-as-bad) options.
READERS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "stat", "file", "du",
        "df", "nl", "realpath", "readlink", "basename", "dirname", "which", "type",
        "cmp", "diff", "cut", "tr", "column", "true", "false", "test", "[", "date",
        "whoami", "id", "uname", "cd", "md5sum", "sha1sum", "sha256sum",
        "tac", "rev", "fold", "fmt", "expand", "paste", "join", "comm", "od", "hexdump",
        "strings", "jq", "grep", "egrep", "fgrep", "rg", "find", "tree", "sed", "sort",
        "uniq", "git", "fd", "fdfind", "ag", "ack",
    }
)  # fmt: skip
# Options that make a listed command write, delete, or run another program.
_BAD_FIND = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls")
_BAD_OPTIONS: dict[str, tuple[str, ...]] = {
    "rg": ("--pre",),  # runs a program per file
    "fd": ("-x", "--exec", "-X", "--exec-batch"),
    "fdfind": ("-x", "--exec", "-X", "--exec-batch"),
    "tree": ("-o",),
    "sort": ("-o", "--output", "--compress-program"),
    "ack": ("--pager",),
    "file": ("-C", "--compile"),
    "date": ("-s", "--set"),
}
# Git subcommands that only read (with `--output` refused everywhere).
GIT_READ = frozenset(
    {"log", "show", "diff", "status", "grep", "blame", "ls-files", "branch", "rev-parse",
     "ls-tree", "cat-file", "describe", "shortlog", "tag", "remote", "reflog"}
)  # fmt: skip
# `git branch` / `git tag` / `git remote` / `git reflog` options that only list.
_GIT_LISTING = {
    "branch": frozenset(
        {"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l",
         "--show-current", "--contains", "--no-contains", "--merged", "--no-merged",
         "--sort", "--points-at", "--format", "--color", "--no-color", "--column",
         "--no-column", "-i", "--ignore-case", "--abbrev", "--no-abbrev"}
    ),
    "tag": frozenset({"-l", "--list", "-n", "--contains", "--no-contains", "--merged",
                      "--no-merged", "--sort", "--points-at", "--format", "--column"}),
    "remote": frozenset({"-v", "--verbose", "show", "get-url"}),
    "reflog": frozenset({"show"}),
}  # fmt: skip
_GIT_TAKES_VALUE = frozenset(
    {"--contains", "--no-contains", "--merged", "--no-merged", "--sort", "--points-at",
     "--format", "show", "get-url"}
)  # fmt: skip
_LISTING_TAKES_PATTERNS = {"branch", "tag"}  # `git branch --list 'feat*'`
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SED_PRINT = re.compile(r"[0-9]*(,[0-9$]*)?p|/[^/]*/p|\$p")
_HARMLESS_TARGETS = frozenset({"/dev/null"})


def denial(line: str) -> str | None:
    """None if every simple command of `line` only reads; else the first offending one
    (the whole line when the parser does not vouch for it)."""
    parsed = bashparse.parse(line)
    if parsed.problem is not None:
        return line.strip()
    for command in parsed.commands:
        if not _read_only(command):
            return command.text
    return None


def command_is_read_only(command: str) -> bool:
    """Whether every simple command of `command` only reads."""
    parsed = bashparse.parse(command)
    return (
        parsed.problem is None
        and bool(parsed.commands)
        and all(_read_only(c) for c in parsed.commands)
    )


def _read_only(command: bashparse.Command) -> bool:
    if not _harmless_redirections(command):
        return False
    args = command.argv
    if not args or _ASSIGNMENT.match(args[0]):
        return False  # `X=1 cmd`: refuse rather than reason about the environment
    name, rest = args[0], args[1:]
    if name not in READERS:
        return False
    if name == "git":
        return _git_is_read_only(rest)
    if name == "find":
        return not any(a.startswith(_BAD_FIND) for a in rest)
    if name == "sed":
        return _sed_is_read_only(rest)
    if name == "uniq":
        return len([a for a in rest if not a.startswith("-")]) <= 1
    bad = _BAD_OPTIONS.get(name, ())
    return not any(_has_option(a, bad) for a in rest)


def _harmless_redirections(command: bashparse.Command) -> bool:
    """Only redirections that write no file (`2>&1`, `>/dev/null`, `< in`), no heredoc
    or here-string, and no output process substitution (`>(…)`; the inside of `<(…)`
    is checked as a command of its own)."""
    for redirect in command.redirects:
        if redirect.op in ("<<", "<<-", "<<<"):
            return False
        target = redirect.target
        if redirect.writes and not (
            target is not None and target.literal and target.value in _HARMLESS_TARGETS
        ):
            return False
    return not any(not w.literal and ">(" in w.value for w in command.words)


def _has_option(word: str, bad: tuple[str, ...]) -> bool:
    for option in bad:
        if word == option or (option.startswith("--") and word.startswith(option + "=")):
            return True
        short = len(option) == 2 and option.startswith("-")
        if short and word.startswith("-") and not word.startswith("--") and option[1] in word[1:]:
            return True  # in a short-option cluster (`-no` holds `-o`)
    return False


def _sed_is_read_only(args: list[str]) -> bool:
    """Only `sed -n 'N,Mp' FILE…` (the read form), no `-i`, no `w`/`e` commands."""
    flags = [a for a in args if a.startswith("-")]
    if flags != ["-n"]:
        return False
    positional = [a for a in args if not a.startswith("-")]
    return bool(positional) and _SED_PRINT.fullmatch(positional[0]) is not None


def _git_is_read_only(args: list[str]) -> bool:
    while args and args[0] in ("--no-pager", "-P", "-C", "--no-optional-locks"):
        args = args[2:] if args[0] == "-C" else args[1:]
    if not args or args[0] not in GIT_READ:
        return False
    sub, rest = args[0], args[1:]
    if any(a.startswith(("--output", "--ext-diff", "-O", "--open-files-in-pager")) for a in rest):
        return False
    listing = _GIT_LISTING.get(sub)
    if listing is None:
        return True
    positional: list[str] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("-") or sub in ("remote", "reflog"):
            if word.split("=", 1)[0] not in listing:
                return False
            if word in _GIT_TAKES_VALUE:
                index += 1  # `--contains HEAD`: HEAD is the option's value
        else:
            positional.append(word)
        index += 1
    if sub in _LISTING_TAKES_PATTERNS and positional:
        # `git branch NAME` creates a branch; only `--list PATTERN` lists.
        return "--list" in rest or "-l" in rest
    return True
