"""Does a command line write files? For the titles people read (never a security check).

Codex's `parse_command` drops "formatting helpers" such as `sed` and `sort` from a
pipeline, so `sed -i s/a/b/ x.py && cat x.py` parses as a plain read. The title shown
to people must not hide a write, so `titles.summarize` asks `writes(line)`: any simple
command of the line (its segments, groups and substitutions) that redirects output to
a file, edits in place (`sed -i`, `perl -i`), writes an output file (`sort -o`, `tee`,
`dd of=`, `curl -o`, `--fix`/`--write`…) or is a file-changing command (`cp`, `mv`,
`rm`, `mkdir`, `touch`, …, and our `write`/`edit` built-ins). Conservative: an
unclear redirection counts as a write. Linear in the line's length.

The authoritative read-only rule of `task:explore` is a separate allow-list
(`agent/subagents.py`); this module only keeps titles honest.
"""

from __future__ import annotations

import re

from synapse_lsp import cmdline
from synapse_lsp.cmdline import simple_commands

# Commands that change files whatever their arguments.
FILE_CHANGERS = frozenset(
    {
        "cp", "mv", "rm", "rmdir", "mkdir", "touch", "ln", "chmod", "chown", "chgrp",
        "truncate", "install", "shred", "unlink", "mktemp", "rsync", "scp", "patch",
        "mkfifo", "mknod", "write", "edit", "split", "csplit",
    }
)  # fmt: skip
# Prefixes that run the rest of the words as a command.
_RUNNERS = frozenset({"sudo", "doas", "env", "nice", "nohup", "command", "builtin", "exec", "time"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# An output redirection: `>`, `>>`, `>|`, `&>`, `&>>`, `N>`, `<>`; its target follows.
_REDIRECT = re.compile(r"(?:&|\d*)>>?\|?|<>")
# Targets that write no file: fd duplication/closing and the bit bucket.
_HARMLESS_TARGETS = re.compile(r"&(?:\d+|-)|/dev/(?:null|stdout|stderr|tty)")
# Quoted strings and escapes (blanked before looking for unquoted `>`).
_QUOTED_OR_ESCAPED = re.compile(r"'[^']*'?|\"(?:[^\"\\]|\\.)*\"?|\\.", re.DOTALL)


def writes(line: str) -> bool:
    """True if any part of `line` may write a file (see the module docstring)."""
    heredoc = cmdline.extract_heredoc(line)
    if heredoc is not None:
        line = heredoc[0]
    return any(command_writes(part) for part in simple_commands(line))


def redirects_to_file(command: str) -> bool:
    """An unquoted output redirection whose target is not `/dev/null` or an fd."""
    if ">" not in command:
        return False
    bare = _QUOTED_OR_ESCAPED.sub(lambda m: "\0" * len(m.group()), command)
    for match in _REDIRECT.finditer(bare):
        if bare.startswith(">(", match.end() - 1) or bare.startswith("(", match.end()):
            return True  # `>(cmd)`: output to a process, counted as a write to be safe
        target = command[match.end() :].lstrip(" \t")
        word = re.match(r"\S*", target)
        target_word = word.group() if word else ""
        if match.group() == "<>" or not _HARMLESS_TARGETS.fullmatch(target_word):
            return True
    return False


def argv_of(command: str) -> list[str]:
    """The words of a simple command with leading assignments and runners dropped."""
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
    """True if one simple command may write a file."""
    if redirects_to_file(command):
        return True
    words = argv_of(command)
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name in FILE_CHANGERS:
        return True
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
