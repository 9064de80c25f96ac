"""`read <file> [--offset N] [--limit N]`: lines of a text file, paged, never a flood."""

from __future__ import annotations

import codecs
import itertools
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError, non_negative_int, parse_args
from synapse_lsp.builtins.tool_input import number, text
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 100 * 1024
# Files up to this size are read and decoded in one go (C speed); larger ones lazily.
WHOLE_FILE_BYTES = 4 * 1024 * 1024
_SNIFF = 8192
# In a big file, a line is read whole up to this many bytes (room for MAX_LINE_CHARS
# characters of up to 4 bytes, a CR and one more); of a longer one only the first
# _KEEP_CHARS characters are kept, the rest read _CHUNK bytes at a time and dropped.
_KEEP_CHARS = MAX_LINE_CHARS + 2
_HEAD_BYTES = 4 * _KEEP_CHARS
_CHUNK = 64 * 1024


@catalog.builtin
class ReadCommand(catalog.Described):
    name = "read"
    traits = catalog.Traits(
        effect=catalog.Effect.READ,
        shape=catalog.Shape.READ,
        claude_tool="Read",
        tool_aliases=("view",),
        read_only_safe=True,
        prompt_rank=0,
        example='Bash(command="read path/to/file")',
    )
    summary = "Print a text file's lines, numbered (--offset N skips N lines, --limit N)."
    usage = "read <file> [--offset N] [--limit N]"

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
        args = parse_args(list(argv[1:]), options={"offset", "limit"})
        if body is not None or len(args.positional) != 1:
            return None
        return catalog.Invocation(reads=(args.positional[0],))

    @staticmethod
    def hook_input(
        argv: Sequence[str], body: str | None, path: Callable[[str], str]
    ) -> dict[str, Any] | None:
        args = parse_args(list(argv[1:]), options={"offset", "limit"})
        if body is not None or len(args.positional) != 1:
            return None
        tool_input: dict[str, Any] = {"file_path": path(args.positional[0])}
        for name in ("offset", "limit"):
            if args.options.get(name, "").isdigit():
                tool_input[name] = int(args.options[name])
        return tool_input

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        path = text(args.get("file_path")) or text(args.get("path"))
        if path is None:
            return None
        line = f"read {quote(path)}"
        start = number(args.get("offset"))  # their offset: the line number to start at
        if start is not None and start > 1:
            line += f" --offset {start - 1}"
        limit = number(args.get("limit"))
        if limit is not None:
            line += f" --limit {limit}"
        return line

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  <file>        path, relative to the shell's current directory
  --offset N    skip the first N lines (--offset 2 starts at line 3); default 0
  --limit N     print at most N lines; default {DEFAULT_LIMIT}
  Each line is shown as `cat -n` does: its number (from 1), a tab, the text. The
  numbers are not part of the file: leave them out of `edit`'s <old> and <new>.
  Piped into another command (`read f | grep x`) the lines are plain, unnumbered.
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
        if _synapse_private(path, ctx.settings.synapse_home):
            return _fail(
                f"read: {shown}: Synapse's own store (other sessions' conversations, "
                "checkpoints) is not for the agent to read; an offloaded output is (read "
                "the path the history names)"
            )
        buffered = await ctx.files.document_text(path)
        numbered = not ctx.piped
        if buffered is not None:
            return _page_text(shown, buffered, offset, limit, numbered)
        try:
            # Non-blocking open: a FIFO must not hang the session (nor `/dev/zero` fill it).
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if stat.S_ISDIR(info.st_mode):
                    raise IsADirectoryError
                if not stat.S_ISREG(info.st_mode):
                    return _fail(f"read: {shown}: not a regular file (a pipe, device or socket)")
                size = info.st_size
                data = fh.read() if size <= WHOLE_FILE_BYTES else fh.read(_SNIFF)
                if b"\0" in data[:_SNIFF]:
                    return _fail(f"read: {shown}: binary file ({size} bytes), not shown")
                if size <= WHOLE_FILE_BYTES:
                    text = _decode_whole(data, shown)
                    return _page_text(shown, text, offset, limit, numbered)
                fh.seek(0)
                return _page(shown, _decoded_lines(fh, shown), offset, limit, numbered)
        except _DecodeError as exc:
            return _fail(str(exc))
        except FileNotFoundError:
            return _fail(f"read: {shown}: no such file", FailureCategory.NOT_FOUND)
        except IsADirectoryError:
            return _fail(f"read: {shown}: is a directory (list it with: ls {shown})")
        except PermissionError:
            return _fail(f"read: {shown}: permission denied")
        except OSError as exc:
            return _fail(f"read: {shown}: {exc.strerror or exc}")


def _synapse_private(path: Path, synapse_home: Path) -> bool:
    """True under $SYNAPSE_HOME/sessions (but a session's `offload/`, which compacted
    histories point the model at) or $SYNAPSE_HOME/checkpoints: the sandbox hides
    those from bash, and `read` runs outside it."""
    real = Path(os.path.realpath(path))
    home = Path(os.path.realpath(synapse_home))
    for name in ("sessions", "checkpoints"):
        base = home / name
        if real == base or base in real.parents:
            inner = real.relative_to(base).parts
            return not (name == "sessions" and len(inner) >= 3 and inner[1] == "offload")
    return False


class _DecodeError(Exception):
    pass


def _fail(
    message: str, category: FailureCategory = FailureCategory.EXECUTION_ERROR
) -> CommandOutput:
    return CommandOutput(stderr=message + "\n", exit_code=1, category=category)


