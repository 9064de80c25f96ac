"""The router's in-process part: a built-in or extension command's words (expanded
by the session's bash when they need it), its call, and its output piped on into
the shell (`read f | grep x`)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from typing import Any

from synapse_lsp import catalog, cmdline
from synapse_lsp.commands import (
    Command,
    CommandContext,
    CommandOutput,
    FailureCategory,
    Layer,
    OutputSink,
    Step,
)
from synapse_lsp.errors import ShellError
from synapse_lsp.router.base import _RECORDER, EXTENSION_PREFIXES, RouterBase
from synapse_lsp.router.tool_result import (
    NotFound,
)

# A built-in's or extension's words that bash would change (variables, `~`, globs,
# braces, `$(…)`, backticks, process substitution): those lines are expanded by the
# session's bash; the rest split the same either way (`cmdline.split_argv`).
_EXPANDS = re.compile(r"[$`~*?\[{]|[<>]\(")


class InProcessRunner(RouterBase):
    """`BashRouter`'s built-in and extension calls (a mixin)."""

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
        argv = catalog.normalized(words)
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
        if (
            catalog.of(target).effect is catalog.Effect.WRITE
            and words != literal
            and self.permission is not None
        ):
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
        is_extension = isinstance(target, NotFound) or (
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
            mcp_host=self.mcp_host,
            extension_dirs=wrappers.visible
            if (wrappers := getattr(self.shell, "wrappers", None)) is not None
            else (),
        )
        # A prefixed built-in (`task:<type>`) and an extension read their name too.
        args = argv if catalog.of(target).prefixed or is_extension else argv[1:]
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
                write = self._pipe_sink()
                assert write is not None  # `_trailing_write` found it
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
