"""BashRouter: decides each command line's layer and runs it there.

Layers (SPEC §2): Agent Shell built-ins run in-process; Extension Shell commands
(`mcp:*`, `skill:*`) go to the extension registry; everything else goes to the
persistent shell exactly as typed. The router returns a structured
`RouteResult` and, separately, the text the model sees."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from synapse_lsp import catalog, cmdline
from synapse_lsp.builtins import default_builtins
from synapse_lsp.commands import (
    Command,
    CommandLookup,
    CommandOutput,
    FailureCategory,
    Layer,
    McpHost,
    OutputSink,
    PermissionGate,
    Step,
    SubAgentRunner,
)
from synapse_lsp.config import Settings, SettingsSource, as_source
from synapse_lsp.files import ChangeRecorder, DiskFiles, FileGateway
from synapse_lsp.output import bound_text
from synapse_lsp.policy import hook_events, hooks
from synapse_lsp.router.base import (
    _RECORDER,
    EXTENSION_PREFIXES,
    RouteResult,
)
from synapse_lsp.router.inprocess import InProcessRunner
from synapse_lsp.router.native import NativeRunner
from synapse_lsp.router.tool_result import (
    NotFound,
    format_for_model,
    misuse,
    syntax_error,
    too_long,
    unreadable,
)
from synapse_lsp.shell import ShellSession

# A list item starting with one of these is part of a compound command: not cut there.
_COMPOUND = frozenset(
    {"if", "then", "else", "elif", "fi", "while", "until", "for", "do", "done", "case", "esac",
     "select", "function", "!", "time", "coproc", "[[", "}", ")"}
)  # fmt: skip


class BashRouter(NativeRunner, InProcessRunner):
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
        mcp_host: McpHost | None = None,
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
        self.mcp_host = mcp_host  # the chat session, for MCP servers' requests
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

    def _pipe_sink(self) -> Command | None:
        """The built-in that takes a pipe's content (`cmd | write f`), if this router
        has one."""
        return next((b for b in self.builtins.values() if catalog.of(b).pipe_sink), None)

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
            "mcp_host": self.mcp_host,
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
        connecting = getattr(self.extensions, "wait_for_pending", None)
        if connecting is not None and "mcp:" in command:
            # an MCP server the line calls (`$(mcp:db:q)` too) may still be connecting
            await connecting(self.settings.command_timeout, command)
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
        refused = misuse(line)
        if refused is not None:
            return self._finish(command, Layer.AGENT, refused, started)
        limit = self.settings.max_command_bytes
        if len(line) > limit // 4 and len(line.encode("utf-8", "surrogatepass")) > limit:
            return self._finish(command, Layer.NATIVE, too_long(line, limit), started)
        line = self._strip_bash_prefix(line)
        layer, target = self._resolve(line)
        if self.in_subagent and target is not None and catalog.of(target).starts_agent:
            # The recursion guard comes before any permission rule (SPEC §4): a nested
            # task:* is refused as such, and nothing else on the line runs.
            word = cmdline.first_word(line)
            output = await self._invoke(target, [word], None, on_output, emit)
            return self._finish(command, layer, output, started)
        if self.permission is not None and not _checked:
            steps = await self._plan(line, layer)
            syntax = await syntax_error(line) if unreadable(steps) else None
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
            replaced = hook_events.take(hooks.current(), line) if denied is not None else None
            if replaced is not None:  # a PreToolUse hook's updatedInput: gated afresh
                routed = await self._route(replaced, False, on_output, emit, False)
                routed.text = f"[{hook_events.REWRITTEN}{replaced}]\n{routed.text}"
                return routed
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
        name = word
        if word in self.builtins:
            return Layer.AGENT, self.builtins[word]
        # An alias (`todo`, `tools search`) or a prefixed call (`task:explore`).
        alias = catalog.canonical([word, *line.split(maxsplit=2)[1:2]])
        if alias is not None and alias[0] in self.builtins:
            return Layer.AGENT, self.builtins[alias[0]]
        if name.startswith(EXTENSION_PREFIXES):
            found = None
            if self.extensions is not None and name.count(":") >= 2:
                found = self.extensions.get(name)
            return Layer.EXTENSION, found or NotFound(name, self.not_found_hint)
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

    def _trailing_write(self, line: str) -> tuple[str, str] | None:
        """`cmd … | write <path>` -> (`cmd …`, `write <path>`): SPEC's `write` takes the
        pipe's content. Only `write` with one path as the last stage of a one-line
        pipeline (a heredoc body may follow the line); anything else stays bash's."""
        sink = self._pipe_sink()
        if sink is None or sink.name not in line:
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
        if len(argv) != 2 or argv[0] != sink.name or argv[1].startswith("-"):
            return None
        if cmdline.has_redirection(last) or any(op in ("&", "|&") for _, op in parts[:-1]):
            return None
        cut = first.rstrip().rfind(parts[-1][0].strip())
        head = first[:cut].rstrip()
        if cut < 0 or not head.endswith("|"):
            return None
        native = head[:-1].rstrip()
        return (native + newline + body if newline else native), last

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
            attachments=out.attachments,
        )


def _substituted(head: str) -> list[Step]:
    """The command substitutions of a built-in's or extension's words, as native steps:
    bash runs them when it expands the words (the gate judges them like any line)."""
    return [
        Step(inner.strip(), Layer.NATIVE) for inner in cmdline.substitutions(head) if inner.strip()
    ]