def _decoded_lines(raw: BinaryIO, shown: str) -> Iterator[str]:
    """The lines of a big file, read and decoded in bounded memory.

    A line of up to `_HEAD_BYTES` is read and decoded whole (C speed); a longer one
    keeps only its first `_KEEP_CHARS` characters (enough for `_page` to cut it and
    say so) and the rest is read in `_CHUNK` pieces, checked as UTF-8 and dropped: a
    200 MB line costs 200 MB of reading, not 200 MB of memory.
    """
    number = 0
    while True:
        line = raw.readline(_HEAD_BYTES)
        if not line:
            return
        number += 1
        if line.endswith(b"\n") or len(line) < _HEAD_BYTES:
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(shown, number, exc.start) from None
            continue
        decoder = codecs.getincrementaldecoder("utf-8")()
        fed = 0
        kept = ""
        piece = line
        while piece:
            last = piece.endswith(b"\n")
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(piece, final=last)
            except UnicodeDecodeError as exc:
                raise _not_utf8(shown, number, fed - pending + exc.start) from None
            fed += len(piece)
            if len(kept) < _KEEP_CHARS:
                kept += text[: _KEEP_CHARS - len(kept)]
            if last:
                fed -= 2 if piece.endswith(b"\r\n") else 1  # the size counts no line ending
                break
            piece = raw.readline(_CHUNK)
        else:  # end of file inside the line
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise _not_utf8(shown, number, fed - pending + exc.start) from None
        yield _CutLine(kept, fed)


class _CutLine(str):
    """The head of a line too long to hold, and the byte size of the whole line."""

    size: int

    def __new__(cls, head: str, size: int) -> _CutLine:
        line = super().__new__(cls, head)
        line.size = size
        return line


def _not_utf8(shown: str, number: int, byte: int) -> _DecodeError:
    return _DecodeError(
        f"read: {shown}: not valid UTF-8 (line {number}, byte {byte}); "
        f"inspect it with: file {shown}"
    )


def _decode_whole(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        raise _not_utf8(shown, number, exc.start - start) from None


def _number(lines: list[str], first: int) -> str:
    """`cat -n` style: the 1-based line number right-aligned in 6 columns, a tab, the line."""
    return "\n".join([f"{n:>6}\t{line}" for n, line in enumerate(lines, first)])


def _page_text(
    shown: str, text: str, offset: int, limit: int, numbered: bool = False
) -> CommandOutput:
    """`_page` for text already in memory: slices and joins, per-line work only if needed."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    selected = lines[offset : offset + limit]
    if selected and max(map(len, selected)) <= MAX_LINE_CHARS:
        body = "\n".join(selected)
        if "\r" in body:
            selected = [line.rstrip("\r") for line in selected]
            body = "\n".join(selected)
        rendered = selected
        if numbered:
            rendered = [f"{n:>6}\t{line}" for n, line in enumerate(selected, offset + 1)]
            body = "\n".join(rendered)
        if len(body) * 4 < MAX_OUTPUT_BYTES or len(body.encode("utf-8")) < MAX_OUTPUT_BYTES:
            if len(lines) > offset + limit:
                more = f"read {shown} --offset {offset + limit}"
                body += f"\n[more lines follow; continue with: {more}]"
            return CommandOutput(body + "\n", paged=True)
        if body.isascii():  # one byte a character: cut where `_page` would, in one pass
            size = 0
            for i, text in enumerate(rendered):
                size += len(text) + 1
                if size > MAX_OUTPUT_BYTES and i:
                    rendered = rendered[:i]
                    rendered.append(
                        f"[output stopped at {MAX_OUTPUT_BYTES // 1024} KiB; continue with: "
                        f"read {shown} --offset {offset + i}]"
                    )
                    return CommandOutput("\n".join(rendered) + "\n", paged=True)
    return _page(shown, (line + "\n" for line in lines), offset, limit, numbered)


def _page(
    shown: str, lines: Iterator[str], offset: int, limit: int, numbered: bool = False
) -> CommandOutput:
    """Take lines [offset, offset+limit) lazily: a 200 MB file is never held whole."""
    out: list[str] = []
    size = 0
    for index, line in enumerate(itertools.islice(lines, offset, offset + limit), start=offset):
        text = line.rstrip("\n").rstrip("\r")
        if len(text) > MAX_LINE_CHARS:
            whole = line.size if isinstance(line, _CutLine) else len(text.encode("utf-8"))
            text = (
                text[:MAX_LINE_CHARS]
                + f" [... line cut at {MAX_LINE_CHARS} characters; it has {whole:,} bytes]"
            )
        if numbered:
            text = f"{index + 1:>6}\t{text}"
        size += len(text.encode("utf-8")) + 1
        if size > MAX_OUTPUT_BYTES and out:
            out.append(
                f"[output stopped at {MAX_OUTPUT_BYTES // 1024} KiB; continue with: "
                f"read {shown} --offset {index}]"
            )
            return CommandOutput("\n".join(out) + "\n", paged=True)
        out.append(text)
    if not out:
        if limit == 0:
            return CommandOutput("")
        return CommandOutput(f"[no lines at offset {offset}: the file has fewer lines]\n")
    if len(out) == limit and next(lines, None) is not None:
        out.append(f"[more lines follow; continue with: read {shown} --offset {offset + limit}]")
    return CommandOutput("\n".join(out) + "\n", paged=True)
