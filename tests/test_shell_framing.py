"""The marker protocol as a state machine (`synapse_lsp.shell.framing`), fed bytes:
no bash, no event loop. docs/shell.md "Framing guarantees"."""

from __future__ import annotations

import random
import shlex

import pytest

from synapse_lsp.shell.framing import (
    END,
    HOOK,
    START,
    Event,
    Marker,
    MarkerParser,
    Output,
    hook_function,
    line_template,
    prompt_command,
    startup_line,
)

NONCE = "0123456789abcdef"


def marker(seq: int | str, code: int | str, cwd: str, nonce: str = NONCE) -> bytes:
    """A marker as the prompt hook prints it."""
    return START + f"{nonce}:{seq}:{code}:{cwd}".encode() + END + nonce.encode()


def feed_all(parser: MarkerParser, chunks: list[bytes]) -> list[Event]:
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events


def output_of(events: list[Event]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, Output))


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Output))


def markers_of(events: list[Event]) -> list[Marker]:
    return [e for e in events if isinstance(e, Marker)]


def test_a_whole_marker_is_taken_out_of_the_output() -> None:
    parser = MarkerParser(NONCE, 3)
    events = parser.feed(b"before\n" + marker(3, 7, "/work/sub") + b"after")
    assert events == [
        Output(b"before\n", "before\n"),
        Marker(7, b"/work/sub"),
        Output(b"after", "after"),
    ]
    assert parser.marker == Marker(7, b"/work/sub")


def test_a_marker_split_at_every_byte_is_still_one_marker() -> None:
    stream = b"out\n" + marker(12, 0, "/a:b/c") + b"tail"
    for cut in range(1, len(stream)):
        parser = MarkerParser(NONCE, 12)
        events = feed_all(parser, [stream[:cut], stream[cut:]])
        assert markers_of(events) == [Marker(0, b"/a:b/c")], cut
        assert output_of(events) == b"out\ntail", cut
    parser = MarkerParser(NONCE, 12)
    events = feed_all(parser, [bytes([b]) for b in stream])  # one byte at a time
    assert markers_of(events) == [Marker(0, b"/a:b/c")]
    assert output_of(events) == b"out\ntail"


def test_any_chunking_gives_the_same_events() -> None:
    stream = (
        b"x" * 100
        + marker(4, 1, "/one")
        + marker(3, 0, "/stale")  # right after a marker: nothing before it to drop
        + "é€😀\x1e not a marker \x1e".encode()
        + marker(4, 2, "/two")
        + b"\x1e"
    )
    whole = MarkerParser(NONCE, 4)
    expected = whole.feed(stream)
    assert markers_of(expected) == [Marker(1, b"/one"), Marker(2, b"/two")]
    assert text_of(expected) == "x" * 100 + "é€😀\x1e not a marker \x1e"
    rng = random.Random(30)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 20)))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        parser = MarkerParser(NONCE, 4)
        events = feed_all(parser, chunks)
        assert markers_of(events) == markers_of(expected)
        assert output_of(events) == output_of(expected)
        assert text_of(events) == text_of(expected)
        assert parser.marker == Marker(2, b"/two")
        assert parser.take_pending() == b"\x1e"  # a possible beginning, held back


def test_only_a_possible_beginning_of_a_marker_is_held_back() -> None:
    parser = MarkerParser(NONCE, 1)
    assert output_of(parser.feed(b"a\x1e")) == b"a"  # "\x1e" may start a marker
    assert output_of(parser.feed(b"b")) == b"\x1eb"  # it did not
    assert output_of(parser.feed(b"\x1e0123")) == b""  # still a possible beginning
    assert output_of(parser.feed(b"x")) == b"\x1e0123x"
    assert parser.take_pending() == b""


def test_a_marker_with_another_nonce_is_output() -> None:
    forged = marker(1, 0, "/elsewhere", nonce="ffffffffffffffff")
    parser = MarkerParser(NONCE, 1)
    events = parser.feed(forged)
    assert markers_of(events) == []
    assert output_of(events) == forged
    assert parser.marker is None


def test_a_marker_of_another_command_is_dropped_with_the_output_before_it() -> None:
    """(The output still held with it: what came in an earlier chunk went out then.)"""
    parser = MarkerParser(NONCE, 2)
    events = parser.feed(b"late output\n" + marker(1, 130, "/old") + b"new\n")
    assert markers_of(events) == []
    assert output_of(events) == b"new\n"
    assert parser.marker is None


def test_a_sequence_number_must_match_whole() -> None:
    for seq in ("10", "01", "1 ", ""):
        parser = MarkerParser(NONCE, 1)
        assert markers_of(parser.feed(marker(seq, 0, "/x"))) == []
    assert markers_of(MarkerParser(NONCE, 10).feed(marker(10, 0, "/x"))) == [Marker(0, b"/x")]


