"""The text a command line's tool result holds when it failed or was refused.

`format_for_model` (SPEC §2): a command's output on success; on failure an
`[Error]` header, its `[stdout]`/`[stderr]` and the hint (`failure_hint`: a
`--help` hint only where usage is the likely cause). And the lines the router
refuses before running anything: the tool's name used as a command (`misuse`), a
line over the size limit (`too_long`), a syntax error bash reports (`syntax_error`),
an extension command nobody provides (`NotFound`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from synapse_lsp import bashparse, cmdline
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory, Layer, Step


def misuse(line: str) -> CommandOutput | None:
    """`Bash` / `Bash ls` / `Bash(command="ls")` as the command: not run, and the hint
    shows the right call (a `--help` hint would name a command that does not exist)."""
    if line == "Bash" or line.startswith(("Bash ", "Bash\t")):
        rest = line[4:].strip()
        example = f"Bash(command={_quote_for_hint(rest)})" if rest else 'Bash(command="ls -la")'
        return CommandOutput(
            stderr='"Bash" is the tool\'s name, not a command: the command parameter holds '
            "only the shell command. Not run.\n",
            exit_code=2,
            category=FailureCategory.INVALID_USAGE,
            data={
                "hint": 'Hint: Call the tool as Bash(command="..."), with the shell command '
                f"inside, e.g. {example}."
            },
        )
    if tuple(line.split()) in _BARE_SHELLS:
        return CommandOutput(
            stderr=f"`{line}` with no command would start an interactive shell and wait "
            "for input that never comes; every command already runs in a persistent "
            "bash session. Not run.\n",
            exit_code=2,
            category=FailureCategory.INVALID_USAGE,
            data={
                "hint": 'Hint: Run the command itself, e.g. Bash(command="ls -la"), or a '
                'script with Bash(command="bash script.sh").'
            },
        )
    wrapped = _BASH_WRAPPED.match(line)
    if wrapped is not None:
        inner = wrapped.group("inner").replace("\\" + wrapped.group("q"), wrapped.group("q"))
        return CommandOutput(
            stderr="Do not wrap Bash(...) inside command: the command parameter holds only "
            "the shell command. Not run.\n",
            exit_code=2,
            category=FailureCategory.INVALID_USAGE,
            data={"hint": f"Hint: Retry as Bash(command={_quote_for_hint(inner)})."},
        )
    return None


_BASH_WRAPPED = re.compile(
    r"^Bash\s*\(\s*command\s*=\s*(?P<q>[\"'])(?P<inner>.*)(?P=q)"
    r"(?:\s*,\s*restart\s*=\s*\w+)?\s*\)$",
    re.S,
)


# Words that open shell syntax, not a command with a `--help` (`for --help` is nonsense).
_SHELL_SYNTAX = frozenset(
    {"for", "while", "until", "if", "case", "select", "function", "{", "(", "((", "[[", "!", "time"}
)


# `bash` alone (or only asking for an interactive/login shell) would wait for input that
# never comes: every command already runs in a persistent bash.
_BARE_SHELLS = frozenset(
    {("bash",), ("sh",), ("bash", "-i"), ("bash", "-l"), ("bash", "--login"), ("bash", "-il")}
)


def unreadable(steps: list[Step]) -> bool:
    """A native step the parser does not vouch for (`bashparse`: the gate would ask)."""
    return any(s.layer is Layer.NATIVE and bashparse.parse(s.text).problem for s in steps)


async def syntax_error(line: str) -> str | None:
    """bash's own syntax error for `line` (`bash -n`: read, nothing run), or None when
    bash reads it (or cannot say within a few seconds). A line the parser cannot read
    that bash rejects too is a syntax error to report, not a command to ask about."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-n", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env={"PATH": os.defpath, "LC_ALL": "C"},
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(line.encode("utf-8", "replace")), 5.0)
    except (OSError, TimeoutError):
        with contextlib.suppress(Exception):
            proc.kill()
        return None
    if proc.returncode == 0:
        return None
    text = err.decode("utf-8", "replace").replace("bash: line ", "line ")
    return text if text.endswith("\n") else text + "\n"


def format_for_model(
    command: str,
    stdout: str,
    stderr: str,
    exit_code: int,
    category: FailureCategory | None,
    hint: str | None = None,
) -> str:
    """The tool-result text (SPEC §2): output on success; on failure an `[Error]` header,
    the `[stdout]`/`[stderr]` sections and the hint: `hint` when the command gave one,
    else `failure_hint`'s (a `--help` hint only where usage is the likely cause)."""
    if exit_code == 0:
        text = stdout
        if stderr.strip():
            text = f"{text.rstrip(chr(10))}\n[stderr]\n{stderr}" if text else f"[stderr]\n{stderr}"
        return text if text.strip() else "(no output)"
    what = {
        FailureCategory.INVALID_USAGE: "Invalid usage",
        FailureCategory.NOT_FOUND: "Not found",  # a missing command, file or tool: stderr says
        FailureCategory.TIMEOUT: "Command timed out",
        FailureCategory.CANCELLED: "Command cancelled by the user",
        FailureCategory.PERMISSION_DENIED: "Permission denied",
    }.get(category or FailureCategory.EXECUTION_ERROR, "Command failed")
    parts = [f"[Error] {what} (exit code {exit_code})"]
    if stdout.strip():
        parts.append(f"[stdout]\n{stdout.rstrip(chr(10))}")
    parts.append(f"[stderr]\n{stderr.rstrip(chr(10)) if stderr.strip() else '(empty)'}")
    if hint is None:
        hint = failure_hint(command, stdout, stderr, exit_code, category)
    if hint is not None:
        parts.append(hint)
    return "\n".join(parts) + "\n"


