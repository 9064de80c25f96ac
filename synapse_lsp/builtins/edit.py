"""`edit <file> <old> <new> [--all]`: exact-text replacement, all or nothing."""

from __future__ import annotations

from pathlib import Path

from synapse_lsp.builtins.args import ArgError, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.files import FileError, file_lock, read_disk_text


class EditCommand:
    name = "edit"
    summary = "Replace exact text in a file: the first occurrence, or every one with --all."
    usage = "edit <file> <old> <new> [--all]"

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <file>   path, relative to the shell's current directory
  <old>    the exact text to find (whitespace and newlines count); must not be empty
  <new>    the replacement text (may be empty to delete)
  --all    replace every occurrence instead of only the first
  If <old> is not found nothing changes and the command fails. Quote <old> and <new>
  as single arguments; they may span lines. In an editor the change lands in its
  buffer (unsaved text included).
Examples:
  edit app.py "debug = True" "debug = False"
  edit notes.md "TODO" "DONE" --all"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options=set(), flags={"all"})
            if len(args.positional) != 3:
                raise ArgError(
                    f"expected <file> <old> <new> but got {len(args.positional)} argument(s); "
                    "quote <old> and <new> as single arguments"
                )
            file_arg, old, new = args.positional
            if old == "":
                raise ArgError("<old> is empty; give the exact text to replace")
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        path = ctx.resolve(file_arg)
        replace_all = "all" in args.flags
        try:
            before = await ctx.files.document_text(path)
        except FileError as exc:
            return _fail(f"edit: {exc.message}")
        if before is not None:  # the editor's buffer: it versions its own changes
            return await self._apply(ctx, path, file_arg, before, old, new, replace_all)
        # On disk: read, match and write under the file's lock, so that no other
        # Synapse process can change the file in between (its edit waits for ours).
        try:
            async with file_lock(path):
                before = read_disk_text(path)
                return await self._apply(ctx, path, file_arg, before, old, new, replace_all)
        except FileError as exc:
            return _fail(
                f"edit: {exc.message}",
                FailureCategory.NOT_FOUND
                if "no such file" in exc.message
                else FailureCategory.EXECUTION_ERROR,
            )

    async def _apply(
        self,
        ctx: CommandContext,
        path: Path,
        file_arg: str,
        before: str,
        old: str,
        new: str,
        replace_all: bool,
    ) -> CommandOutput:
        count = before.count(old)
        if count == 0:
            hint = ""
            if old.strip() and old.strip() in before:
                hint = " (it occurs with different surrounding whitespace)"
            return _fail(
                f"edit: {file_arg}: <old> text not found{hint}; nothing changed. "
                f"Check the exact text with: read {file_arg}"
            )
        after = before.replace(old, new) if replace_all else before.replace(old, new, 1)
        if after == before:
            return CommandOutput(f"No change: {file_arg} already has that text\n")
        try:
            await ctx.files.apply_change(path, before, after)
        except FileError as exc:
            return _fail(f"edit: {exc.message}")
        done = count if replace_all else 1
        more = f" ({count - 1} more left; use --all to replace every one)" if done < count else ""
        noun = "occurrence" if done == 1 else "occurrences"
        return CommandOutput(
            f"Replaced {done} {noun} in {file_arg}{more}\n",
            data={"edit": {"kind": "edit", "path": str(path), "replacements": done}},
        )


def _fail(
    message: str, category: FailureCategory = FailureCategory.EXECUTION_ERROR
) -> CommandOutput:
    return CommandOutput(stderr=message + "\n", exit_code=1, category=category)