def test_a_marker_without_its_fields_does_not_count() -> None:
    parser = MarkerParser(NONCE, 1)
    broken = START + f"{NONCE}:1:0".encode() + END + NONCE.encode()  # no cwd
    assert markers_of(parser.feed(broken)) == []
    assert parser.marker is None


def test_a_code_that_is_not_a_number_counts_as_failure() -> None:
    parser = MarkerParser(NONCE, 1)
    assert markers_of(parser.feed(marker(1, "oops", "/x"))) == [Marker(1, b"/x")]


def test_the_last_marker_wins_and_a_forgotten_one_does_not_count() -> None:
    parser = MarkerParser(NONCE, 5)
    events = parser.feed(marker(5, 0, "/forged") + b"still running\n" + marker(5, 3, "/real"))
    assert markers_of(events) == [Marker(0, b"/forged"), Marker(3, b"/real")]
    assert output_of(events) == b"still running\n"
    assert parser.marker == Marker(3, b"/real")
    parser.forget_marker()
    assert parser.marker is None


def test_a_torn_marker_before_a_whole_one_is_output() -> None:
    torn = START + f"{NONCE}:".encode()
    parser = MarkerParser(NONCE, 1)
    events = parser.feed(b"a" + torn + b"b" + marker(1, 0, "/x"))
    assert output_of(events) == b"a" + torn + b"b"
    assert markers_of(events) == [Marker(0, b"/x")]


def test_an_unfinished_marker_waits_for_its_end() -> None:
    parser = MarkerParser(NONCE, 1)
    head = START + f"{NONCE}:1:0:/some/where".encode()
    events = parser.feed(b"out" + head)
    assert output_of(events) == b"out" and markers_of(events) == []
    assert parser.take_pending() == head  # handed on when the command ends


def test_a_character_split_across_chunks_is_decoded_once_whole() -> None:
    data = "aé€😀z".encode()
    for cut in range(1, len(data)):
        parser = MarkerParser(NONCE, 1)
        first, second = parser.feed(data[:cut]), parser.feed(data[cut:])
        assert output_of(first + second) == data
        assert text_of(first + second) == "aé€😀z", cut
        assert parser.flush() == ""
    parser = MarkerParser(NONCE, 1)
    # a character cut by a marker is replaced, not completed by what follows the marker
    events = parser.feed("é".encode()[:1] + marker(1, 0, "/x") + b"z")
    assert text_of(events) + parser.flush() == "\ufffdz"


def test_an_incomplete_character_at_the_end_is_flushed_as_replacement() -> None:
    parser = MarkerParser(NONCE, 1)
    events = parser.feed(b"ok" + "€".encode()[:2])
    assert text_of(events) == "ok"
    assert parser.flush() == "\ufffd"
    assert output_of(parser.feed(b"\xff")) == b"\xff"


@pytest.mark.parametrize("path", ["/dev/shm/synapse-shell-x", "/tmp/a b/{seq}'s"])  # noqa: S108
def test_the_command_line_names_the_sequence_and_the_files(path: str) -> None:
    from pathlib import Path

    line = line_template(f"{path}/cmd", Path(path)).format(seq=7)
    assert line.startswith("__syn_seq=7; \\. ") and line.endswith("\n")
    words = shlex.split(line.removeprefix("__syn_seq=7; \\. "))
    assert words[0] == f"{path}/cmd"
    assert words[1:] == ["</dev/null", f">{path}/out.7", f"2>{path}/err.7"]


def test_the_prompt_hook_prints_the_marker_with_the_nonce() -> None:
    from pathlib import Path

    hook = prompt_command(NONCE)
    # The function first (`$?` is still the command's in it), then the traps, then the
    # marker: out of the function, so nothing it runs on return comes after the marker.
    assert hook.startswith(f"\\{HOOK};\\builtin trap - INT DEBUG;")
    assert hook.endswith(f'"$__syn_rc" "$PWD" {NONCE}')
    assert f"\\037%s' {NONCE} " in hook
    body = hook_function()
    assert body.startswith(f"{HOOK}() {{ __syn_rc=$?;") and body.endswith("; }")
    assert NONCE not in body
    start = startup_line(Path("/x/stderr"), NONCE)
    assert start.startswith(f"exec 2>/x/stderr; set +o history; {body}; readonly -f {HOOK}; ")
    assert start.endswith("readonly PROMPT_COMMAND; __syn_seq=0\n")
    assert len(start.encode()) < 4096  # a canonical terminal's line, whole
