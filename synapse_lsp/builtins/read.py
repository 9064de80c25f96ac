"""`read <file> [--offset N] [--limit N]`: lines of a text file, paged, never a flood."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 100 * 1024
_SNIFF = 8192


class ReadCommand:
    name = "read"
    summary = "Print lines of a text file (0-based --offset, --limit lines)."
    usage = "read <file> [--offset N] [--limit N]"

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <file>        path, relative to the shell's current directory
  --offset N    first line to print, 0-based (--offset 2 starts at the 3rd line); default 0
  --limit N     print at most N lines; default {DEFAULT_LIMIT}
  Lines longer than {MAX_LINE_CHARS} characters are cut; output stops at about
  {MAX_OUTPUT_BYTES // 1024} KiB, and a last line says how to read on with --offset.
  If the file is open in the editor, its unsaved text is what you read.
  Binary files, directories and files that are not UTF-8 are refused with an error.
Examples:
  read src/app.py
  read src/app.py --offset 100 --limit 50"""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        try:
            args = parse_args(argv, options={"offset", "limit"})
            if len(args.positional) != 1:
                raise ArgError(
                    "expected exactly one file" if args.positional else "missing <file> argument"
                )
            offset = non_negative_int("offset", args.options.get("offset"), 0) or 0
            limit = non_negative_int("limit", args.options.get("limit"), DEFAULT_LIMIT)
        except ArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        path = ctx.resolve(args.positional[0])
        shown = args.positional[0]
        assert limit is not None
        buffered = await ctx.files.document_text(path)
        if buffered is not None:
            return _page(shown, iter(buffered.splitlines(keepends=True)), offset, limit)
        problem = _check_file(path, shown)
        if problem is not None:
            return problem
        try:
            with path.open("rb") as fh:
                return _page(shown, _decoded_lines(fh, shown), offset, limit)
        except _DecodeError as exc:
            return _fail(str(exc))
        except OSError as exc:
            return _fail(f"read: {shown}: {exc.strerror or exc}")


class _DecodeError(Exception):
    pass


def _fail(
    message: str, category: FailureCategory = FailureCategory.EXECUTION_ERROR
) -> CommandOutput:
    return CommandOutput(stderr=message + "\n", exit_code=1, category=category)


def _check_file(path: Path, shown: str) -> CommandOutput | None:
    if not path.exists():
        return _fail(f"read: {shown}: no such file", FailureCategory.NOT_FOUND)
    if path.is_dir():
        return _fail(f"read: {shown}: is a directory (list it with: ls {shown})")
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF)
    except PermissionError:
        return _fail(f"read: {shown}: permission denied")
    except OSError as exc:
        return _fail(f"read: {shown}: {exc.strerror or exc}")
    if b"\0" in head:
        size = path.stat().st_size
        return _fail(f"read: {shown}: binary file ({size} bytes), not shown")
    return None


def _decoded_lines(raw: Iterable[bytes], shown: str) -> Iterator[str]:
    for number, line in enumerate(raw, start=1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _DecodeError(
                f"read: {shown}: not valid UTF-8 (line {number}, byte {exc.start}); "
                f"inspect it with: file {shown}"
            ) from None


def _page(shown: str, lines: Iterator[str], offset: int, limit: int) -> CommandOutput:
    """Take lines [offset, offset+limit) lazily: a 200 MB file is never held whole."""
    out: list[str] = []
    size = 0
    for index, line in enumerate(itertools.islice(lines, offset, offset + limit), start=offset):
        text = line.rstrip("\n").rstrip("\r")
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} characters]"
        size += len(text.encode("utf-8")) + 1
        if size > MAX_OUTPUT_BYTES and out:
            out.append(
                f"[output stopped at {MAX_OUTPUT_BYTES // 1024} KiB; continue with: "
                f"read {shown} --offset {index}]"
            )
            return CommandOutput("\n".join(out) + "\n")
        out.append(text)
    if not out:
        if limit == 0:
            return CommandOutput("")
        return CommandOutput(f"[no lines at offset {offset}: the file has fewer lines]\n")
    if len(out) == limit and next(lines, None) is not None:
        out.append(f"[more lines follow; continue with: read {shown} --offset {offset + limit}]")
    return CommandOutput("\n".join(out) + "\n")
