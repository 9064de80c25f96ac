"""lsp/text_edits.py without a server: minimal edits, offsets <-> positions in UTF-16,
UTF-8 and UTF-32, and line endings (\\n, \\r\\n, \\r; a CRLF pair is never split)."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types

from synapse_lsp.lsp.text_edits import (
    Units,
    apply_offset_edits,
    end_position,
    offset_at,
    offset_edits,
    to_text_edits,
    units_for,
    utf8_units,
    utf16_units,
    utf32_units,
)
from tests.lsp_client import apply_edits

ALPHABET = ["a", "b", " ", "\n", "\r\n", "\r", "é", "😀", "\t"]


def _random_pairs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        old = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        chars = list(old)
        for _ in range(rng.randint(0, 4)):
            i = rng.randint(0, len(chars))
            if rng.random() < 0.5 or not chars:
                chars.insert(i, rng.choice(ALPHABET))
            else:
                del chars[min(i, len(chars) - 1)]
        pairs.append((old, "".join(chars)))
    return pairs


def _apply_positions(text: str, edits: list[types.TextEdit], units: Units) -> str:
    """Apply LSP edits the way an editor of that encoding does (our own inverse)."""
    spans = sorted(
        (
            (offset_at(text, e.range.start, units), offset_at(text, e.range.end, units), e.new_text)
            for e in edits
        ),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def test_minimal_edits_round_trip_random_texts() -> None:
    for old, new in _random_pairs(7, 3000):
        edits = offset_edits(old, new)
        assert apply_offset_edits(old, edits) == new
        # an independent UTF-16 editor (the test client's) applies them
        assert apply_edits(old, to_text_edits(old, edits, utf16_units)) == new, (old, new)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_round_trip_through_positions_in_every_encoding(encoding: str) -> None:
    units = units_for(encoding)
    for old, new in _random_pairs(11, 1500):
        text_edits = to_text_edits(old, offset_edits(old, new), units)
        assert _apply_positions(old, text_edits, units) == new, (encoding, old, new)


def test_edits_are_small_and_positions_are_utf16() -> None:
    old = "".join(f"line {i}\n" for i in range(2000))
    new = old.replace("line 10\n", "line ten\n").replace("line 1500\n", "LINE 1500\n")
    edits = to_text_edits(old, offset_edits(old, new), utf16_units)
    assert [(e.range.start.line, e.range.start.character, e.new_text) for e in edits] == [
        (10, 5, "ten"),
        (1500, 0, "LINE"),
    ]
    emoji = to_text_edits("😀x\n", offset_edits("😀x\n", "😀y\n"), utf16_units)
    assert emoji == [
        types.TextEdit(
            range=types.Range(
                start=types.Position(line=0, character=2), end=types.Position(line=0, character=3)
            ),
            new_text="y",
        )
    ]


@pytest.mark.parametrize(
    ("units", "character"), [(utf8_units, 7), (utf16_units, 5), (utf32_units, 4)]
)
def test_the_same_column_in_each_encoding(units: Units, character: int) -> None:
    # pygls' example: the closing quote of x="😋"
    text = 'x="😋"\n'
    [edit] = to_text_edits(text, offset_edits(text, "x=\"😋'\n"), units)
    assert (edit.range.start.line, edit.range.start.character) == (0, character)
    assert offset_at(text, edit.range.start, units) == 4


def test_units_for_names_the_encoding_and_defaults_to_utf16() -> None:
    assert units_for("utf-8") is utf8_units
    assert units_for("utf-32") is utf32_units
    assert units_for("utf-16") is utf16_units
    assert units_for(None) is utf16_units
    assert units_for(types.PositionEncodingKind.Utf8) is utf8_units


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_lines_end_at_every_kind_of_break(newline: str) -> None:
    old = newline.join(["one", "two", "three"]) + newline
    new = old.replace("two", "2")
    [edit] = to_text_edits(old, offset_edits(old, new), utf16_units)
    assert edit.range == types.Range(
        start=types.Position(line=1, character=0), end=types.Position(line=1, character=3)
    )
    assert end_position(old, utf16_units) == types.Position(line=3, character=0)


def test_a_crlf_pair_is_never_split() -> None:
    # \r\n -> \n: the edit replaces the whole pair, never a position between \r and \n
    edits = offset_edits("a\r\nb", "a\nb")
    assert edits == [(1, 3, "\n")]
    [edit] = to_text_edits("a\r\nb", edits, utf16_units)
    assert edit.range == types.Range(
        start=types.Position(line=0, character=1), end=types.Position(line=1, character=0)
    )
    # inserting between \r and \n widens to the pair as well
    assert offset_edits("a\r\nb", "a\rX\nb") == [(1, 3, "\rX\n")]


def test_offset_at_clamps_past_the_line_end_and_the_last_line() -> None:
    text = "ab\r\ncd"
    assert offset_at(text, types.Position(line=0, character=99), utf16_units) == 2
    assert offset_at(text, types.Position(line=1, character=1), utf16_units) == 5
    assert offset_at(text, types.Position(line=7, character=0), utf16_units) == len(text)
