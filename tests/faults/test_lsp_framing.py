"""Fault drill, LSP framing: a wrong or missing Content-Length must never leave the
server reading out of step, answering nothing; it exits with a logged error (the
editor restarts it), and well-framed input with extra headers is still served."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


def frame(obj: dict[str, Any], *, extra: bytes = b"") -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n" % len(body) + extra + b"\r\n" + body


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"capabilities": {}, "processId": None, "rootUri": None},
}
SHUTDOWN = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}


def serve(home: Path, data: bytes) -> tuple[int, bytes]:
    """The server on real pipes, given `data` and then end of input (bounded: no hang)."""
    env = dict(os.environ, SYNAPSE_HOME=str(home))
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp"], input=data, capture_output=True, env=env,
        timeout=60,
    )  # fmt: skip
    return proc.returncode, proc.stdout


def test_well_framed_input_with_extra_headers_is_served(tmp_path: Path) -> None:
    content_type = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
    env = dict(os.environ, SYNAPSE_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(frame(INIT, extra=content_type) + frame(SHUTDOWN, extra=content_type))
    proc.stdin.flush()
    out = b""
    deadline = time.monotonic() + 60
    while b'"id": 2' not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert b'"id": 1' in out and b'"id": 2' in out and b"out of step" not in out


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (b"Content-Length: 5\r\n\r\n" + json.dumps(SHUTDOWN).encode(), b"Content-Length 5"),
        (b"Content-Length: 500\r\n\r\n" + json.dumps(SHUTDOWN).encode(), b"Content-Length 500"),
        (b"Content-Type: x\r\n\r\n{}", b"without a valid Content-Length"),
        (b"content-length: 2\r\n\r\n{}", b"without a valid Content-Length"),
        (b"GET / HTTP/1.1\r\n", b"not a message header"),
    ],
)
def test_broken_framing_ends_the_server_with_a_logged_error(
    tmp_path: Path, broken: bytes, reason: bytes
) -> None:
    # What follows the broken message would be misread; the server must not pretend.
    data = frame(INIT) + broken + frame({**SHUTDOWN, "id": 3})
    code, out = serve(tmp_path, data)
    assert code == 1
    assert b"LSP input out of step" in out and reason in out  # told to the editor too
    log = (tmp_path / "logs" / "lsp.log").read_bytes()
    assert b"LSP input out of step" in log and reason in log


def test_requests_after_shutdown_are_answered_invalid_request(tmp_path: Path) -> None:
    """LSP: after `shutdown` a request gets InvalidRequest; pygls alone drops it and the
    client waits for ever."""
    status = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "workspace/executeCommand",
        "params": {"command": "synapse.status", "arguments": [{}]},
    }
    env = dict(os.environ, SYNAPSE_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(frame(INIT) + frame(SHUTDOWN))
    proc.stdin.flush()
    out = b""
    deadline = time.monotonic() + 60
    sent = False
    while b'"id": 3' not in out and time.monotonic() < deadline:
        if not sent and b'"id": 2' in out:  # shutdown answered: now a late request
            proc.stdin.write(frame(status))
            proc.stdin.flush()
            sent = True
        if select.select([proc.stdout], [], [], 1.0)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    proc.stdin.close()
    proc.wait(timeout=60)
    answer = out[out.index(b'"id": 3') - 200 :]
    assert b"-32600" in answer and b"shutting down" in answer


def test_a_content_length_over_the_limit_ends_the_server_while_input_stays_open(
    tmp_path: Path,
) -> None:
    """Issue 28 item 9: `Content-Length: 99999999999` with the pipe left open wedged
    the server silently (it waited for 100 GB). Over the documented limit it exits
    at once with a logged error; the editor restarts it."""
    env = dict(os.environ, SYNAPSE_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(frame(INIT) + b"Content-Length: 99999999999\r\n\r\n{")
        proc.stdin.flush()  # and left open
        assert proc.wait(timeout=60) == 1
    finally:
        proc.kill()
        proc.stdin.close()
    log = (tmp_path / "logs" / "lsp.log").read_bytes()
    assert b"Content-Length 99999999999 is over the limit of 64 MiB" in log


def test_stdin_from_dev_null_is_end_of_input_not_a_hang(tmp_path: Path) -> None:
    """/dev/null is a character device epoll refuses: the server must still see its end
    of input and exit (it used to wait forever), with stdout a pipe or a file."""
    env = dict(os.environ, SYNAPSE_HOME=str(tmp_path / "home"))
    for to_file in (False, True):
        with Path(os.devnull).open("rb") as null, (tmp_path / "out.txt").open("wb") as file:
            out = file if to_file else subprocess.PIPE
            proc = subprocess.run(
                [sys.executable, "-m", "synapse_lsp"], stdin=null, stdout=out,
                stderr=subprocess.PIPE, env=env, timeout=60,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert b"Traceback" not in proc.stderr
