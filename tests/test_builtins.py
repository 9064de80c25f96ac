"""read / write / edit: the BDD part01 scenarios and every bad case, through the real router."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from synapse_lsp.commands import FailureCategory
from synapse_lsp.config import Settings
from synapse_lsp.events import FileDiff
from synapse_lsp.files import MAX_DIFF_CHARS, FileError, atomic_write
from synapse_lsp.router import BashRouter

FIVE = "line 1\nline 2\nline 3\nline 4\nline 5\n"


def numbered(text: str, first: int = 1) -> str:
    """`read`'s output for the model: `cat -n` style (issue 14 item 21)."""
    return "".join(f"{n:>6}\t{line}\n" for n, line in enumerate(text.splitlines(), first))


@pytest.fixture
def five(workdir: Path) -> Path:
    path = workdir / "five.txt"
    path.write_text(FIVE)
    return path


# ------------------------------------------------------------------ read


async def test_read_whole_file(router: BashRouter, five: Path) -> None:
    result = await router.route(f"read {five}")
    assert result.exit_code == 0
    assert result.stdout == numbered(FIVE)


async def test_read_offset_is_zero_based(router: BashRouter, five: Path) -> None:
    result = await router.route("read five.txt --offset 2")
    assert result.exit_code == 0
    assert result.stdout == numbered("line 3\nline 4\nline 5\n", first=3)


async def test_read_limit(router: BashRouter, five: Path) -> None:
    result = await router.route("read five.txt --limit 2")
    assert result.exit_code == 0
    assert result.stdout.startswith(numbered("line 1\nline 2\n"))
    assert "line 3" not in result.stdout
    assert "--offset 2" in result.stdout  # says how to read on


async def test_read_offset_and_limit_with_equals(router: BashRouter, five: Path) -> None:
    result = await router.route("read five.txt --offset=1 --limit=1")
    assert result.stdout.splitlines()[0] == "     2\tline 2"


async def test_read_missing_file(router: BashRouter) -> None:
    result = await router.route("read nope.txt")
    assert result.exit_code != 0 and result.is_error
    assert "nope.txt: no such file" in result.text
    assert result.category is FailureCategory.NOT_FOUND


async def test_read_directory(router: BashRouter, workdir: Path) -> None:
    (workdir / "d").mkdir()
    result = await router.route("read d")
    assert result.is_error and "is a directory" in result.text


