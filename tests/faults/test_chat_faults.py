"""Fault drill, `synapse chat -p`: stdout carries only ever the final answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fake_api import FakeApiProcess


def test_a_dropped_streams_discarded_text_never_reaches_stdout(tmp_path: Path) -> None:
    script: list[Any] = [
        {"text": "half an answer that is cut", "chunk_size": 4, "drop_after": 6},
        {"text": "The full answer."},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = {**os.environ, **api.env(), "SYNAPSE_HOME": str(tmp_path / "home")}
        proc = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", "q"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "The full answer.\n"
    assert "discarded" in proc.stderr  # the person watching is told


def test_chat_p_exits_fast_and_keeps_the_last_record(tmp_path: Path) -> None:
    """`synapse chat -p` ends without the interpreter's teardown (os._exit after closing
    everything): the session's last record, the answer, must still be on disk, the shell
    gone, and stdout complete."""
    from tests.fake_api import FakeApiProcess
    from tests.test_repl import chat, home_env

    work = tmp_path / "work"
    work.mkdir()
    with FakeApiProcess([{"commands": ["echo $$ > shell.pid"]}, {"text": "All done."}],
                        tmp_path / "api") as api:  # fmt: skip
        env = home_env(tmp_path / "home", api.env())
        proc = chat(["-p", "go"], env, work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "All done.\n"
    records = [
        line
        for path in (tmp_path / "home" / "sessions").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert records and any("All done." in line for line in records[-3:]), records[-3:]
    pid = int((work / "shell.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
