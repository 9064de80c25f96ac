"""Where a command line writes, read from its words alone: the paths a native writer
(`rm`, `mv`, `cp`, `tee`, a `>` redirection…) or a built-in (`write`, `edit`) would
change, and whether the line can be read reliably at all. The permission gate
(`policy.gate`) asks about a line that writes outside the workspace."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from synapse_lsp import bashparse, catalog, cmdline
from synapse_lsp.commands import Layer, Step
from synapse_lsp.sandbox import HOST_VIEW, PathView

# Native commands whose non-option arguments are paths they write, delete or move.
_WRITERS = frozenset({
    "rm", "rmdir", "mv", "cp", "touch", "mkdir", "tee", "ln", "chmod", "chown", "chgrp",
    "truncate", "install", "rsync", "shred", "unlink", "dd",
})  # fmt: skip
# Writers that only read all but their last path (`cp a b dest/`; `ln -s target name`).
_COPIERS = frozenset({"cp", "ln", "install", "rsync"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
# Words before the command that runs: `sudo env nohup rm x` writes what `rm x` writes.
_PREFIXES = frozenset({"sudo", "env", "nohup", "time", "exec", "command", "nice", "xargs"})
# Brace expansion left in a word bash expands (`{/etc/x,y}`): where it lands is unknown.
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")


def unreadable(steps: Sequence[Step]) -> str | None:
    """Why the parser does not vouch for a native step (`bashparse`): the gate asks."""
    problems = (bashparse.parse(s.text).problem for s in steps if s.layer is Layer.NATIVE)
    return next((p for p in problems if p is not None), None)


def inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def writes_outside(
    line: str, layer: Layer, cwd: Path, root: Path, view: PathView = HOST_VIEW
) -> list[str]:
    """Paths outside `root` that `line` obviously writes (best effort; [] if none seen).
    A path in the sandboxed session's own `/tmp` (`view`) is not outside: the
    sandbox lets every layer write there, and nothing else sees it.

    Followed within the line: `cd`/`pushd` (so `cd .. && rm -rf x` is seen for what it
    is), the script of `bash -c`/`sh -c`, and `$VARS` of this process's environment. A
    path that still depends on something unknown (`cd -`, `$UNSET`, `$(…)`) counts as
    outside: the policy asks rather than guesses.
    """
    return _writes(line, layer, cwd, root, view)


def _writes(
    line: str, layer: Layer, cwd: Path | None, root: Path, view: PathView = HOST_VIEW
) -> list[str]:
    outside: list[str] = []
    here = cwd  # None: the line moved somewhere we cannot know

    def resolve(value: str, literal: bool) -> Path | None:
        if literal:  # bash uses the text as it is (`'$(x).txt'` is a file name)
            path = Path(value)
        else:
            expanded = os.path.expandvars(value)
            if "$" in expanded or "`" in expanded or _BRACES.search(expanded):
                return None
            path = Path(expanded).expanduser()
        if path.is_absolute():
            return path
        return None if here is None else here / path

    seen: set[tuple[Path | None, str, bool]] = set()  # a long line repeats itself

    def check(value: str, literal: bool) -> None:
        if not value or value in _HARMLESS_TARGETS or (here, value, literal) in seen:
            return
        seen.add((here, value, literal))
        path = resolve(value, literal)
        if path is None:
            outside.append(value)
            return
        host = view.host(path)
        tmp = view.private_tmp
        if not inside(host, root) and not (tmp is not None and inside(host, tmp)):
            outside.append(str(path))

    if layer is Layer.AGENT:
        heredoc = cmdline.extract_heredoc(line)
        try:
            marked = cmdline.split_argv_marked(heredoc[0] if heredoc is not None else line)
        except ValueError:
            return []
        literal = {w: not expands for w, expands in marked}
        body = heredoc[1] if heredoc is not None else None
        found = catalog.invocation([w for w, _ in marked], body)
        for path in found.writes if found is not None else ():
            check(path, literal.get(path, False))
        return outside
    if layer is not Layer.NATIVE:
        return outside
    # The parse (`bashparse`): every command bash runs, its words and real redirections
    # (none in quotes, heredoc bodies or comments); a line it does not vouch for is asked.
    for command in bashparse.parse(line).commands:
        for redirect in command.redirects:
            if redirect.writes and redirect.target is not None:
                check(redirect.target.value, redirect.target.literal)
        marked = [(w.value, w.literal) for w in command.words]
        while marked and (re.match(r"^[A-Za-z_]\w*=", marked[0][0]) or marked[0][0] in _PREFIXES):
            marked = marked[1:]
        if not marked:
            continue
        words = [w for w, _ in marked]
        word = words[0]
        name = word if "/" not in word and word not in (".", "..") else Path(word).name
        args = [(w, lit) for w, lit in marked[1:] if not w.startswith("-")]
        if name in ("cd", "pushd"):
            targets = [(w, lit) for w, lit in marked[1:] if w == "-" or not w.startswith("-")]
            target = targets[0] if targets else ("~", False)
            here = None if target[0] == "-" else resolve(*target)
        elif name in ("bash", "sh", "zsh", "dash") and (script := cmdline.shell_c_script(words)):
            outside += _writes(script, layer, here, root, view)
        elif name == "eval" and len(words) > 1:
            outside += _writes(" ".join(words[1:]), layer, here, root, view)
        elif name == "sed" and any(w == "-i" or w.startswith("-i") for w in words[1:]):
            for arg in args[1:]:
                check(*arg)
        elif name == "dd":
            for w, lit in marked[1:]:
                if w.startswith("of="):
                    check(w[3:], lit)
        elif name in _COPIERS and len(args) >= 2:
            # `cp SRC… DEST` writes DEST only (or the `-t DIR` folder); the sources are read
            dest: tuple[str, bool] | None = next(
                (
                    (w[len("--target-directory=") :], lit)
                    for w, lit in marked
                    if w.startswith("--target-directory=")
                ),
                None,
            )
            if "-t" in words[1:-1]:
                dest = marked[words.index("-t") + 1]
            check(*(dest if dest is not None else args[-1]))
        elif name in _WRITERS:
            if name in ("chmod", "chown", "chgrp") and args:
                args = args[1:]
            for arg in args:
                check(*arg)
    return outside
