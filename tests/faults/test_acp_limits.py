"""Fault drill, ACP limits (issue 28 item 9): a request over the documented 50 MiB
message limit is answered with its own id (not left waiting) and logged; a session id
that is a path is invalid params, not an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

SYNAPSE = str(Path(sys.executable).parent / "synapse")


def _talk(home: Path, lines: list[bytes], want: set[int]) -> dict[int, dict[str, Any]]:
    """`synapse acp` on real pipes: send `lines`, read answers until every id in `want`
    came (stdin stays open meanwhile), bounded by a timeout."""
    env = dict(os.environ, SYNAPSE_HOME=str(home))
    proc = subprocess.Popen(
        [SYNAPSE, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    answers: dict[int, dict[str, Any]] = {}

    def feed() -> None:
        assert proc.stdin is not None
        for line in lines:
            proc.stdin.write(line)
            proc.stdin.flush()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        for raw in proc.stdout:
            message = json.loads(raw)
            if isinstance(message.get("id"), int):
                answers[message["id"]] = message
            if want <= answers.keys():
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait(timeout=30)
    return answers


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_a_request_over_the_limit_is_answered_with_its_id_and_logged(tmp_path: Path) -> None:
    huge = (
        b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":"'
        + (b"A" * (60 << 20))
        + b'"}}\n'
    )
    after = _line({"jsonrpc": "2.0", "id": 8, "method": "session/list", "params": {}})
    answers = _talk(tmp_path, [_line(INIT), huge, after], {1, 7, 8})
    assert answers[7]["error"]["code"] == -32600
    assert "over the limit of 50 MiB" in answers[7]["error"]["data"]["details"]
    assert "result" in answers[8]  # the connection goes on
    log = (tmp_path / "logs" / "acp.log").read_text()
    assert "over the 50 MiB limit" in log


def test_a_session_id_that_is_a_path_is_invalid_params(tmp_path: Path) -> None:
    load = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/load",
        "params": {"sessionId": "../../../etc", "cwd": str(tmp_path), "mcpServers": []},
    }
    answers = _talk(tmp_path, [_line(INIT), _line(load)], {1, 2})
    error = answers[2]["error"]
    assert error["code"] == -32602, error
    assert "invalid session id" in json.dumps(error)
    assert "Traceback" not in json.dumps(error)
