"""The project as a wheel: built, installed into a fresh venv, `synapse lsp` answers.

What a user without the repository does (docs/vscode.md, "Install the server"):
`uv build` (or `python -m build`), `pip install dist/*.whl`, `synapse lsp`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from synapse_lsp.lsp.names import PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[1]
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")

pytestmark = pytest.mark.skipif(not Path(UV).exists(), reason="uv is installed by ./dev setup")


def _frame(msg: dict[str, object]) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_message(stream: object) -> dict[str, object]:
    assert hasattr(stream, "readline") and hasattr(stream, "read")
    length = 0
    while True:
        line: bytes = stream.readline()
        assert line, "the server closed stdout"
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    data: bytes = stream.read(length)
    result: dict[str, object] = json.loads(data)
    return result


@pytest.mark.timeout(300)
def test_wheel_installs_and_serves(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([UV, "build", "-q", "--wheel", "-o", str(dist), str(ROOT)], check=True)
    (wheel,) = dist.glob("synapse_lsp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "synapse_lsp/_prompts/system.md" in names  # the prompts travel with the package
    assert not [n for n in names if n.startswith("tests/")]

    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
        + ["-c", str(ROOT / "requirements.lock"), str(wheel)],
        check=True,
        env=env,
    )
    synapse = venv / "bin" / "synapse"
    home = tmp_path / "home"
    env.update(HOME=str(home), SYNAPSE_HOME=str(home / ".synapse"))
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    out = subprocess.run([str(synapse), "--version"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("synapse "), out
    # Imported from the venv, not from this checkout.
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import synapse_lsp; print(synapse_lsp.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(venv) in where.stdout

    proc = subprocess.Popen(
        [str(synapse), "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=tmp_path
    )
    try:
        assert proc.stdin and proc.stdout
        init: dict[str, object] = {"processId": None, "rootUri": None, "capabilities": {}}
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        proc.stdin.write(_frame(request))
        proc.stdin.flush()
        while True:
            msg = _read_message(proc.stdout)
            if msg.get("id") == 1:
                break
        result = msg["result"]
        assert isinstance(result, dict)
        assert result["capabilities"]["experimental"]["synapse"]["protocolVersion"] == (
            PROTOCOL_VERSION
        )
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.flush()
        while _read_message(proc.stdout).get("id") != 2:
            pass
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
