"""Fault drill, output volume: spill files have a per-command and a total cap, output
of background jobs is never mixed into a later command's, and binary output reaches
the model as a summary, not as replacement characters."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from synapse_lsp.config import Settings
from synapse_lsp.output import SpillBudget, enforce_total, looks_binary, sniff
from synapse_lsp.shell import ShellSession

MIB = 1 << 20


def _outputs(home: Path) -> list[Path]:
    folder = home / "outputs"
    return [p for p in folder.iterdir() if p.name != ".lock"] if folder.is_dir() else []


async def _shell(tmp_path: Path, **settings: int) -> ShellSession:
    shell = ShellSession(tmp_path, Settings(synapse_home=tmp_path / "home", **settings))  # type: ignore[arg-type]
    await shell.start()
    return shell


async def test_a_huge_output_keeps_running_past_the_per_command_cap(tmp_path: Path) -> None:
    """`yes | head -c 1000000000` left a 1 GB file. The file stops at the cap, the
    command runs to its end, and the result says how much was dropped."""
    shell = await _shell(tmp_path, spill_max_bytes=MIB)
    try:
        result = await shell.run("yes | head -c 20000000; echo; echo the-real-end")
        assert result.exit_code == 0 and result.truncated
        assert result.full_output_path is not None
        assert result.full_output_path.stat().st_size == MIB
        assert f"the last {20_000_000 + 1 + 13 - MIB} bytes were dropped" in result.stdout
        assert "1 MiB per-command cap" in result.stdout
        assert result.stdout.endswith("the-real-end\n")  # the tail is still the real end
        # stdout and stderr share the command's allowance.
        both = await shell.run(
            "head -c 800000 /dev/zero | tr '\\0' a; head -c 800000 /dev/zero | tr '\\0' b >&2"
        )
        sizes = sum(p.stat().st_size for p in (both.full_output_path,) if p is not None)
        spilled = [p for p in _outputs(tmp_path / "home") if p != result.full_output_path]
        assert sum(p.stat().st_size for p in spilled) == MIB and sizes <= MIB
    finally:
        await shell.close()


async def test_the_spill_directory_stays_under_its_total(tmp_path: Path) -> None:
    home = tmp_path / "home"
    outputs = home / "outputs"
    outputs.mkdir(parents=True)
    old = time.time() - 3600
    for i in range(6):
        path = outputs / f"old-{i}.txt"
        path.write_bytes(b"x" * MIB)
        os.utime(path, (old + i, old + i))
    fresh = outputs / "fresh.txt"  # another process's command, written just now
    fresh.write_bytes(b"y" * MIB)
    locked = outputs / "locked.txt"  # another process's command, still writing (lock held)
    locked.write_bytes(b"z" * MIB)
    os.utime(locked, (old - 10, old - 10))
    held = os.open(locked, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        shell = await _shell(tmp_path, spill_max_bytes=MIB, spill_total_bytes=4 * MIB)
        try:
            result = await shell.run("yes | head -c 3000000")
            assert result.full_output_path is not None
        finally:
            await shell.close()
        names = {p.name for p in _outputs(home)}
        total = sum(p.stat().st_size for p in _outputs(home))
        assert total <= 4 * MIB, names
        assert "fresh.txt" in names and "locked.txt" in names
        assert result.full_output_path.name in names
        assert "old-0.txt" not in names and "old-5.txt" in names  # oldest first
    finally:
        os.close(held)
    # Called directly: nothing to do when under the total.
    assert enforce_total(outputs, 1 << 30) == 0


async def test_background_output_is_not_mixed_into_the_next_command(tmp_path: Path) -> None:
    """`yes &` then other commands used to spill 1.8 GB in 2 s and bury the next
    command's own output: each command now writes to FIFOs of its own."""
    shell = await _shell(tmp_path, spill_max_bytes=MIB)
    try:
        first = await shell.run("(for i in 1 2 3; do echo bg-$i; sleep 0.1; done) & echo started")
        # bg-1 may come while it runs, before or after `started`: its own output
        assert first.stdout in ("started\n", "started\nbg-1\n", "bg-1\nstarted\n")
        second = await shell.run("sleep 0.6; echo mine")
        assert second.stdout == "mine\n"
        assert "background jobs of command" in second.stderr and "bg-3" in second.stderr
        # (started first: a flood before it could cut it out of the bounded output)
        flood = await shell.run("echo started; yes flood &")
        assert flood.stdout.startswith("started\n")  # what it writes meanwhile is this command's
        for _ in range(5):
            result = await shell.run("sleep 0.2; echo mine")
            assert result.stdout == "mine\n" and "flood" not in result.stdout
        assert "background jobs of command" in result.stderr
        total = sum(p.stat().st_size for p in _outputs(tmp_path / "home"))
        assert total <= MIB + 4096, total  # the job's file stops at the per-command cap
    finally:
        await shell.close()


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("head -c 5000 /dev/urandom | gzip", "gzip data"),
        ('head -c 300 "$(command -v bash)"', "ELF"),
        ("printf '\\x89PNG\\r\\n\\x1a\\n\\0\\0\\0\\rIHDR'", "PNG image"),
        ("head -c 3000 /dev/urandom", None),
    ],
)
async def test_binary_output_is_summarised(tmp_path: Path, command: str, kind: str | None) -> None:
    shell = await _shell(tmp_path)
    try:
        result = await shell.run(command)
        assert result.stdout.startswith("[binary output: "), result.stdout[:200]
        assert "\ufffd" not in result.stdout
        assert (kind or "binary data") in result.stdout
        assert result.full_output_path is not None and result.full_output_path.stat().st_size > 0
        text = await shell.run("printf 'h\\xc3\\xa9llo w\\xc3\\xb6rld\\n'")
        assert text.stdout == "héllo wörld\n"
    finally:
        await shell.close()


def test_sniffing_and_binary_detection() -> None:
    assert not looks_binary("naïve café ✓ — text\n".encode() * 100)
    assert looks_binary(b"abc\x00def")
    assert looks_binary(bytes(range(128, 256)) * 4)
    assert sniff(b"\x1f\x8b\x08") == "gzip data" and sniff(b"zzz") == "binary data"
    budget = SpillBudget()
    assert budget.max_bytes == 64 * MIB and budget.total_bytes == 1 << 30
