"""Does a command line write files? For the titles people read (never a security check).

Codex's `parse_command` drops "formatting helpers" such as `sed` and `sort` from a
pipeline, so `sed -i s/a/b/ x.py && cat x.py` parses as a plain read. The title shown
to people must not hide a write, so `titles.summarize` asks `writes(line)`: any simple
command of the line (its segments, groups and substitutions) that redirects output to
a file, edits in place (`sed -i`, `perl -i`), writes an output file (`sort -o`, `tee`,
`dd of=`, `curl -o`, `--fix`/`--write`…) or is a file-changing command (`cp`, `mv`,
`rm`, `mkdir`, `touch`, …, and our `write`/`edit` built-ins). The commands, their
words and their redirections are those of the one parse of the line (`bashparse`):
a `>` in quotes, a heredoc body or a comment is text. Conservative: a line the parser
does not vouch for counts as a write, and so does an output process substitution.
Linear in the line's length.

The authoritative read-only rule of `task:explore` is a separate allow-list
(`agent/subagents.py`); this module only keeps titles honest.
"""

from __future__ import annotations

import re

from synapse_lsp import bashparse, catalog, cmdline

# Commands that change files whatever their arguments.
FILE_CHANGERS = frozenset(
    {
        "cp", "mv", "rm", "rmdir", "mkdir", "touch", "ln", "chmod", "chown", "chgrp",
        "truncate", "install", "shred", "unlink", "mktemp", "rsync", "scp", "patch",
        "mkfifo", "mknod", "split", "csplit",
    }
)  # fmt: skip
# Prefixes that run the rest of the words as a command.
_RUNNERS = frozenset({"sudo", "doas", "env", "nice", "nohup", "command", "builtin", "exec", "time"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Targets that write no file: the bit bucket and the standard streams.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def writes(line: str) -> bool:
    """True if any part of `line` may write a file (see the module docstring)."""
    parsed = bashparse.parse(line)
    if parsed.problem is not None:
        return True  # its commands are a guess: do not title it as a read
    return any(_writes(command) for command in parsed.commands)


def redirects_to_file(command: str) -> bool:
    """An output redirection whose target is not `/dev/null` or an fd, or an output
    process substitution (`>(…)`), in a simple command's text."""
    parsed = bashparse.parse(command)
    return parsed.problem is not None or any(_redirects(c) for c in parsed.commands)


def _redirects(command: bashparse.Command) -> bool:
    for redirect in command.redirects:
        target = redirect.target
        if redirect.writes and (
            target is None or not target.literal or target.value not in _HARMLESS_TARGETS
        ):
            return True
    # `>(cmd)`: output to a process, counted as a write to be safe
    return any(not w.literal and ">(" in w.value for w in command.words)


def argv_of(command: str | bashparse.Command) -> list[str]:
    """The words of a simple command with leading assignments and runners dropped."""
    if isinstance(command, bashparse.Command):
        words = command.argv
    else:
        try:
            words = cmdline.split_argv(command)
        except ValueError:
            words = command.split()
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _RUNNERS):
        words = words[1:]
        while words and words[0].startswith("-"):  # `env -i`, `nice -n 5` (best effort)
            words = words[1:]
    return words


def command_writes(command: str) -> bool:
    """True if a simple command (its text) may write a file."""
    parsed = bashparse.parse(command)
    return parsed.problem is not None or any(_writes(c) for c in parsed.commands)


def _writes(command: bashparse.Command) -> bool:
    """True if one simple command of the parse may write a file."""
    if _redirects(command):
        return True
    words = argv_of(command)
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name in FILE_CHANGERS:
        return True
    builtin = catalog.traits_of(name)
    if builtin is not None and builtin.effect is catalog.Effect.WRITE:
        return True  # `write`, `edit`
    if any(a in ("--fix", "--write", "--in-place", "--inplace") or a.startswith("--fix=")
           for a in args):  # fmt: skip
        return True
    if name == "sed" or name == "perl":
        return any(_short_flag(a, "i") or a.startswith("--in-place") for a in args)
    if name == "sort":
        return any(_short_flag(a, "o") or a.startswith("--output") for a in args)
    if name == "tee":
        return any(not a.startswith("-") and a != "/dev/null" for a in args)
    if name == "dd":
        return any(a.startswith("of=") for a in args)
    if name == "uniq":
        return len([a for a in args if not a.startswith("-")]) > 1
    if name == "curl":
        return any(
            _short_flag(a, "o")
            or _short_flag(a, "O")
            or a.startswith(("--output", "--remote-name"))
            for a in args
        )
    if name == "wget":  # saves a file unless the output document is `-`
        return not any(
            a in ("-O-", "-qO-", "--output-document=-")
            or (_short_flag(a, "O") and a.endswith("O") and args[i + 1 : i + 2] == ["-"])
            for i, a in enumerate(args)
        )
    if name == "tar":
        first = args[0] if args else ""
        return not (first.lstrip("-").startswith("t") or "--list" in args or "-t" in args)
    if name in ("unzip", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd"):
        return not any(a in ("-l", "-t", "-c", "--stdout", "--list", "--test") for a in args)
    if name == "git":
        return _git_writes(args)
    return False


def _git_writes(args: list[str]) -> bool:
    # `git diff --output=f`, `git log --output f`: the read-ish subcommands that write a file.
    return any(a.startswith("--output") for a in args)


def _short_flag(word: str, letter: str) -> bool:
    """`-i`, `-i.bak`, `-ni`, `-Ei`: a short-option cluster that contains `letter`
    (for `sed`/`perl -i`, `sort -o`), but not a long option or an argument."""
    if not word.startswith("-") or word.startswith("--") or len(word) < 2:
        return False
    cluster = re.match(r"-[A-Za-z]+", word)
    return cluster is not None and letter in cluster.group()[1:]
