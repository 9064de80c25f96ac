"""Pure text-edit computation for the editor gateway (editor_files.py); no server needed.

- `offset_edits(old, new)`: minimal edits turning one text into another;
- offsets <-> LSP positions in the negotiated encoding (UTF-16 by default,
  UTF-8 or UTF-32): lines end at `\\n`, `\\r\\n` or `\\r`, as LSP says, and an
  edit never splits a `\\r\\n` pair (a position between them does not exist).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from lsprotocol import types

_BLOCK = 4096
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

# (start offset, end offset, new text), offsets into the old text, sorted, disjoint
OffsetEdit = tuple[int, int, str]
# how many code units of the position encoding a string takes
Units = Callable[[str], int]


# ------------------------------------------------------------------ encodings


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf8_units(text: str) -> int:
    return len(text.encode("utf-8"))


def utf32_units(text: str) -> int:
    return len(text)


def units_for(encoding: str | None) -> Units:
    """The counter for a `positionEncoding` (a name or lsprotocol's enum; UTF-16 by default)."""
    name = str(getattr(encoding, "value", encoding) or "")
    return {"utf-8": utf8_units, "utf-32": utf32_units}.get(name, utf16_units)


# -------------------------------------------------------------------- diffing


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i + _BLOCK <= n and a[i : i + _BLOCK] == b[i : i + _BLOCK]:
        i += _BLOCK
    lo, hi = i, min(i + _BLOCK, n)
    while lo < hi:  # a[i:lo] == b[i:lo] holds; find the largest such lo
        mid = (lo + hi + 1) // 2
        if a[i:mid] == b[i:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most `limit` characters."""
    la, lb = len(a), len(b)
    n = min(limit, la, lb)
    i = 0
    while i + _BLOCK <= n and a[la - i - _BLOCK : la - i] == b[lb - i - _BLOCK : lb - i]:
        i += _BLOCK
    lo, hi = i, min(i + _BLOCK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - i] == b[lb - mid : lb - i]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _trimmed(a: str, b: str, a_start: int) -> OffsetEdit | None:
    """One edit turning a into b (a starts at `a_start` in the document), trimmed tight."""
    if a == b:
        return None
    p = _common_prefix(a, b)
    s = _common_suffix(a, b, min(len(a), len(b)) - p)
    return (a_start + p, a_start + len(a) - s, b[p : len(b) - s])


def offset_edits(old: str, new: str) -> list[OffsetEdit]:
    """Minimal-ish edits turning `old` into `new`.

    Common prefix and suffix are found in C-speed slices (a 20,000-line buffer
    costs well under a millisecond); what differs in between is diffed line by
    line with difflib, and each changed block is trimmed to the characters that
    differ — so `edit --all` touching ten places sends ten small edits.
    """
    if old == new:
        return []
    p = _common_prefix(old, new)
    s = _common_suffix(old, new, min(len(old), len(new)) - p)
    mid_old = old[p : len(old) - s]
    mid_new = new[p : len(new) - s]
    if mid_old.count("\n") <= 1 and mid_new.count("\n") <= 1:
        return [_whole_crlf(old, (p, p + len(mid_old), mid_new))]
    # Diff whole lines: widen the middle to line boundaries on both sides.
    start = old.rfind("\n", 0, p) + 1
    end_old = old.find("\n", len(old) - s)
    end_old = len(old) if end_old < 0 else end_old + 1
    tail = len(old) - end_old
    a_lines = old[start:end_old].splitlines(keepends=True)
    b_lines = new[start : len(new) - tail].splitlines(keepends=True)
    a_offsets = [start]
    for line in a_lines:
        a_offsets.append(a_offsets[-1] + len(line))
    import difflib

    edits: list[OffsetEdit] = []
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edit = _trimmed("".join(a_lines[i1:i2]), "".join(b_lines[j1:j2]), a_offsets[i1])
        if edit is not None:
            edits.append(edit)
    return [_whole_crlf(old, e) for e in edits]


def _whole_crlf(old: str, edit: OffsetEdit) -> OffsetEdit:
    """Never split a \\r\\n pair: a position between them does not exist in LSP."""
    start, end, text = edit
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start, text = start - 1, "\r" + text
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end, text = end + 1, text + "\n"
    return start, end, text


def apply_offset_edits(old: str, edits: list[OffsetEdit]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, text in edits:
        out.append(old[pos:start])
        out.append(text)
        pos = end
    out.append(old[pos:])
    return "".join(out)


# ------------------------------------------------------ offsets <-> positions


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins (a line ends at \\n, \\r\\n or \\r)."""
    return [0] + [m.end() for m in _LINE_BREAK.finditer(text)]


class Positions:
    """Offsets -> LSP positions over one text; ask offsets in increasing order."""

    def __init__(self, text: str, units: Units) -> None:
        self.text = text
        self.units = units
        self._starts: list[int] | None = line_starts(text) if "\r" in text else None
        self._line = 0
        self._pos = 0

    def position(self, offset: int) -> types.Position:
        text = self.text
        if self._starts is None:
            self._line += text.count("\n", self._pos, offset)
            self._pos = offset
            line_start = text.rfind("\n", 0, offset) + 1
        else:
            self._line = bisect.bisect_right(self._starts, offset) - 1
            line_start = self._starts[self._line]
        segment = text[line_start:offset]
        column = len(segment) if segment.isascii() else self.units(segment)
        return types.Position(line=self._line, character=column)


def end_position(text: str, units: Units) -> types.Position:
    """The position just after the last character."""
    return Positions(text, units).position(len(text))


def offset_at(text: str, position: types.Position, units: Units) -> int:
    """LSP position -> offset into `text`; past a line's end is its end (as LSP says)."""
    starts = line_starts(text)
    if position.line >= len(starts):
        return len(text)
    start = starts[position.line]
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    count = 0
    offset = start
    while offset < end and count < position.character:
        count += units(text[offset])
        offset += 1
    return offset


def to_text_edits(old: str, edits: list[OffsetEdit], units: Units) -> list[types.TextEdit]:
    positions = Positions(old, units)
    out: list[types.TextEdit] = []
    for start, end, text in edits:
        begin = positions.position(start)
        finish = positions.position(end)
        out.append(types.TextEdit(range=types.Range(start=begin, end=finish), new_text=text))
    return out
