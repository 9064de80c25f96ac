"""Permission policy for commands run from the editor, asked through the editor.

Policies (setting `permission`): `auto` never asks; `ask-writes-outside-workspace`
(default) asks before `write`/`edit` of a path outside the workspace and before
native commands that obviously write outside it; `ask-all-native` asks before
every native command. `deny` globs always win; `allow` globs must match every
simple command of the line, so `git status*` never allows `git status && rm -rf /`.
"Allow for this session" remembers the exact command line for the gate's owner
(one gate per chat session, one for the workspace's direct commands).
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from synapse_lsp import cmdline
from synapse_lsp.cmdline import simple_commands
from synapse_lsp.commands import Layer, Step
from synapse_lsp.config import POLICIES, Settings, SettingsSource, as_source

ALLOW_ONCE = "Allow once"
ALLOW_SESSION = "Allow for this session"
DENY = "Deny"
ACTIONS = (ALLOW_ONCE, ALLOW_SESSION, DENY)

# (message, actions) -> the chosen action's title, or None when dismissed
Asker = Callable[[str, tuple[str, ...]], Awaitable[str | None]]

# Native commands whose non-option arguments are paths they write, delete or move.
_WRITERS = frozenset(
    {
        "rm",
        "rmdir",
        "mv",
        "cp",
        "touch",
        "mkdir",
        "tee",
        "ln",
        "chmod",
        "chown",
        "chgrp",
        "truncate",
        "install",
        "rsync",
        "shred",
        "unlink",
        "dd",
    }
)
_REDIRECT = re.compile(r"(?:^|[^<>&0-9])\d*(?:>>?|&>>?|>\|)\s*([^\s;&|<>()]+)")
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
# Words before the command that runs: `sudo env nohup rm x` writes what `rm x` writes.
_PREFIXES = frozenset({"sudo", "env", "nohup", "time", "exec", "command", "nice", "xargs"})


def segments(line: str) -> list[str]:
    """The simple commands of a line, cut at top-level `&& || ; | &` and newlines."""
    return [part.strip() for part, _ in cmdline.split_all(line) if part.strip()]


def _is_plain(segment: str) -> bool:
    """No substitutions, subshells or redirections: what an allow glob may vouch for."""
    if any(tok in segment for tok in ("$(", "`", "<(", ">(")):
        return False
    return not cmdline.has_redirection(segment)


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def writes_outside(line: str, layer: Layer, cwd: Path, root: Path) -> list[str]:
    """Paths outside `root` that `line` obviously writes (best effort; [] if none seen).

    Followed within the line: `cd`/`pushd` (so `cd .. && rm -rf x` is seen for what it
    is), the script of `bash -c`/`sh -c`, and `$VARS` of this process's environment. A
    path that still depends on something unknown (`cd -`, `$UNSET`, `$(…)`) counts as
    outside: the policy asks rather than guesses.
    """
    return _writes(line, layer, cwd, root)


def _shell_script(words: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` / `sh -lc SCRIPT`, if that is what `words` is."""
    for i, word in enumerate(words[1:], start=1):
        if not word.startswith("-") or word.startswith("--"):
            return None
        if "c" in word[1:]:
            return words[i + 1] if i + 1 < len(words) else None
    return None


