"""BashRouter: decides each command line's layer and runs it there.

Layers (SPEC §2): Agent Shell built-ins run in-process; Extension Shell commands
(`mcp:*`, `skill:*`) go to the extension registry; everything else goes to the
persistent shell exactly as typed. The router returns a structured
`RouteResult` and, separately, the text the model sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import difflib
import os
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from synapse_lsp import bashparse, cmdline
from synapse_lsp.builtins import default_builtins
from synapse_lsp.commands import (
    Command,
    CommandContext,
    CommandLookup,
    CommandOutput,
    FailureCategory,
    Layer,
    OutputSink,
    OutsideEnv,
    PermissionGate,
    SandboxEscalation,
    Step,
    SubAgentRunner,
)
from synapse_lsp.config import Settings, SettingsSource, as_source
from synapse_lsp.errors import ShellError
from synapse_lsp.events import FileDiff
from synapse_lsp.files import ChangeRecorder, DiskFiles, FileGateway
from synapse_lsp.output import bound_text
from synapse_lsp.shell import SOCKET_ENV, ShellResult, ShellSession

# Variables a fresh bash sets itself: not carried into a re-run outside the sandbox.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PROMPT_COMMAND", "PS1", "PS2"})
# Nor variables that change which program runs or what it loads: the user allowed the
# command line they were shown, not one a sandboxed `export` redirected (a `git`
# function, PATH=./bin:…, GIT_CONFIG_* hooks, LD_PRELOAD, BASH_ENV…).
# The recorder of the tool call this task is running (set by `route`; built-ins write
# through it, so the call's diffs are known without asking each command).
_RECORDER: contextvars.ContextVar[ChangeRecorder | None] = contextvars.ContextVar(
    "synapse_change_recorder", default=None
)
_LOADER = re.compile(r"LD_.*|GCONV_PATH|LOCPATH|NLSPATH|HOSTALIASES|RESOLV_HOST_CONF|MALLOC_.*")
# The session's exports an escalated re-run carries: an allowlist (a denylist of names
# that redirect programs cannot be complete: XDG_*, GIT_*, EDITOR, PAGER, LD_*, ...).
_CARRIED = re.compile(r"LANG|LANGUAGE|LC_[A-Z_]+|TZ|TERM|COLUMNS|LINES")

# A built-in's or extension's words that bash would change (variables, `~`, globs,
# braces, `$(…)`, backticks, process substitution): those lines are expanded by the
# session's bash; the rest split the same either way (`cmdline.split_argv`).
_EXPANDS = re.compile(r"[$`~*?\[{]|[<>]\(")
_FILE_WRITERS = frozenset({"write", "edit"})
# A list item starting with one of these is part of a compound command: not cut there.
_COMPOUND = frozenset(
    {"if", "then", "else", "elif", "fi", "while", "until", "for", "do", "done", "case", "esac",
     "select", "function", "!", "time", "coproc", "[[", "}", ")"}
)  # fmt: skip

_BASH_WRAPPED = re.compile(
    r"^Bash\s*\(\s*command\s*=\s*(?P<q>[\"'])(?P<inner>.*)(?P=q)"
    r"(?:\s*,\s*restart\s*=\s*\w+)?\s*\)$",
    re.S,
)
# Two-word aliases -> built-in name.
ALIASES: dict[tuple[str, str], str] = {
    ("tools", "search"): "command:search",
    ("skill", "search"): "skill:search",
    ("skill", "load"): "skill:load",
    ("skill", "reinforce"): "skill:reinforce",
}
SINGLE_ALIASES: dict[str, str] = {"todo": "plan"}
# Words that open shell syntax, not a command with a `--help` (`for --help` is nonsense).
_SHELL_SYNTAX = frozenset(
    {"for", "while", "until", "if", "case", "select", "function", "{", "(", "((", "[[", "!", "time"}
)
EXTENSION_PREFIXES = ("mcp:", "skill:")
# `bash` alone (or only asking for an interactive/login shell) would wait for input that
# never comes: every command already runs in a persistent bash.
_BARE_SHELLS = frozenset(
    {("bash",), ("sh",), ("bash", "-i"), ("bash", "-l"), ("bash", "--login"), ("bash", "-il")}
)


@runtime_checkable
class ExtensionDirectory(Protocol):
    """What an extension lookup may also say, for not-found hints (the registry does)."""

    def command_names(self) -> list[str]: ...

    def extension_sources(self) -> dict[str, list[str]]: ...


@runtime_checkable
class WithholdsServers(Protocol):
    """An extension lookup that knows of the folder's servers it does not load (the
    registry: an untrusted folder's own mcp_servers.json)."""

    def withheld_servers(self) -> str | None: ...


@dataclass
class RouteResult:
    """What happened, for faces and tests; `text` is exactly what the model is given."""

    command: str
    layer: Layer
    stdout: str
    stderr: str
    exit_code: int
    is_error: bool
    category: FailureCategory | None
    duration: float
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    full_output_path: Path | None = None
    diffs: tuple[FileDiff, ...] = ()


