"""`edit <file> <old> <new> [--all]`: exact-text replacement, all or nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError, parse_args
from synapse_lsp.builtins.tool_input import text
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory
from synapse_lsp.files import FileError, file_lock, read_disk_text


@catalog.builtin
class EditCommand(catalog.Described):
    name = "edit"
    traits = catalog.Traits(
        effect=catalog.Effect.WRITE,
        shape=catalog.Shape.EDIT,
        verb="Edit",
        claude_tool="Edit",
        tool_aliases=("str_replace", "multiedit"),
        prompt_rank=2,
        example="Bash(command=\"edit path/to/file 'old text' 'new text'\")",
    )
    summary = "Replace exact text in a file: the first occurrence, or every one with --all."
    usage = "edit <file> <old> <new> [--all]"

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
        """Any call with a path may write it (the gate asks before usage is checked)."""
        positional = parse_args(list(argv[1:]), options=set(), flags={"all"}).positional
        return catalog.Invocation(writes=(positional[0],)) if positional else None

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        args = parse_args(list(argv[1:]), options=set(), flags={"all"})
        if body is not None or len(args.positional) != 3:
            return None
        file_arg, old, new = args.positional
        return {
            "file_path": path(file_arg),
            "old_string": old,
            "new_string": new,
            "replace_all": "all" in args.flags,
        }

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        """Claude Code's Edit (or MultiEdit's `edits`: one `edit` per change, chained)."""
        path = text(args.get("file_path")) or text(args.get("path"))
        edits = args.get("edits")
        if isinstance(edits, list):
            if path is None or not edits or not all(isinstance(e, dict) for e in edits):
                return None
            lines = [EditCommand.from_tool_input({"file_path": path, **e}) for e in edits]
            if any(line is None for line in lines):
                return None
            return " && ".join(line for line in lines if line is not None)
        old = args.get("old_string", args.get("old_str"))
        new = args.get("new_string", args.get("new_str"))
        if path is None or not isinstance(old, str) or not isinstance(new, str):
            return None
        line = f"edit {quote(path)} {quote(old)} {quote(new)}"
        return line + " --all" if args.get("replace_all") is True else line

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <file>   path, relative to the shell's current directory
  <old>    the exact text to find (whitespace and newlines count); must not be empty
  <new>    the replacement text (may be empty to delete)
  --all    replace every occurrence instead of only the first
  If <old> is not found nothing changes and the command fails. Line numbers copied
  from `read`'s output (`  12<TAB>`) are left out of <old> and <new>. Quote <old> and <new>
  as single arguments; they may span lines. Line breaks match the file's own (LF or
  CRLF), and new lines take the endings of the lines they replace. In an editor the
  change lands in its buffer (unsaved text included).
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
        count, after = replace_text(before, old, new, replace_all=replace_all)
        if count == 0:
            unnumbered = strip_line_numbers(old)
            if unnumbered is not None:  # copied from `read`'s output, numbers and all
                old = unnumbered
                new = strip_line_numbers(new) or new
                count, after = replace_text(before, old, new, replace_all=replace_all)
        if count == 0:
            hint = ""
            if old.strip() and old.strip() in before:
                hint = " (it occurs with different surrounding whitespace)"
            out = _fail(f"edit: {file_arg}: <old> text not found{hint}; nothing changed.")
            out.data["hint"] = (
                f"Hint: Read the file first (`read {file_arg}`) and copy <old> exactly as it "
                "is there (whitespace and line breaks count; leave out the line numbers "
                "`read` puts in front), then retry."
            )
            return out
        if after == before:
            return CommandOutput(f"No change: {file_arg} already has that text\n")
        try:
            await ctx.files.apply_change(path, before, after)
        except FileError as exc:
            out = _fail(f"edit: {exc.message}")
            if exc.hint is not None:
                out.data["hint"] = exc.hint
            return out
        done = count if replace_all else 1
        more = f" ({count - 1} more left; use --all to replace every one)" if done < count else ""
        noun = "occurrence" if done == 1 else "occurrences"
        return CommandOutput(
            f"Replaced {done} {noun} in {file_arg}{more}\n",
            data={"edit": {"kind": "edit", "path": str(path), "replacements": done}},
        )


_BREAK = re.compile(r"\r\n|\n")
# `read`'s line-number prefix (`cat -n`: right-aligned number and a tab; also the
# `  12→` arrow form some models learned).
_NUMBER_PREFIX = re.compile(r"^ *\d+(?:\t|\u2192)")


def strip_line_numbers(text: str) -> str | None:
    """`text` without the line-number prefix on each of its lines, when every non-empty
    line has one (a model copied `read`'s output into <old>); None otherwise."""
    lines = text.split("\n")
    if not any(lines) or not all(_NUMBER_PREFIX.match(line) for line in lines if line):
        return None
    return "\n".join(_NUMBER_PREFIX.sub("", line, count=1) for line in lines)


_ANY_BREAK = r"\r?\n"


def replace_text(before: str, old: str, new: str, *, replace_all: bool) -> tuple[int, str]:
    """(occurrences of `old` in `before`, the text with the first or every one replaced).

    A file without a carriage return (and an `old` without one) is matched exactly.
    Otherwise line breaks match whatever style the file uses there: `read` shows a
    CRLF file's lines without their `\r`, so the `old` a model copies from it says
    `\n`. Each line break of `new` then takes the ending of the corresponding line it
    replaces (extra lines take the last one's), so untouched lines keep their bytes
    and replaced lines their endings, in LF, CRLF and mixed files alike.
    """
    if "\r" not in before and "\r" not in old:
        count = before.count(old)
        return count, (before.replace(old, new) if replace_all else before.replace(old, new, 1))
    pieces = _BREAK.split(old)
    pattern = re.compile(_ANY_BREAK.join(re.escape(piece) for piece in pieces))
    new_lines = _BREAK.split(new)
    count = 0

    def substitute(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        if count > 1 and not replace_all:
            return match.group()
        if len(new_lines) == 1:
            return new
        endings = re.findall(_ANY_BREAK, match.group())  # the literal pieces hold no \n
        fallback = endings[-1] if endings else _ending_at(before, match.end())
        out = [new_lines[0]]
        for index, line in enumerate(new_lines[1:]):
            out.append(endings[index] if index < len(endings) else fallback)
            out.append(line)
        return "".join(out)

    after = pattern.sub(substitute, before)
    return count, after


def _ending_at(text: str, position: int) -> str:
    """The line ending of the line holding `position` (or, on a last line without
    one, of the line before it); LF when the text has none."""
    newline = text.find("\n", position)
    if newline < 0:
        newline = text.rfind("\n", 0, position)
    if newline < 0:
        return "\n"
    return "\r\n" if newline > 0 and text[newline - 1] == "\r" else "\n"


def _fail(
    message: str, category: FailureCategory = FailureCategory.EXECUTION_ERROR
) -> CommandOutput:
    return CommandOutput(stderr=message + "\n", exit_code=1, category=category)
