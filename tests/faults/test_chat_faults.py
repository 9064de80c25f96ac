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
