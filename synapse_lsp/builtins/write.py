"""`write <file> <content>`: create or overwrite a file (atomically), parents created."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError
from synapse_lsp.builtins.tool_input import heredoc, text
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.files import FileError


@catalog.builtin
class WriteCommand(catalog.Described):
    name = "write"
    traits = catalog.Traits(
        effect=catalog.Effect.WRITE,
        shape=catalog.Shape.EDIT,
        verb="Write",
        claude_tool="Write",
        prompt_rank=1,
        pipe_sink=True,
        example="Bash(command=\"write path/to/file <<'EOF'\\n…\\nEOF\")",
    )
    summary = "Create or overwrite a file with the given content; parent directories are created."
    usage = "write <file> <content>"

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
        """Any call with a path may write it (`cmd | write f` has no content of its own
        until the pipe gives it)."""
        given = split_args(list(argv[1:]))
        return catalog.Invocation(writes=(given[0],)) if given else None

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        given = split_args(list(argv[1:]))  # write's own rule: content may start with "-"
        if len(given) == 2 and body is None or len(given) == 1 and body is not None:
            content = given[1] if body is None else body
            return {"file_path": path(given[0]), "content": content}
        return None

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        path = text(args.get("file_path")) or text(args.get("path"))
        content = args.get("content")
        if path is None or not isinstance(content, str):
            return None
        if "\n" in content.rstrip("\n"):
            return heredoc(f"write {quote(path)}", content)
        return f"write {quote(path)} -- {quote(content)}"

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <file>      path, relative to the shell's current directory
  <content>   the whole new content, as ONE quoted argument, or from a heredoc:
                write notes.txt <<'EOF'
                first line
                EOF
              Everything after <file> is content, never an option, so it may start
              with `-` (front matter, a list). `write -- <file> …` writes a file
              whose name starts with `-`.
  The write is atomic (the old file or the new one, never half) and keeps the
  file's permissions. In an editor the change lands in its buffer.
Examples:
  write hello.txt "Hello, world"
  write src/new_module.py <<'EOF'
  print("hi")
  EOF
  write post.md '---
  title: Hello
  ---
  Body text.'"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = _Args(split_args(argv))
            if not args.positional:
                raise ArgError("missing <file> argument")
            if len(args.positional) == 1:
                if ctx.stdin is None:
                    raise ArgError(
                        "missing <content> (give it as one quoted argument or a heredoc)"
                    )
                content = ctx.stdin
            elif len(args.positional) == 2:
                if ctx.stdin is not None:
                    raise ArgError("give the content either as an argument or a heredoc, not both")
                content = args.positional[1]
            else:
                raise ArgError(
                    f"expected <file> <content> but got {len(args.positional)} arguments; "
                    "quote the content as one argument or use a heredoc"
                )
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        path = ctx.resolve(args.positional[0])
        existed = path.exists()
        try:
            await ctx.files.write(path, content)
        except FileError as exc:
            return CommandOutput(
                stderr=f"write: {exc.message}\n",
                exit_code=1,
                category=FailureCategory.EXECUTION_ERROR,
                data={} if exc.hint is None else {"hint": exc.hint},
            )
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Overwrote" if existed else "Created"
        return CommandOutput(
            f"{verb} {args.positional[0]} ({_count(len(content.encode('utf-8')), 'byte')}, "
            f"{_count(lines, 'line')})\n",
            data={"edit": {"kind": "write", "path": str(path)}},
        )


class _Args:
    def __init__(self, positional: list[str]) -> None:
        self.positional = positional


def split_args(argv: list[str]) -> list[str]:
    """<file> and the content: only the path may be taken for an option (write has
    none); what follows it is content as given, even `---` or `-x`. A leading `--`
    (and one right after the path) is dropped."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    elif argv and argv[0].startswith("--") and len(argv[0]) > 2:
        raise ArgError(
            f"unknown option {argv[0].split('=', 1)[0]} (write has no options; for a file "
            f"whose name starts with -, use: write -- {argv[0]} <content>)"
        )
    if len(argv) >= 2 and argv[1] == "--":
        argv = [argv[0], *argv[2:]]
    return list(argv)


def _count(n: int, noun: str) -> str:
    """`1 line`, `2 lines`: what the model and the docs read."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