class BashRouter:
    """Routes command lines for one shell session. Cheap to `derive` per chat session."""

    def __init__(
        self,
        shell: ShellSession,
        settings: Settings | SettingsSource,
        *,
        files: FileGateway | None = None,
        extensions: CommandLookup | None = None,
        subagent: SubAgentRunner | None = None,
        in_subagent: bool = False,
        permission: PermissionGate | None = None,
        state: dict[str, Any] | None = None,
        builtins: dict[str, Command] | None = None,
        before_command: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.shell = shell
        # Awaited before each command line runs (a chat session waits there for the
        # checkpoint of the folder before its turn).
        self.before_command = before_command
        self.settings_source = as_source(settings)
        self.files: FileGateway = files or DiskFiles()
        self.extensions = extensions
        self.subagent = subagent
        self.in_subagent = in_subagent
        self.permission = permission
        self.state: dict[str, Any] = {} if state is None else state
        self._env_cache: tuple[tuple[int, str | None, str | None], dict[str, str]] | None = None
        self.builtins: dict[str, Command] = (
            builtins if builtins is not None else {c.name: c for c in default_builtins()}
        )

    @property
    def settings(self) -> Settings:
        """The live settings, read at use (see `config.LiveSettings`)."""
        return self.settings_source()

    def register(self, command: Command) -> None:
        self.builtins[command.name] = command

    def derive(self, **changes: Any) -> BashRouter:
        """A router on the same built-ins with some fields replaced (`shell` too:
        each chat session gets its own shell so sessions can run concurrently)."""
        fields_: dict[str, Any] = {
            "shell": self.shell,
            "settings": self.settings_source,
            "files": self.files,
            "extensions": self.extensions,
            "subagent": self.subagent,
            "in_subagent": self.in_subagent,
            "permission": self.permission,
            "state": self.state,
            "builtins": self.builtins,
            "before_command": self.before_command,
        }
        unknown = set(changes) - set(fields_)
        if unknown:
            raise TypeError(f"derive() got unknown fields: {sorted(unknown)}")
        fields_.update(changes)
        shell = fields_.pop("shell")
        settings = fields_.pop("settings")
        return BashRouter(shell, settings, **fields_)

    # ----------------------------------------------------------------- routing

    def layer_of(self, command: str) -> Layer:
        """The layer a line would run in (no side effects)."""
        return self._resolve(command.strip())[0]

    async def route(
        self,
        command: str,
        *,
        restart: bool = False,
        on_output: OutputSink | None = None,
        emit: Callable[[Any], None] | None = None,
        _checked: bool = False,
    ) -> RouteResult:
        """Run one command line. Cancelling the awaiting task cancels the inner work,
        including a restart in progress, and leaves the session usable. The permission
        gate is asked once, before anything runs, about every step of the line
        (`_checked`: the rest of a line already asked about). The result's `diffs` are
        what the line's built-ins changed (`edit a … && write b …`: both files)."""
        if _checked:
            return await self._route(command, restart, on_output, emit, _checked)
        if self.before_command is not None:
            await self.before_command()
        # Buffers and disk agree before a command that reads the disk: the editor saves
        # the agent's edits first, or the model is told what differs (lsp/editor_files).
        note = ""
        reconcile = getattr(self.files, "reconcile", None)
        if reconcile is not None and self._reads_disk(command):
            note = await reconcile()
        recorder = ChangeRecorder(self.files)
        token = _RECORDER.set(recorder)  # per task: parallel task:* calls keep theirs
        try:
            routed = await self._route(command, restart, on_output, emit, _checked)
        finally:
            _RECORDER.reset(token)
        routed.diffs = recorder.diffs()
        unsaved = getattr(self.files, "unsaved_note", None)
        if routed.diffs and unsaved is not None:
            note += unsaved()  # an edit that is in the editor only, so far
        if note:
            routed.stderr += note
            routed.text = routed.text.rstrip("\n") + "\n" + note.strip("\n") + "\n"
        return routed

    def _reads_disk(self, command: str) -> bool:
        """Whether a line may read files from disk: all but a lone file built-in (those
        read the editor's buffers)."""
        line = command.strip()
        layer, _ = self._resolve(line)
        return layer is not Layer.AGENT or cmdline.split_top_level(line).operator is not None

    async def _route(
        self,
        command: str,
        restart: bool,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
        _checked: bool,
    ) -> RouteResult:
        started = time.perf_counter()
        if restart:
            await self.shell.restart()
            if not command.strip():
                return self._finish(
                    command, Layer.NATIVE, CommandOutput("Shell restarted.\n"), started
                )
        line = command.strip()
        misuse = self._misuse(line)
        if misuse is not None:
            return self._finish(command, Layer.AGENT, misuse, started)
        limit = self.settings.max_command_bytes
        if len(line) > limit // 4 and len(line.encode("utf-8", "surrogatepass")) > limit:
            return self._finish(command, Layer.NATIVE, _too_long(line, limit), started)
        line = self._strip_bash_prefix(line)
        layer, target = self._resolve(line)
        if self.in_subagent and target is not None and target.name == "task":
            # The recursion guard comes before any permission rule (SPEC §4): a nested
            # task:* is refused as such, and nothing else on the line runs.
            word = cmdline.first_word(line)
            output = await self._invoke(target, [word], None, on_output, emit)
            return self._finish(command, layer, output, started)
        if self.permission is not None and not _checked:
            steps = await self._plan(line, layer)
            syntax = await _syntax_error(line) if _unreadable(steps) else None
            if syntax is not None:  # bash would refuse it too: say what bash says, unasked
                hint = (
                    "Hint: bash cannot parse this line (nothing ran): fix its syntax "
                    "(quotes, brackets, `then`/`fi`, `do`/`done`) and retry."
                )
                out = CommandOutput(
                    stderr=syntax,
                    exit_code=2,
                    category=FailureCategory.INVALID_USAGE,
                    data={"hint": hint},
                )
                return self._finish(command, layer, out, started)
            denied = await self.permission.check(line, layer, self.shell.cwd, steps)
            if denied is not None:
                out = CommandOutput(
                    stderr=f"Not run: {denied}\n",
                    exit_code=126,
                    category=FailureCategory.PERMISSION_DENIED,
                )
                return self._finish(command, layer, out, started)
        trailing_write = self._trailing_write(line) if layer is Layer.NATIVE else None  # cached
        if trailing_write is not None:
            native, write_line = trailing_write
            output = await self._native_into_write(native, write_line, on_output, emit)
            return self._finish(command, Layer.AGENT, output, started)
        if layer is Layer.NATIVE:
            cut = self._native_then_in_process(line)
            if cut is not None:
                return await self._native_list(command, cut, on_output, emit, started)
            return await self._run_native(command, line, on_output, started)
        assert target is not None
        output = await self._run_in_process(target, line, on_output, emit)
        routed = self._finish(
            command, layer, output, started, bounded=output.bounded, paged=output.paged
        )
        routed.full_output_path = output.full_output_path
        return routed

    def _misuse(self, line: str) -> CommandOutput | None:
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

    def _strip_bash_prefix(self, line: str) -> str:
        """`bash echo hi > f` -> `echo hi > f`; `bash -c …` and `bash script.sh` are kept."""
        if not line.startswith("bash ") and not line.startswith("bash\t"):
            return line
        rest = line[5:].lstrip()
        second = cmdline.first_word(rest)
        if not second or second.startswith("-") or second.endswith((".sh", ".bash")):
            return line
        if "/" in second or (self.shell.cwd / second).is_file():
            return line  # `bash ./script` / `bash script` runs a script file
        return self._strip_bash_prefix(rest)

    def _resolve(self, line: str) -> tuple[Layer, Command | None]:
        word = cmdline.first_word(line)
        name = SINGLE_ALIASES.get(word, word)
        if name in self.builtins:
            return Layer.AGENT, self.builtins[name]
        if name.startswith("task:") and "task" in self.builtins:
            return Layer.AGENT, self.builtins["task"]
        rest_words = line.split(maxsplit=2)
        if len(rest_words) >= 2 and (word, rest_words[1]) in ALIASES:
            alias = ALIASES[(word, rest_words[1])]
            if alias in self.builtins:
                return Layer.AGENT, self.builtins[alias]
        if name.startswith(EXTENSION_PREFIXES):
            found = None
            if self.extensions is not None and name.count(":") >= 2:
                found = self.extensions.get(name)
            return Layer.EXTENSION, found or _NotFound(name, self.not_found_hint)
        return Layer.NATIVE, None

    async def _plan(self, line: str, layer: Layer) -> list[Step]:
        """The steps of `line` with their layers, as `route` will run them (off the
        event loop for a long line)."""
        if len(line) > 64 * 1024:
            return await asyncio.to_thread(self._steps, line, layer)
        return self._steps(line, layer)

    def _steps(self, line: str, layer: Layer) -> list[Step]:
        if layer is Layer.NATIVE and (cut := self._native_then_in_process(line)) is not None:
            rest = cut[2]
            return [Step(cut[0], Layer.NATIVE), *self._steps(rest, self._resolve(rest)[0])]
        if layer is Layer.NATIVE:
            trailing = self._trailing_write(line)
            if trailing is None:
                return [Step(line, Layer.NATIVE)]
            return [Step(trailing[0], Layer.NATIVE), Step(trailing[1], Layer.AGENT)]
        heredoc = cmdline.extract_heredoc(line)
        if heredoc is not None:
            return [Step(line, layer), *_substituted(heredoc[0])]
        split = cmdline.split_top_level(line)
        # `mcp:a:b $(cmd)`: bash runs `cmd` to expand the arguments (`_words`).
        steps = [Step(split.head.strip(), layer), *_substituted(split.head)]
        rest = split.rest.strip()
        if split.operator is None or not rest:
            return steps
        if split.operator == "|":
            trailing = self._trailing_write("true | " + rest)
            if trailing is None:
                return [*steps, Step(rest, Layer.NATIVE)]
            middle = trailing[0][len("true | ") :].strip() if trailing[0] != "true" else ""
            native = [Step(middle, Layer.NATIVE)] if middle else []
            return [*steps, *native, Step(trailing[1], Layer.AGENT)]
        return steps + self._steps(rest, self._resolve(rest)[0])

    def _native_then_in_process(self, line: str) -> tuple[str, str, str] | None:
        """`cd src; read main.py`, `make && write notes.md done`: a native list whose
        later item is a built-in -> (native head, operator, the rest), so the rest runs
        as if it were its own line (bash alone would run its own `read`, or not find
        `write`). Extensions need no cut: bash runs them through their wrappers. Only
        plain lists: nothing is cut inside a compound command (`while read l; do …`),
        a heredoc, or after a pipe, and an item with a redirection
        (`read -r v <<< "$x"`) stays bash's."""
        if "<<" in line or len(line) > 64 * 1024:
            return None
        parts = cmdline.split_all(line)
        if len(parts) < 2:
            return None
        offset = 0
        for index, (text, op) in enumerate(parts):
            words = text.split(maxsplit=1)
            if words and (words[0] in _COMPOUND or words[0].startswith(("(", "{"))):
                return None
            if index > 0 and parts[index - 1][1] in (";", "&&", "||", "\n"):
                item = text.strip()
                if (
                    item
                    and self._resolve(item)[0] is Layer.AGENT
                    and not cmdline.has_redirection(item)
                ):
                    previous = parts[index - 1][1]
                    assert previous is not None
                    head = line[: offset - len(previous)]
                    return head, previous, line[offset:]
            offset += len(text) + len(op or "")
        return None

    async def _native_list(
        self,
        command: str,
        cut: tuple[str, str, str],
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
        started: float,
    ) -> RouteResult:
        """The native head of a list, then the rest as its own (already checked) line."""
        head, op, rest = cut
        first = await self._run_native(head, head, on_output, started)
        ok = first.exit_code == 0
        if (
            (op == "&&" and not ok)
            or (op == "||" and ok)
            or first.category
            in (
                FailureCategory.CANCELLED,
                FailureCategory.TIMEOUT,
            )
        ):
            return self._finish(command, Layer.NATIVE, _as_output(first), started)
        tail = await self.route(rest, on_output=on_output, emit=emit, _checked=True)
        out = CommandOutput(
            stdout=first.stdout + tail.stdout,
            stderr=first.stderr + tail.stderr,
            exit_code=tail.exit_code,
            category=tail.category,
            data={**first.data, **tail.data},
        )
        return self._finish(command, tail.layer, out, started)

    def _trailing_write(self, line: str) -> tuple[str, str] | None:
        """`cmd … | write <path>` -> (`cmd …`, `write <path>`): SPEC's `write` takes the
        pipe's content. Only `write` with one path as the last stage of a one-line
        pipeline (a heredoc body may follow the line); anything else stays bash's."""
        if "write" not in line or "write" not in self.builtins:
            return None
        first, newline, body = line.partition("\n")
        if newline and "<<" not in first:
            return None
        parts = cmdline.split_all(first)
        if len(parts) < 2 or parts[-2][1] != "|":
            return None
        last = parts[-1][0].strip()
        try:
            argv = cmdline.split_argv(last)
        except ValueError:
            return None
        if len(argv) != 2 or argv[0] != "write" or argv[1].startswith("-"):
            return None
        if cmdline.has_redirection(last) or any(op in ("&", "|&") for _, op in parts[:-1]):
            return None
        cut = first.rstrip().rfind(parts[-1][0].strip())
        head = first[:cut].rstrip()
        if cut < 0 or not head.endswith("|"):
            return None
        native = head[:-1].rstrip()
        return (native + newline + body if newline else native), last

    async def _native_into_write(
        self,
        native: str,
        write_line: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        """`cmd | write f`: run `cmd` with its stdout in a private file, then `write f`
        with that as its content. A failing `cmd` writes nothing (an empty or partial
        file would replace what was there)."""
        view = self.shell.view
        folder = view.scratch("synapse-pipe-")  # where the shell writes, seen by both
        target = folder / "stdout"
        try:
            script = f"{{ {native.rstrip()}\n}} > {cmdline.quote(str(view.seen(target)))}"
            result = await self.shell.run(
                script, timeout=self.settings.command_timeout, on_output=on_output
            )
            if result.exit_code != 0 or result.timed_out or result.cancelled:
                why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                return CommandOutput(
                    result.stdout,
                    result.stderr + f"write: not written: the command before `| write` {why}\n",
                    result.exit_code or 1,
                    FailureCategory.TIMEOUT
                    if result.timed_out
                    else FailureCategory.EXECUTION_ERROR,
                )
            size = target.stat().st_size if target.exists() else 0
            limit = self.settings.max_command_bytes
            if size > limit:
                return CommandOutput.usage_error(
                    "write",
                    f"the piped content is {size} bytes, over the {limit}-byte limit "
                    "(setting max_command_bytes); write it with a native command instead",
                )
            content = target.read_bytes().decode("utf-8", errors="replace") if size else ""
            write = self.builtins["write"]
            words = await self._words(write_line, write, on_output)
            if isinstance(words, CommandOutput):
                return words
            output = await self._invoke(write, words, content, None, emit)
            output.stdout = result.stdout + output.stdout
            output.stderr = result.stderr + output.stderr
            return output
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    async def _run_native(
        self, command: str, line: str, on_output: OutputSink | None, started: float
    ) -> RouteResult:
        gate = self.permission if isinstance(self.permission, SandboxEscalation) else None
        note = ""
        outside = gate is not None and (
            await asyncio.to_thread(gate.runs_outside, line)  # a huge line: off the loop
            if len(line) > 64 * 1024
            else gate.runs_outside(line)
        )
        if gate is not None and outside:
            env = await self._outside_env()
            result = await self._run_outside(line, on_output, env)
            told = env.describe()
            note = (
                f"\n[ran outside the sandbox, as the user allowed{'; ' + told if told else ''}]\n"
            )
        else:
            result = await self.shell.run(
                line, timeout=self.settings.command_timeout, on_output=on_output
            )
            why = self._sandbox_refusal(result)
            if why is not None:
                env = await self._outside_env() if gate is not None else OutsideEnv()
                if gate is not None and await gate.escalate(line, self.shell.cwd, why, env):
                    result = await self._run_outside(line, on_output, env)
                    told = env.describe()
                    note = (
                        f"\n[the sandbox blocked the first attempt ({why}); it was run again "
                        "outside the sandbox, as the user allowed: the first attempt may have "
                        f"partly run{'; ' + told if told else ''}]\n"
                    )
                else:
                    note = (
                        f"\n[blocked by the sandbox: {why}. Running it outside the sandbox "
                        "was not allowed; work inside the workspace, or ask the user]\n"
                    )
        category: FailureCategory | None = None
        if result.timed_out:
            category = FailureCategory.TIMEOUT
        elif result.cancelled:
            category = FailureCategory.CANCELLED
        elif result.exit_code == 127:
            category = FailureCategory.NOT_FOUND
        elif result.exit_code != 0:
            category = FailureCategory.EXECUTION_ERROR
        out = CommandOutput(result.stdout, result.stderr, result.exit_code, category)
        if result.timed_out:
            out.stderr += (
                f"\n[timed out after {self.settings.command_timeout:g} s: the command's processes "
                "were killed; the shell session is intact]\n"
            )
        elif getattr(result, "shell_exited", False) and result.exit_code != 0:
            out.data["hint"] = (
                "Hint: The command ended the session's shell (`exit`/`exec`), so a fresh shell "
                "starts with the next command: variables, functions and aliases set earlier "
                "are gone. To stop a script early, run it as `bash script.sh` (its `exit` "
                "then ends only the script)."
            )
        elif category is FailureCategory.NOT_FOUND:
            base = cmdline.base_command(line)
            if base and f"{base}: command not found" in result.stderr:
                out.data["hint"] = self.not_found_hint(base)
        out.stderr += note
        routed = self._finish(command, Layer.NATIVE, out, started, bounded=True)
        routed.full_output_path = result.full_output_path
        return routed

    def _sandbox_refusal(self, result: ShellResult) -> str | None:
        """Why the sandbox made `result` fail (`permissions.sandbox_refusal`), or None."""
        status = self.shell.sandbox
        if not status.sandboxed or result.exit_code == 0 or result.cancelled:
            return None
        from synapse_lsp.permissions import sandbox_refusal

        return sandbox_refusal(
            result.stdout + "\n" + result.stderr,
            result.exit_code,
            network_off=status.network == "off",
            writable=self.shell.writable_paths,
        )

    async def _run_outside(
        self, line: str, on_output: OutputSink | None, env: OutsideEnv
    ) -> ShellResult:
        """Run `line` in a one-off bash outside the sandbox, in the session's cwd, with
        the shell's starting environment plus what `env` carries (what it changes there
        does not carry back)."""
        carried = dict(env.carried)
        if env.with_session_path and env.session_path is not None:
            carried["PATH"] = env.session_path
        source = self.settings_source
        outside = ShellSession(
            self.shell.cwd,
            lambda: replace(source(), sandbox="full-access"),
            env=carried,
            wrappers=getattr(self.shell, "wrappers", None),
        )
        try:
            return await outside.run(
                line, timeout=self.settings.command_timeout, on_output=on_output
            )
        finally:
            await outside.close()

    async def _outside_env(self) -> OutsideEnv:
        """What a re-run outside the sandbox gets of the sandboxed shell's exports (read
        through a file in its private /tmp): the allowlist `_CARRIED`; the rest of what
        the session added or changed is named as dropped; its PATH is offered."""
        tmp = self.shell.private_tmp
        if tmp is None:
            return OutsideEnv()
        name = f".synapse-env-{os.getpid()}-{time.monotonic_ns()}"
        try:
            await self.shell.run(f"env -0 > /tmp/{name}", timeout=10.0)
            raw = (tmp / name).read_bytes()
        except (OSError, ShellError):
            return OutsideEnv()
        finally:
            with contextlib.suppress(OSError):
                (tmp / name).unlink()
        session: dict[str, str] = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
            if sep and key:
                session[key] = value
        start = self.shell.starting_environment()
        carried = {k: v for k, v in session.items() if _CARRIED.fullmatch(k)}
        dropped = sorted(
            _shown_name(k)
            for k, v in session.items()
            if k not in _SHELL_OWN
            and k not in ("PATH", "TMPDIR")
            and not _CARRIED.fullmatch(k)
            and start.get(k) != v
        )
        path = session.get("PATH")
        return OutsideEnv(
            carried=carried,
            dropped=tuple(dropped),
            session_path=path if path is not None and path != start.get("PATH") else None,
        )

    async def _run_in_process(
        self,
        target: Command,
        line: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        """Run a built-in or extension command; honours a heredoc and a trailing `| …`/`&& …`."""
        stdin: str | None = None
        heredoc = cmdline.extract_heredoc(line)
        if heredoc is not None:
            line, stdin = heredoc
        split = cmdline.split_top_level(line)
        head = split.head
        if cmdline.has_redirection(head):
            return CommandOutput.usage_error(
                target.name,
                "built-in and extension commands take no < or > redirections; pass content as "
                "an argument or a heredoc, or pipe the output: `… | cat > file`",
            )
        words = await self._words(head, target, on_output)
        if isinstance(words, CommandOutput):
            return words
        argv = _apply_alias(words)
        if split.operator not in (None, "|", "&&", "||", ";", "\n"):
            return CommandOutput.usage_error(
                target.name, f"`{split.operator.strip()}` after a built-in is not supported"
            )
        piped = split.operator == "|" and bool(split.rest.strip())
        output = await self._invoke(target, argv, stdin, on_output, emit, piped=piped)
        if split.operator is None or not split.rest.strip():
            return output
        if split.operator == "|":
            return await self._pipe_into_shell(output, split.rest, on_output, emit)
        ok = output.exit_code == 0
        if (split.operator == "&&" and not ok) or (split.operator == "||" and ok):
            return output
        rest = split.rest
        if "$?" in rest:  # the rest runs in bash: `$?` is this command's status there too
            rest = f"(exit {output.exit_code})\n{rest}"
        tail = await self.route(rest, on_output=on_output, emit=emit, _checked=True)
        return CommandOutput(
            stdout=output.stdout + tail.stdout,
            stderr=output.stderr + tail.stderr,
            exit_code=tail.exit_code,
            category=tail.category,
            data={**output.data, **tail.data},
        )

    async def _words(
        self, head: str, target: Command, on_output: OutputSink | None
    ) -> list[str] | CommandOutput:
        """The words of a built-in's or extension's command line, expanded as bash
        expands any command's: `mcp:a:b "$HOME" *.txt $(date)` gets exactly the
        arguments it would get in `true; mcp:a:b …`. A line with nothing to expand is
        split here; one with something is expanded by the session's bash (its
        variables, cwd and sandbox), the words coming back NUL-separated in a file.
        A `write`/`edit` whose path changed in the expansion is put to the permission
        gate again with the expanded words (the gate judged the literal line)."""
        try:
            literal = cmdline.split_argv(head)
        except ValueError as exc:
            if not _EXPANDS.search(head):
                return CommandOutput.usage_error(
                    target.name, f"cannot parse the command line: {exc}"
                )
            literal = None
        if literal is not None and not _EXPANDS.search(head):
            return literal
        text = head.lstrip()
        word = cmdline.first_word(text)
        if not word or not text.startswith(word):
            if literal is None:
                return CommandOutput.usage_error(target.name, "cannot parse the command line")
            return literal
        view = self.shell.view
        folder = view.scratch("synapse-argv-")
        out = folder / "argv"
        script = (
            '__synapse_argv() { printf \'%s\\0\' "$#" "$@" > '
            + cmdline.quote(str(view.seen(out)))
            + "; }\n"
            + f"__synapse_argv{text[len(word) :]}\n"
            + "unset -f __synapse_argv"
        )
        try:
            result = await self.shell.run(script, timeout=self.settings.command_timeout)
            raw = out.read_bytes() if out.is_file() else None
        except (ShellError, OSError) as exc:
            return CommandOutput(
                stderr=f"{target.name}: cannot expand the arguments: {exc}\n",
                exit_code=1,
                category=FailureCategory.EXECUTION_ERROR,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result.cancelled or result.timed_out:
            return CommandOutput(
                result.stdout,
                result.stderr
                + f"{target.name}: not run: expanding its arguments was "
                + ("cancelled" if result.cancelled else "timed out")
                + "\n",
                result.exit_code or 1,
                FailureCategory.CANCELLED if result.cancelled else FailureCategory.TIMEOUT,
            )
        if raw is None:
            return CommandOutput.usage_error(
                target.name,
                "bash could not expand the arguments"
                + (f": {result.stderr.strip()}" if result.stderr.strip() else ""),
            )
        if result.stderr and on_output is not None:
            on_output("stderr", result.stderr)  # what a `$(…)` said on its stderr
        items = raw.decode("utf-8", "surrogateescape").split("\0")
        count = int(items[0]) if items and items[0].isdigit() else 0
        words = [word, *items[1 : 1 + count]]
        if target.name in _FILE_WRITERS and words != literal and self.permission is not None:
            line = " ".join(cmdline.quote(w) for w in words)
            denied = await self.permission.check(
                line, Layer.AGENT, self.shell.cwd, [Step(line, Layer.AGENT)]
            )
            if denied is not None:
                return CommandOutput(
                    stderr=f"Not run: {denied}\n",
                    exit_code=126,
                    category=FailureCategory.PERMISSION_DENIED,
                )
        return words

    async def _invoke(
        self,
        target: Command,
        argv: list[str],
        stdin: str | None,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
        *,
        piped: bool = False,
    ) -> CommandOutput:
        is_extension = isinstance(target, _NotFound) or (
            target.name.startswith(EXTENSION_PREFIXES) and target.name.count(":") >= 2
        )
        if not is_extension and len(argv) >= 2 and argv[1] in ("-h", "--help"):
            if argv[1] == "-h":
                return CommandOutput(f"{target.usage}\n{target.summary}\n")
            return CommandOutput(target.help().rstrip("\n") + "\n")
        # A skill script is a program the session runs: like any child of that bash, it
        # sees what was `export`ed there. Other commands don't start a program.
        is_script = is_extension and target.name.startswith("skill:")
        ctx = CommandContext(
            cwd=self.shell.cwd,
            settings=self.settings,
            files=_RECORDER.get() or self.files,
            env=await self._session_env() if is_script else self._env(),
            stdin=stdin,
            on_output=on_output,
            subagent=self.subagent,
            in_subagent=self.in_subagent,
            state=self.state,
            emit=emit,
            piped=piped,
            roots=self.shell.roots,
            view=self.shell.view,
            extension_dirs=wrappers.visible
            if (wrappers := getattr(self.shell, "wrappers", None)) is not None
            else (),
        )
        args = argv if target.name == "task" or is_extension else argv[1:]
        return await target.run(args, ctx)

    async def _pipe_into_shell(
        self,
        output: CommandOutput,
        rest: str,
        on_output: OutputSink | None,
        emit: Callable[[Any], None] | None,
    ) -> CommandOutput:
        """`read f | grep x`: the built-in's stdout becomes the native pipeline's stdin;
        `read f | write g` / `read f | sort | write g`: the last stage is `write`."""
        if output.exit_code != 0:
            return output
        whole = output.stdout_path if output.stdout_path and output.stdout_path.is_file() else None
        trailing = self._trailing_write("true | " + rest.strip())
        middle = ""
        if trailing is not None:
            middle = trailing[0][len("true | ") :].strip() if trailing[0] != "true" else ""
            if not middle:
                write = self.builtins["write"]
                words = await self._words(trailing[1], write, on_output)
                if isinstance(words, CommandOutput):
                    return words
                content = output.stdout
                if whole is not None:  # the command's stdout was cut for the model
                    content = whole.read_bytes().decode("utf-8", errors="replace")
                return await self._invoke(write, words, content, None, emit)
        view = self.shell.view
        folder = view.scratch("synapse-pipe-")  # the shell reads it: seen by both
        name = folder / "stdin.txt"
        try:
            if whole is None:
                with name.open("w", encoding="utf-8", errors="surrogateescape") as fh:
                    fh.write(output.stdout)
            name_for_pipe = str(view.seen(whole if whole is not None else name))
            if trailing is not None:
                fed = f"{{ {middle}\n}} < {cmdline.quote(name_for_pipe)}"
                return await self._native_into_write(fed, trailing[1], on_output, emit)
            native = f"{{ {rest.strip()}\n}} < {cmdline.quote(name_for_pipe)}"
            result = await self.shell.run(
                native, timeout=self.settings.command_timeout, on_output=on_output
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        category = None if result.exit_code == 0 else FailureCategory.EXECUTION_ERROR
        return CommandOutput(
            result.stdout, output.stderr + result.stderr, result.exit_code, category
        )

    def not_found_hint(self, name: str) -> str:
        """The hint for a command nobody provides (a typo, an unknown `mcp:`/`skill:`
        name): its `--help` would fail the same way, so point at `command:search` and
        what is close, and name the configured MCP servers and skills."""
        directory = self.extensions if isinstance(self.extensions, ExtensionDirectory) else None
        extension_names: list[str] = directory.command_names() if directory is not None else []
        sources: dict[str, list[str]] = (
            directory.extension_sources() if directory is not None else {}
        )
        candidates = [*self.builtins, *SINGLE_ALIASES, *extension_names]
        if name.startswith(EXTENSION_PREFIXES):
            prefix = name.rstrip(":") + ":"
            close = sorted(c for c in extension_names if c.startswith(prefix))[:5]
        else:
            candidates += _path_commands(self._env().get("PATH", ""))
            close = []
        matches = difflib.get_close_matches(name, set(candidates), n=10, cutoff=0.6)
        # a transposition (`gti` -> `git`) first, then the closest length
        matches.sort(key=lambda c: (sorted(c) != sorted(name), abs(len(c) - len(name))))
        for match in matches[:3]:
            if match not in close and match != name:
                close.append(match)
        parts = [f"Hint: `{name}` is not a command here, so `{name} --help` would fail too."]
        if close:
            parts.append("Did you mean " + " or ".join(f"`{c}`" for c in close[:5]) + "?")
        servers = sources.get("mcp", [])
        skills = sources.get("skill", [])
        withheld = (
            self.extensions.withheld_servers()
            if isinstance(self.extensions, WithholdsServers)
            else None
        )
        known = [
            "configured MCP servers: " + (", ".join(servers) if servers else "none"),
            *([withheld] if withheld else []),
            "skills: " + (", ".join(skills[:20]) if skills else "none"),
        ]
        parts.append(
            "Find extension commands with `command:search <keyword>` (`command:search` alone "
            f"lists them all; {'; '.join(known)})."
        )
        return " ".join(parts)

    def _env(self) -> dict[str, str]:
        """The environment in-process commands see (copied per call: commands may change
        theirs). Rebuilt when the process environment gains or loses a variable or changes
        PATH/SYNAPSE_HOME: copying `os.environ` (which decodes every entry) was most of a
        built-in's routing cost. Secrets (model credentials, `secretEnv`) are left out:
        skills and in-process commands never see them (`synapse_lsp.secrets`)."""
        from synapse_lsp.secrets import child_env

        settings = self.settings
        secrets_key = "\0".join((settings.api_key_env, *settings.secret_env))
        home = os.environ.get("SYNAPSE_HOME")
        key = len(os.environ), os.environ.get("PATH"), f"{home}\0{secrets_key}"
        if self._env_cache is None or self._env_cache[0] != key:
            env = child_env(os.environ, settings)
            # The shell's own: its registry's wrappers first, its socket (`ShellSession`).
            wrappers = getattr(self.shell, "wrappers", None)
            own = [str(wrappers.bin_dir)] if wrappers is not None else []
            env["PATH"] = os.pathsep.join([*own, str(settings.bin_dir), env.get("PATH", "")])
            env.pop(SOCKET_ENV, None)
            if wrappers is not None:
                env[SOCKET_ENV] = str(wrappers.socket)
            env["SYNAPSE_HOME"] = str(self.settings.synapse_home)
            self._env_cache = (key, env)
        return dict(self._env_cache[1])

    async def _session_env(self) -> dict[str, str]:
        """The variables exported in the session's bash, read with builtins only (no fork;
        ~2 ms in all) into a file (so no output bound applies); the process environment if
        bash can't say. Secrets are left out either way (`synapse_lsp.secrets`)."""
        from synapse_lsp.secrets import child_env

        # A sandboxed bash sees its private /tmp only: the file goes there.
        private = self.shell.private_tmp
        view = self.shell.view
        folder = view.scratch("synapse-env-")
        values = folder / "values"
        seen = view.seen(folder)
        script = (
            f"compgen -e > {cmdline.quote(str(seen / 'names'))}; "
            "while IFS= read -r __synapse_n; do "
            'printf "%s=%s\\0" "$__synapse_n" "${!__synapse_n}"; '
            f"done < {cmdline.quote(str(seen / 'names'))} > {cmdline.quote(str(seen / 'values'))}; "
            "unset __synapse_n"
        )
        try:
            result = await self.shell.run(script, timeout=10)
            raw = values.read_bytes() if result.exit_code == 0 else b""
        except (ShellError, OSError):
            raw = b""
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        env: dict[str, str] = {}
        for entry in raw.decode("utf-8", errors="surrogateescape").split("\0"):
            key, sep, value = entry.partition("=")
            # Sandboxed, the script starts through bwrap, which runs outside the sandbox:
            # nothing the sandbox exported may change what the loader does there.
            if sep and key and not (private is not None and _LOADER.fullmatch(key)):
                env[key] = value
        return child_env(env, self.settings) if env else self._env()

    # ------------------------------------------------------------ result text

    def _finish(
        self,
        command: str,
        layer: Layer,
        out: CommandOutput,
        started: float,
        *,
        bounded: bool = False,
        paged: bool = False,
    ) -> RouteResult:
        stdout, stderr = out.stdout, out.stderr
        if not bounded:
            if not paged:
                stdout = bound_text(stdout, self.settings.output)[0]
            stderr = bound_text(stderr, self.settings.output)[0]
        is_error = out.exit_code != 0
        category = out.category
        if is_error and category is None:
            category = FailureCategory.EXECUTION_ERROR
        hint = out.data.get("hint")
        text = format_for_model(
            command,
            stdout,
            stderr,
            out.exit_code,
            category,
            hint if isinstance(hint, str) else None,
        )
        return RouteResult(
            command=command,
            layer=layer,
            stdout=stdout,
            stderr=stderr,
            exit_code=out.exit_code,
            is_error=is_error,
            category=category,
            duration=time.perf_counter() - started,
            text=text,
            data=out.data,
        )


def _unreadable(steps: list[Step]) -> bool:
    """A native step the parser does not vouch for (`bashparse`: the gate would ask)."""
    return any(s.layer is Layer.NATIVE and bashparse.parse(s.text).problem for s in steps)


async def _syntax_error(line: str) -> str | None:
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


def _shown_name(key: str) -> str:
    """An exported bash function's variable (`BASH_FUNC_cat%%`) as the user wrote it."""
    if key.startswith("BASH_FUNC_") and key.endswith("%%"):
        return f"{key[len('BASH_FUNC_') : -2]} (a function)"
    return key


def _as_output(routed: RouteResult) -> CommandOutput:
    return CommandOutput(
        routed.stdout, routed.stderr, routed.exit_code, routed.category, dict(routed.data)
    )


def _substituted(head: str) -> list[Step]:
    """The command substitutions of a built-in's or extension's words, as native steps:
    bash runs them when it expands the words (the gate judges them like any line)."""
    return [
        Step(inner.strip(), Layer.NATIVE) for inner in cmdline.substitutions(head) if inner.strip()
    ]


def _too_long(line: str, limit: int) -> CommandOutput:
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


def _apply_alias(argv: list[str]) -> list[str]:
    if len(argv) >= 2 and (argv[0], argv[1]) in ALIASES:
        return [ALIASES[(argv[0], argv[1])], *argv[2:]]
    if argv and argv[0] in SINGLE_ALIASES:
        return [SINGLE_ALIASES[argv[0]], *argv[1:]]
    return argv


def _quote_for_hint(inner: str) -> str:
    return '"' + inner.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path_commands(path: str) -> list[str]:
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
class _NotFound:
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
