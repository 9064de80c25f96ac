"""Fault drill, session stores (issue 28 item 8): a folder or log replaced by a symlink
is never followed, a FIFO never blocks a resume, and a full disk is one line that loses
no earlier record."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from synapse_lsp.agent.store import ChatStore, SessionStoreError

MESSAGE = {"role": "user", "content": "hello"}


def _made(root: Path) -> tuple[ChatStore, str]:
    store = ChatStore(root)
    sid = "2026-11-28T07-00-00-abcd"
    store.create(sid, "t", None)
    store.append_message(sid, MESSAGE)
    store.close()
    return store, sid


def test_a_session_folder_replaced_by_a_symlink_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store, sid = _made(root)
    elsewhere = tmp_path / "elsewhere"
    (root / sid).rename(elsewhere)
    (root / sid).symlink_to(elsewhere)
    before = (elsewhere / "events.jsonl").read_bytes()
    fresh = ChatStore(root)
    with pytest.raises(SessionStoreError, match="symlink"):
        fresh.append_message(sid, MESSAGE)
    with pytest.raises(SessionStoreError, match="symlink"):
        fresh.load(sid)
    assert (elsewhere / "events.jsonl").read_bytes() == before  # nothing appended outside


def test_a_log_replaced_by_a_symlink_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _, sid = _made(root)
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    log = root / sid / "events.jsonl"
    log.unlink()
    log.symlink_to(outside)
    fresh = ChatStore(root)
    with pytest.raises(SessionStoreError, match="symlink"):
        fresh.append_message(sid, MESSAGE)
    with pytest.raises(SessionStoreError, match="symlink"):
        fresh.load(sid)
    assert outside.read_bytes() == b""


def test_a_fifo_log_does_not_hang_a_resume(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _, sid = _made(root)
    log = root / sid / "events.jsonl"
    log.unlink()
    os.mkfifo(log)
    # In a child, so a regression hangs that child (killed by the timeout), not the suite.
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from synapse_lsp.agent.store import ChatStore, SessionStoreError
        store = ChatStore(Path({str(root)!r}))
        for call in (lambda: store.load({sid!r}), lambda: store.append_message({sid!r}, {{}})):
            try:
                call()
            except SessionStoreError as exc:
                print("refused:", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("not a regular file" in line for line in lines), done.stdout


def test_a_full_disk_is_one_line_and_loses_no_earlier_record(tmp_path: Path) -> None:
    """A real write failure: the child's file size limit (RLIMIT_FSIZE; Python ignores
    SIGXFSZ, so writes past it fail with EFBIG as a full disk fails with ENOSPC)."""
    root = tmp_path / "sessions"
    _, sid = _made(root)
    log = root / sid / "events.jsonl"
    before = log.read_bytes()
    code = textwrap.dedent(
        f"""
        import resource
        from pathlib import Path
        from synapse_lsp.agent.store import ChatStore, SessionStoreError
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 40}, {len(before) + 40}))
        store = ChatStore(Path({str(root)!r}))
        try:
            store.append_message({sid!r}, {{"role": "user", "content": "x" * 5000}})
        except SessionStoreError as exc:
            print("append:", exc)
        try:
            store.create("2026-11-28T07-00-01-abcd", "new", None)
        except SessionStoreError as exc:
            print("create:", exc)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("append: cannot save to session") and "File too large" in lines[0]
    assert "records before this one are kept" in lines[0]
    assert len(lines) == 1 or lines[1].startswith("create: cannot save a new session")
    loaded = ChatStore(root).load(sid)
    assert len(loaded.messages) == 1 and "hello" in str(loaded.messages[0])
    assert all("torn last record" in p for p in loaded.problems)  # repaired at the next append
    assert log.read_bytes().startswith(before)