def _writes(line: str, layer: Layer, cwd: Path | None, root: Path) -> list[str]:
    outside: list[str] = []
    here = cwd  # None: the line moved somewhere we cannot know

    def resolve(arg: str) -> Path | None:
        expanded = os.path.expandvars(arg)
        if "$" in expanded or "`" in expanded:
            return None
        path = Path(expanded).expanduser()
        if path.is_absolute():
            return path
        return None if here is None else here / path

    seen: set[tuple[Path | None, str]] = set()  # a long line repeats itself

    def check(arg: str) -> None:
        if not arg or arg in _HARMLESS_TARGETS or (here, arg) in seen:
            return
        seen.add((here, arg))
        path = resolve(arg)
        if path is None:
            outside.append(arg)
        elif not _inside(path, root):
            outside.append(str(path))

    if layer is Layer.AGENT:
        heredoc = cmdline.extract_heredoc(line)
        try:
            argv = cmdline.split_argv(heredoc[0] if heredoc is not None else line)
        except ValueError:
            return []
        if argv and argv[0] in ("write", "edit"):
            positional = [a for a in argv[1:] if not a.startswith("--")]
            if positional:
                check(positional[0])
        return outside
    if layer is not Layer.NATIVE:
        return outside
    for segment in simple_commands(line):
        for match in _REDIRECT.finditer(segment):
            check(match.group(1).strip("'\""))
        try:
            words = cmdline.split_argv(segment)
        except ValueError:
            continue
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in _PREFIXES):
            words = words[1:]
        if not words:
            continue
        name = Path(words[0]).name
        args = [w for w in words[1:] if not w.startswith("-") and not set(w) <= set("<>&|")]
        if name in ("cd", "pushd"):
            targets = [w for w in words[1:] if w == "-" or not w.startswith("-")]
            target = targets[0] if targets else "~"
            here = None if target == "-" else resolve(target)
        elif name in ("bash", "sh", "zsh", "dash") and (script := _shell_script(words)):
            outside += _writes(script, layer, here, root)
        elif name == "eval" and len(words) > 1:
            outside += _writes(" ".join(words[1:]), layer, here, root)
        elif name == "sed" and any(w == "-i" or w.startswith("-i") for w in words[1:]):
            for arg in args[1:]:
                check(arg)
        elif name == "dd":
            for w in words[1:]:
                if w.startswith("of="):
                    check(w[3:])
        elif name in _WRITERS:
            if name in ("chmod", "chown", "chgrp") and args:
                args = args[1:]
            for arg in args:
                check(arg)
    return outside


class EditorPermissionGate:
    """`commands.PermissionGate` for the LSP face: policy + globs + asking the user.

    Every step of a line is judged as if it were typed alone: `read a | rm x` asks what
    `rm x` asks. One question covers the whole line. An unanswered question is denied
    after `permission_timeout` seconds.
    """

    def __init__(
        self,
        settings: Settings | SettingsSource,
        workspace_root: Path,
        ask: Asker,
    ) -> None:
        self._settings = as_source(settings)
        self._root = workspace_root
        self._ask = ask
        self.remembered: set[str] = set()

    def _needs_asking(self, steps: Sequence[Step], cwd: Path, policy: str) -> str | None:
        """Why the user must be asked, or None."""
        if policy == "auto":
            return None
        if policy == "ask-all-native":
            native = [s.text for s in steps if s.layer is Layer.NATIVE]
            return "native command: " + _shorten(native[0]) if native else None
        outside: list[str] = []
        for step in steps:
            outside += writes_outside(step.text, step.layer, cwd, self._root)
        if outside:
            return "writes outside the workspace: " + ", ".join(outside[:3])
        return None

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None:
        settings = self._settings()
        line = command.strip()
        plan = list(steps) or [Step(line, layer)]
        if len(line) > 64 * 1024:  # scanning a long line is linear, but keep it off the loop
            parts = await asyncio.to_thread(_parts, plan)
        else:
            parts = _parts(plan)
        for pattern in settings.deny:
            if fnmatch.fnmatchcase(line, pattern) or any(
                fnmatch.fnmatchcase(p, pattern) for p in parts
            ):
                return f"denied by the `deny` setting (pattern {pattern!r})"
        if settings.allow and all(
            _is_plain(p) and any(fnmatch.fnmatchcase(p, pat) for pat in settings.allow)
            for p in parts
        ):
            return None
        if line in self.remembered:
            return None
        policy = settings.permission if settings.permission in POLICIES else POLICIES[1]
        if len(line) > 64 * 1024:
            reason = await asyncio.to_thread(self._needs_asking, plan, cwd, policy)
        else:
            reason = self._needs_asking(plan, cwd, policy)
        if reason is None:
            return None
        message = f"Synapse wants to run:\n  {_shorten(line, 2000)}\nin {cwd}\n({reason})"
        wait = settings.permission_timeout
        try:
            answer = await asyncio.wait_for(self._ask(message, ACTIONS), wait)
        except TimeoutError:
            return f"denied: nobody answered the permission question within {wait:g} s"
        except Exception as exc:  # the editor could not ask: do not run
            return f"denied: the editor could not ask the user ({exc})"
        if answer == ALLOW_SESSION:
            self.remembered.add(line)
            return None
        if answer == ALLOW_ONCE:
            return None
        return "denied by the user"


def _parts(steps: Sequence[Step]) -> list[str]:
    """The simple commands of every step (what deny/allow globs are matched against)."""
    parts: list[str] = []
    for step in steps:
        found = simple_commands(step.text) if step.layer is Layer.NATIVE else []
        parts += found or [step.text.strip()]
    return parts


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"
