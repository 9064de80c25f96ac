"""Helpers for tests that need the fake Messages API in another process (REPL, LSP, editors).

In-process tests use `synapse_lsp.agent.scripted_api.FakeAnthropic` directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

FAKE_KEY = "sk-ant-fake-test-key"


class FakeApiProcess:
    """`synapse fake-api` running a script; `.base_url`, `.requests()`, `.env()`."""

    def __init__(self, script: Any, tmp_path: Path) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.script_path = tmp_path / "fake-api-script.json"
        self.script_path.write_text(json.dumps(script), encoding="utf-8")
        self.port_file = tmp_path / "fake-api.port"
        self.port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "fake-api", "--script"]
            + [str(self.script_path), "--port-file", str(self.port_file)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 20
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                self.close()
                raise RuntimeError(f"fake-api did not start: {err}")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        self.base_url = f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a child that should talk to this server."""
        env = dict(os.environ)
        env.update(ANTHROPIC_API_KEY=FAKE_KEY, ANTHROPIC_BASE_URL=self.base_url, **extra)
        return env

    def requests(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.base_url}/_requests", timeout=10) as resp:
            data: list[dict[str, Any]] = json.loads(resp.read())
        return data

    def message_bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests() if r["path"].split("?", 1)[0] == "/v1/messages"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> FakeApiProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