async def test_read_binary_file(router: BashRouter, workdir: Path) -> None:
    (workdir / "b.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    result = await router.route("read b.bin")
    assert result.is_error and "binary file" in result.text
    assert "\x00" not in result.text


async def test_read_invalid_utf8(router: BashRouter, workdir: Path) -> None:
    (workdir / "latin.txt").write_bytes(b"ok\ncaf\xe9\n")
    result = await router.route("read latin.txt")
    assert result.is_error and "not valid UTF-8 (line 2" in result.text


async def test_read_bad_numbers(router: BashRouter, five: Path) -> None:
    for line in (
        "read five.txt --offset -1",
        "read five.txt --limit many",
        "read five.txt --limit",
    ):
        result = await router.route(line)
        assert result.category is FailureCategory.INVALID_USAGE, line


async def test_read_of_2000_lines_reaches_the_model_whole(
    router: BashRouter, workdir: Path
) -> None:
    """`read` pages itself; the router must not cut the middle out to head + tail."""
    (workdir / "long.txt").write_text("".join(f"row {i}\n" for i in range(3000)))
    result = await router.route("read long.txt")
    lines = result.text.splitlines()
    assert lines[:2000] == [f"{i + 1:>6}\trow {i}" for i in range(2000)]
    assert lines[2000:] == ["[more lines follow; continue with: read long.txt --offset 2000]"]
    assert "omitted" not in result.text


async def test_read_piped_into_a_native_command_is_bounded_as_native_output(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "long.txt").write_text("".join(f"row {i}\n" for i in range(3000)))
    result = await router.route("read long.txt | cat")
    assert "omitted" in result.text  # the pipeline's output is native: head + tail


async def test_read_keeps_crlf_files_readable(router: BashRouter, workdir: Path) -> None:
    (workdir / "dos.txt").write_bytes(b"a\r\nb\r\n")
    result = await router.route("read dos.txt")
    assert result.stdout == numbered("a\nb\n")


async def test_read_offset_past_end(router: BashRouter, five: Path) -> None:
    result = await router.route("read five.txt --offset 99")
    assert result.exit_code == 0 and "fewer lines" in result.stdout


async def test_read_huge_file_is_paged_not_loaded(router: BashRouter, workdir: Path) -> None:
    big = workdir / "big.log"
    line = b"x" * 99 + b"\n"
    with big.open("wb") as fh:
        block = line * 10_000
        for _ in range(200):  # 200 MB
            fh.write(block)
    try:
        result = await router.route("read big.log --offset 1000000 --limit 3")
        assert result.exit_code == 0
        assert result.stdout.splitlines()[:3] == [
            f"{n:>6}\t" + "x" * 99 for n in range(1_000_001, 1_000_004)
        ]
        assert "--offset 1000003" in result.stdout
        first = await router.route("read big.log")
        assert first.exit_code == 0
        assert len(first.stdout) < 200 * 1024
        assert "continue with: read big.log --offset" in first.stdout
    finally:
        big.unlink()


async def test_read_long_lines_are_cut(router: BashRouter, workdir: Path) -> None:
    (workdir / "wide.txt").write_text("y" * 50_000 + "\nshort\n")
    result = await router.route("read wide.txt")
    assert "line cut at 2000 characters" in result.stdout
    assert "short" in result.stdout


async def test_read_resolves_against_the_shell_cwd(router: BashRouter, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    (workdir / "sub" / "inner.txt").write_text("inside\n")
    await router.route("cd sub")
    result = await router.route("read inner.txt")
    assert result.stdout == "     1\tinside\n"


# ----------------------------------------------------------------- write


async def test_write_new_file(router: BashRouter, workdir: Path) -> None:
    result = await router.route('write new.txt "Test content written by Synapse"')
    assert result.exit_code == 0, result.text
    assert (workdir / "new.txt").read_text() == "Test content written by Synapse"


async def test_write_overwrites(router: BashRouter, workdir: Path) -> None:
    (workdir / "w.txt").write_text("old content that is longer")
    result = await router.route('write w.txt "New content"')
    assert result.exit_code == 0
    assert (workdir / "w.txt").read_text() == "New content"
    assert "Overwrote" in result.stdout


async def test_write_creates_parent_directories(router: BashRouter, workdir: Path) -> None:
    result = await router.route('write a/b/c/nested.txt "Nested content"')
    assert result.exit_code == 0
    assert (workdir / "a" / "b" / "c" / "nested.txt").read_text() == "Nested content"


async def test_write_keeps_the_file_mode(router: BashRouter, workdir: Path) -> None:
    target = workdir / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    await router.route('write run.sh "#!/bin/sh"')
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


async def test_write_usage_errors(router: BashRouter, workdir: Path) -> None:
    for line in ("write", "write only-file.txt", "write f.txt unquoted several words"):
        result = await router.route(line)
        assert result.category is FailureCategory.INVALID_USAGE, line
        assert 'Bash(command="write --help")' in result.text
    assert not (workdir / "only-file.txt").exists()
    assert not (workdir / "f.txt").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
async def test_write_not_writable(router: BashRouter, workdir: Path) -> None:
    target = workdir / "ro.txt"
    target.write_text("keep")
    target.chmod(0o444)
    result = await router.route('write ro.txt "x"')
    assert result.is_error and "permission denied" in result.text
    assert target.read_text() == "keep"


async def test_write_into_a_read_only_directory_fails_cleanly(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "file").write_text("not a dir")
    result = await router.route('write file/child.txt "x"')
    assert result.is_error
    assert (workdir / "file").read_text() == "not a dir"


def test_atomic_write_never_leaves_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "data.txt"
    target.write_text("the old, complete content\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(target, "new start" + "\ud800" + "never written")
    assert target.read_text() == "the old, complete content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["data.txt"]


def test_atomic_write_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="is a directory"):
        atomic_write(tmp_path, "x")


# ------------------------------------------------------------------ edit

EDIT_TEXT = "Hello World\nGoodbye World\nHello Again"


async def test_edit_replaces_only_the_first(router: BashRouter, workdir: Path) -> None:
    (workdir / "e.txt").write_text(EDIT_TEXT)
    result = await router.route('edit e.txt "Hello" "Hi"')
    assert result.exit_code == 0
    assert (workdir / "e.txt").read_text() == "Hi World\nGoodbye World\nHello Again"
    assert "1 more left" in result.stdout


async def test_edit_all(router: BashRouter, workdir: Path) -> None:
    (workdir / "e.txt").write_text(EDIT_TEXT)
    result = await router.route('edit e.txt "Hello" "Hi" --all')
    assert result.exit_code == 0
    text = (workdir / "e.txt").read_text()
    assert text == "Hi World\nGoodbye World\nHi Again"
    assert "Hello" not in text


async def test_edit_multiline_and_delete(router: BashRouter, workdir: Path) -> None:
    (workdir / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = await router.route("edit m.py 'a = 1\nb = 2\n' ''")
    assert result.exit_code == 0
    assert (workdir / "m.py").read_text() == "c = 3\n"


async def test_edit_old_not_found_changes_nothing(router: BashRouter, workdir: Path) -> None:
    (workdir / "e.txt").write_text(EDIT_TEXT)
    before = (workdir / "e.txt").stat().st_mtime_ns
    result = await router.route('edit e.txt "Absent" "X"')
    assert result.is_error and result.exit_code != 0
    assert "not found" in result.text
    assert (workdir / "e.txt").read_text() == EDIT_TEXT
    assert (workdir / "e.txt").stat().st_mtime_ns == before


async def test_edit_empty_old_is_invalid(router: BashRouter, workdir: Path) -> None:
    (workdir / "e.txt").write_text(EDIT_TEXT)
    result = await router.route('edit e.txt "" "X"')
    assert result.category is FailureCategory.INVALID_USAGE
    assert (workdir / "e.txt").read_text() == EDIT_TEXT


async def test_edit_bad_files(router: BashRouter, workdir: Path) -> None:
    (workdir / "bin").write_bytes(b"\x00\x01Hello")
    (workdir / "dir").mkdir()
    missing = await router.route('edit missing.txt "a" "b"')
    binary = await router.route('edit bin "Hello" "Hi"')
    directory = await router.route('edit dir "a" "b"')
    assert missing.category is FailureCategory.NOT_FOUND
    assert "binary file" in binary.text and (workdir / "bin").read_bytes() == b"\x00\x01Hello"
    assert "is a directory" in directory.text


async def test_edit_wrong_arg_count(router: BashRouter, workdir: Path) -> None:
    (workdir / "e.txt").write_text(EDIT_TEXT)
    result = await router.route("edit e.txt Hello")
    assert result.category is FailureCategory.INVALID_USAGE
    assert 'Bash(command="edit --help")' in result.text


async def test_edit_keeps_mode(router: BashRouter, workdir: Path) -> None:
    target = workdir / "x.sh"
    target.write_text("echo a\n")
    target.chmod(0o755)
    await router.route('edit x.sh "a" "b"')
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert target.read_text() == "echo b\n"


# ------------------------------------------------------------- diffs of a tool call


async def test_route_result_carries_one_diff_per_changed_file(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("one\ntwo\n")
    result = await router.route(
        "edit a.txt one uno && edit a.txt two dos && write b.txt 'new\n' && cat a.txt | write c.txt"
    )
    assert result.exit_code == 0, result.text
    assert result.diffs == (
        FileDiff(str(workdir / "a.txt"), "one\ntwo\n", "uno\ndos\n"),
        FileDiff(str(workdir / "b.txt"), None, "new\n"),
        FileDiff(str(workdir / "c.txt"), None, "uno\ndos\n"),
    )
    assert result.diffs[0].line_counts() == (2, 2)
    assert (await router.route("ls && cat a.txt")).diffs == ()
    # The next call starts with nothing recorded.
    again = await router.route("write b.txt 'newer\n'")
    assert again.diffs == (FileDiff(str(workdir / "b.txt"), "new\n", "newer\n"),)


async def test_no_diff_for_a_file_too_big_or_not_text(router: BashRouter, workdir: Path) -> None:
    (workdir / "bin.dat").write_bytes(b"\0\1\2")
    result = await router.route("write bin.dat 'now text'")
    assert result.exit_code == 0 and result.diffs == ()
    big = "x" * (MAX_DIFF_CHARS + 1)
    (workdir / "big.txt").write_text(big)
    result = await router.route("edit big.txt xxx yyy")
    assert result.exit_code == 0 and result.diffs == ()
    assert (workdir / "big.txt").read_text().startswith("yyy")


async def test_pipes_and_devices_are_refused_never_read(router: BashRouter, workdir: Path) -> None:
    """A FIFO or `/dev/zero` behind a name (the model can make both) must not hang or
    fill the server: read, edit and write (its diff) refuse or skip them at once."""
    os.mkfifo(workdir / "pipe")
    (workdir / "zero").symlink_to("/dev/zero")
    for name in ("pipe", "zero"):
        out = await router.route(f"read {name}")
        assert out.exit_code == 1 and "not a regular file" in out.text, out.text
        out = await router.route(f"edit {name} a b")
        assert out.exit_code == 1 and "not a regular file" in out.text, out.text
    written = await router.route("write pipe 'now a file'")
    assert written.exit_code == 0 and written.diffs == ()  # no diff: the old side was no file
    assert (workdir / "pipe").read_text() == "now a file"


async def test_read_refuses_synapses_own_store_but_not_offloaded_outputs(
    router: BashRouter, settings: Settings
) -> None:
    """`read` runs outside the sandbox: other sessions' conversations and the checkpoint
    store stay out of the model's reach; an offloaded output (what a compacted history
    tells the model to read) does not."""
    sessions = settings.synapse_home / "sessions" / "other-session"
    (sessions / "offload").mkdir(parents=True)
    (sessions / "events.jsonl").write_text('{"secret": "pasted by the user"}\n')
    (sessions / "offload" / "toolu_1.txt").write_text("the long output\n")
    (settings.synapse_home / "checkpoints").mkdir(exist_ok=True)
    (settings.synapse_home / "checkpoints" / "x").write_text("old file text\n")
    for refused in (sessions / "events.jsonl", settings.synapse_home / "checkpoints" / "x"):
        out = await router.route(f"read {refused}")
        assert out.exit_code == 1 and "Synapse's own store" in out.text, out.text
    out = await router.route(f"read {sessions / 'offload' / 'toolu_1.txt'}")
    assert out.exit_code == 0 and "the long output" in out.text
