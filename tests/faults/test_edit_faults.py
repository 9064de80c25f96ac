"""Fault drill, the file built-ins: concurrent writers lose nothing they reported,
symlinks stay links, CRLF files take multi-line edits, and a huge line cannot
make `read` hold the whole file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from synapse_lsp.router import BashRouter

EDITS_PER_PROCESS = 60


def _exec(cwd: Path, home: Path, *commands: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "--json", *commands],
        cwd=cwd,
        env={**os.environ, "SYNAPSE_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_editing_one_file_lose_no_reported_edit(tmp_path: Path) -> None:
    """Two `synapse exec` processes × 60 edits of distinct markers in one file. Before
    the lock, all 120 said "Replaced" and dozens were silently overwritten by the
    other process's read-modify-write."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    target = work / "shared.txt"
    names = ("A", "B")
    markers = {n: [f"<{n}{i:02d}>" for i in range(EDITS_PER_PROCESS)] for n in names}
    target.write_text("".join(f"{m}\n" for n in names for m in markers[n]))
    procs = []
    for n in names:
        # Both wait at a barrier (a file the test creates) so that their edits overlap.
        barrier = f"touch ready-{n}; until [ -e go ]; do sleep 0.005; done"
        edits = [f"edit shared.txt '{m}' '{m} done by {n}'" for m in markers[n]]
        procs.append(_exec(work, tmp_path / f"home-{n}", barrier, *edits))
    deadline = time.monotonic() + 60
    while not all((work / f"ready-{n}").exists() for n in names):
        assert time.monotonic() < deadline, "the exec processes never reached the barrier"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    (work / "go").touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    final = target.read_text()
    replaced = 0
    for n, (stdout, stderr) in zip(names, outputs, strict=True):
        records = [json.loads(line) for line in stdout.splitlines()][1:]
        assert len(records) == EDITS_PER_PROCESS, stderr
        for marker, record in zip(markers[n], records, strict=True):
            if record["stdout"].startswith("Replaced"):
                replaced += 1
                assert f"{marker} done by {n}\n" in final, f"{marker}: reported, then lost"
            else:  # a refusal is allowed only if it says what happened
                assert "changed on disk" in record["text"] or "not found" in record["text"]
    # Under the lock no edit even has to be refused: each one reads after the last write.
    assert replaced == 2 * EDITS_PER_PROCESS
    assert final.count(" done by ") == 2 * EDITS_PER_PROCESS
    assert sorted(p.name for p in work.iterdir()) == ["go", "ready-A", "ready-B", "shared.txt"]


async def test_edit_and_write_through_a_symlink_keep_the_link(
    router: BashRouter, workdir: Path
) -> None:
    real_dir = workdir / "real"
    real_dir.mkdir()
    real = real_dir / "config.txt"
    real.write_text("mode = slow\n")
    real.chmod(0o640)
    link = workdir / "link.txt"
    link.symlink_to(real)

    edited = await router.route("edit link.txt 'slow' 'fast'")
    assert edited.exit_code == 0, edited.text
    assert link.is_symlink() and link.readlink() == real
    assert real.read_text() == "mode = fast\n"
    assert (real.stat().st_mode & 0o777) == 0o640

    written = await router.route("write link.txt 'mode = off'")
    assert written.exit_code == 0, written.text
    assert link.is_symlink() and link.readlink() == real
    assert real.read_text() == "mode = off"

    # A dangling link: the write creates the file it names; the link stays.
    dangling = workdir / "later.txt"
    dangling.symlink_to(real_dir / "made-later.txt")
    assert (await router.route("write later.txt 'new'")).exit_code == 0
    assert dangling.is_symlink() and (real_dir / "made-later.txt").read_text() == "new"
    # Nothing left behind: no lock or temp files in either folder.
    assert sorted(p.name for p in real_dir.iterdir()) == ["config.txt", "made-later.txt"]
    assert sorted(p.name for p in workdir.iterdir()) == ["later.txt", "link.txt", "real"]