# What a failed command's output says about why it failed (SPEC §2).
_USAGE_SIGNS = re.compile(r"usage:|unrecognized|invalid option|unknown option|--help", re.I)


_TRACEBACK = "Traceback (most recent call last):"


_PERMISSION_SIGNS = re.compile(r"permission denied|operation not permitted", re.I)


_MISSING_SIGNS = re.compile(r"no such file", re.I)


_DIRECTORY_SIGNS = re.compile(r"is a directory", re.I)


_GREPS = frozenset({"grep", "egrep", "fgrep", "zgrep", "rg"})


_SANDBOX_NOTE = "[blocked by the sandbox:"  # `_run_native`'s note: it says what to do


def failure_hint(
    command: str, stdout: str, stderr: str, exit_code: int, category: FailureCategory | None
) -> str | None:
    """The hint a failure gets when its command gave none (SPEC §2). `--help` only where
    usage is the likely cause: an invalid-usage category, exit code 2, or output saying
    `usage:`, `unrecognized`, `invalid option`, `unknown option` or naming `--help`. A
    command that ran as intended and failed on its data (a traceback, a permission
    refusal, a missing file, a directory given for a file, grep finding nothing) gets a
    hint that fits; a denied or cancelled command, and any other failure, none."""
    if category is FailureCategory.TIMEOUT:
        return (
            "Hint: Run long tasks in the background (`cmd > log 2>&1 &`) and check the log, "
            "or narrow the command so it finishes sooner."
        )
    if category in (FailureCategory.CANCELLED, FailureCategory.PERMISSION_DENIED):
        return None
    output = f"{stdout}\n{stderr}"
    if category is not FailureCategory.INVALID_USAGE:
        if _SANDBOX_NOTE in stderr:
            return None
        if _TRACEBACK in output:
            return (
                "Hint: The program ran and raised an exception (not a usage problem): the "
                "traceback's last line names the error and the frames above it show where. "
                "Fix that cause in the code or its input, then run it again."
            )
        if not _USAGE_SIGNS.search(output):
            data_hint = _data_failure_hint(command, stdout, stderr, exit_code, output)
            if data_hint is not None or exit_code != 2:
                return data_hint
    base = cmdline.base_command(command) or command.strip()
    if not base or base in _SHELL_SYNTAX or base[0] in "({":
        return "Hint: Check the script's syntax and each command's usage before retrying."
    return f"Hint: Run `{base} --help` to learn the correct usage before retrying."


def _data_failure_hint(
    command: str, stdout: str, stderr: str, exit_code: int, output: str
) -> str | None:
    """The hint for a command that ran as intended and failed on its data, or None."""
    if _PERMISSION_SIGNS.search(output):
        return (
            "Hint: The file system refused access (the permissions of the file or its "
            "folder; `ls -ld <path>` shows them), not a usage problem: `--help` cannot "
            "change that. Use a path you have access to, or ask the user to change the "
            "permissions (`chmod`) if they want that."
        )
    if _MISSING_SIGNS.search(output):
        return (
            "Hint: A file or folder the command names does not exist (not a usage "
            "problem): check the path against the current directory (`pwd`, `ls <folder>`; "
            "`find . -name '<name>'` searches below it), then retry with the right one."
        )
    if _DIRECTORY_SIGNS.search(output):
        return (
            "Hint: The path is a folder, not a file (not a usage problem): list it with "
            "`ls <folder>`, then name a file inside it."
        )
    if exit_code == 1 and not stdout.strip() and not stderr.strip():
        bases = {cmdline.base_command(segment) for segment, _ in cmdline.split_all(command)}
        if bases & _GREPS:
            return (
                "Hint: grep exits with 1 when no line matched: the search ran and found "
                "nothing; that is not an error in the command. If a match was expected, "
                "check the pattern (case, regex characters) and the files searched."
            )
    return None


def too_long(line: str, limit: int) -> CommandOutput:
    size = len(line.encode("utf-8", "surrogatepass"))
    return CommandOutput(
        stderr=f"Not run: the command line is {size:,} bytes, over the {limit:,}-byte limit "
        "(setting maxCommandBytes).\n",
        exit_code=2,
        category=FailureCategory.INVALID_USAGE,
        data={
            "hint": "Hint: put large content in a file with several smaller `write`/`edit` "
            "calls, or generate it with a command, instead of one huge line."
        },
    )


def _quote_for_hint(inner: str) -> str:
    return '"' + inner.replace("\\", "\\\\").replace('"', '\\"') + '"'


def path_commands(path: str) -> list[str]:
    """The executable names on `path` (only read when a command was not found)."""
    names: set[str] = set()
    for folder in path.split(os.pathsep):
        try:
            with os.scandir(folder or ".") as entries:
                names.update(e.name for e in entries if ":" not in e.name)
        except OSError:
            continue
    return sorted(names)


@dataclass(frozen=True)
class NotFound:
    """An `mcp:`/`skill:` name nobody provides: a clear not-found with the way to discover
    (`hint_for` gives the "did you mean" and the configured servers)."""

    name: str
    hint_for: Callable[[str], str]
    summary: str = "unknown extension command"

    @property
    def usage(self) -> str:
        return self.name

    def help(self) -> str:
        return f"{self.name}: no such extension command"

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        whole = self.name.count(":") >= 2
        what = (
            "unknown extension command"
            if whole
            else (
                "unknown extension command (extension commands have three parts: "
                "`mcp:<server>:<tool>` or `skill:<skill>:<script>`)"
            )
        )
        return CommandOutput(
            stderr=f"{self.name}: {what}.\n",
            exit_code=127,
            category=FailureCategory.NOT_FOUND,
            data={"hint": self.hint_for(self.name)},
        )
