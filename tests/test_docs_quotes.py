"""Issue 14 item 19: the result texts docs/protocol.md quotes are what the code prints.

Every `synapse.shell.run` example in docs/protocol.md (a JSON request with `command`,
then a JSON result with `text`) is run for real, in a scratch folder holding the files
the examples assume, and the quoted result must equal the real one field by field.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = ROOT / "docs" / "protocol.md"
# The files the protocol examples work on (`edit src/a.py 'foo' 'bar'`).
SCRATCH_FILES = {"src/a.py": "def foo():\n    return 1\n"}
FIELDS = ("exitCode", "stdout", "stderr", "isError", "layer", "category", "text")


def json_blocks(text: str) -> list[Any]:
    out: list[Any] = []
    for body in re.findall(r"^```json\n(.*?)^```", text, re.M | re.S):
        try:
            out.append(json.loads(body))
        except ValueError:
            out.append(None)
    return out


def shell_run_examples() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    blocks = json_blocks(PROTOCOL.read_text(encoding="utf-8"))
    pairs = []
    for request, result in zip(blocks, blocks[1:], strict=False):
        if (
            isinstance(request, dict)
            and isinstance(result, dict)
            and "command" in request
            and "workspaceUri" in request
            and "text" in result
        ):
            pairs.append((request, result))
    return pairs


def test_the_protocol_doc_has_shell_run_examples() -> None:
    assert shell_run_examples(), "no synapse.shell.run request/result pair found"


@pytest.mark.parametrize(
    ("request_", "quoted"), shell_run_examples(), ids=lambda v: str(v.get("command", ""))[:40]
)
def test_quoted_results_are_what_the_code_prints(
    request_: dict[str, Any], quoted: dict[str, Any], tmp_path: Path
) -> None:
    for name, content in SCRATCH_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", "--json", request_["command"]],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    real = json.loads(proc.stdout.splitlines()[-1])
    for field in FIELDS:
        if field in quoted:
            assert quoted[field] == real[field], (field, quoted[field], real[field])


@pytest.mark.parametrize(
    ("content", "expected"), [("x", "1 byte, 1 line"), ("a\nb\n", "4 bytes, 2 lines")]
)
def test_write_counts_are_pluralised(content: str, expected: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "exec", f"write f.txt '{content}'"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.stdout == f"Created f.txt ({expected})\n", proc.stdout + proc.stderr
