"""One world for every layer: built-ins, extensions (an MCP tool, a skill script, their
wrappers) and native commands compose in one line and see the same files, in every
sandbox mode and in the no-bwrap fallback (docs/shell.md "One file system for
every layer", where this table is printed).

Each mode runs the whole table in order on one real workspace (`core.Workspace`: its
shells, its extension registry with a real MCP server and a skill, its permission
gate): a row's effects are what later rows read. A row expects the command's stdout
(exactly), or `REFUSED` (a non-zero exit, the file it names not written).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from synapse_lsp.core import Workspace
from synapse_lsp.policy.gate import ALLOW_ONCE, DENY
from synapse_lsp.question import Question

MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_servers" / "demo_server.py"
MODES = ("read-only", "workspace-write", "full-access", "fallback")
REFUSED = None  # the line fails and writes nothing

# (line, expected stdout: one value for every mode, or a value per mode). `T` is a
# name under /tmp unique to the run: `/tmp` paths are where layers used to differ.
ROWS: list[tuple[str, str | None | dict[str, str | None]]] = [
    ("read f.txt | grep beta", "beta\n"),
    ("command:search echo | grep -c mcp:demo:echo", "1\n"),
    ("mcp:demo:echo hello | tr a-z A-Z", "HELLO\n"),
    ("skill:count:lines f.txt | sort", "2\n"),
    (
        "echo made-by-echo | write w1.txt",
        {"read-only": REFUSED, "*": "Created w1.txt (13 bytes, 1 line)\n"},
    ),
    ("cat w1.txt", {"read-only": REFUSED, "*": "made-by-echo\n"}),
    (
        "cat f.txt | sort -r | write w2.txt",
        {"read-only": REFUSED, "*": "Created w2.txt (11 bytes, 2 lines)\n"},
    ),
    ("read w2.txt | head -1", {"read-only": REFUSED, "*": "beta\n"}),
    (
        "write w3.txt <<'EOF'\nfrom a heredoc\nEOF",
        {"read-only": REFUSED, "*": "Created w3.txt (15 bytes, 1 line)\n"},
    ),
    ("false | write w4.txt", REFUSED),
    ("ls w4.txt", REFUSED),
    ("read $(echo f.txt) | tail -1", "beta\n"),
    # read-only: an extension called from inside a command cannot be asked about
    ('echo "[$(mcp:demo:echo inner)]"', {"read-only": "[]\n", "*": "[inner]\n"}),
    ("read f.txt | head -1 && echo and-native", "alpha\nand-native\n"),
    ("read f.txt | head -1; echo listed", "alpha\nlisted\n"),
    ("read f.txt | head -1\necho newline", "alpha\nnewline\n"),
    (
        "mkdir -p sub; cd sub && read ../f.txt | tail -1; cd ..",
        {"read-only": REFUSED, "*": "beta\n"},
    ),
    ("echo native-first && read f.txt | head -1", "native-first\nalpha\n"),
    ("mcp:demo:echo $HOME | grep -c /", "1\n"),
    ("echo from-native > T.native; read T.native | cat", "from-native\n"),
    (
        "write T.builtin from-builtin",
        {"read-only": REFUSED, "*": "Created T.builtin (12 bytes, 1 line)\n"},
    ),
    ("cat T.builtin", {"read-only": REFUSED, "*": "from-builtin"}),
    ("skill:count:lines T.native", "1\n"),
    ("seq 1 30000 | tail -1", "30000\n"),
    ("mcp:demo:echo ~ | grep -c '^/'", "1\n"),
    ("skill:count:lines f.* | cat", "2\n"),
    ("read missing.txt; echo rc=$?", "rc=1\n"),
    ("cd .; read missing.txt || echo rc=$?", "rc=1\n"),
    ("true && mcp:demo:add 1 x; echo rc=$?", {"read-only": "rc=126\n", "*": "rc=2\n"}),
    ('mcp:demo:echo "two  spaces \\$HOME" | cat', "two  spaces $HOME\n"),
    ("mkdir -p T.d && cd T.d && pwd", "T.d\n"),
    ("exit 3", REFUSED),
    ("pwd", "T.d\n"),  # a fresh shell comes back where the last one was
]


def expected(row: str | None | dict[str, str | None], mode: str) -> str | None:
    if isinstance(row, dict):
        return row.get(mode, row["*"])
    return row


def table_markdown() -> str:
    """The table as docs/shell.md prints it (tests/test_docs_quotes.py keeps
    the two in step)."""
    lines = ["| line | " + " | ".join(MODES) + " |", "|---|" + "---|" * len(MODES)]
    for line, row in ROWS:
        cells = []
        for mode in MODES:
            want = expected(row, mode)
            cells.append("refused" if want is None else "`" + want.strip().replace("\n", "⏎") + "`")
        shown = line.replace("\n", "⏎").replace("|", "\\|")
        lines.append(f"| `{shown}` | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


class Answers:
    """Allows what a user would (a write outside the workspace, asked about), never a
    run outside the sandbox: the layers must meet inside it."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.deny = False

    async def __call__(self, question: Question) -> str | None:
        self.asked.append(question.message)
        rerun = "Re-run it outside the sandbox" in question.message
        if self.deny or rerun or ALLOW_ONCE not in question.actions:
            return DENY
        return ALLOW_ONCE


@pytest.fixture
async def world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Workspace, str, Path]]:
    mode: str = request.param
    if mode == "fallback":  # bwrap there but refused its namespaces (some containers)
        fake = tmp_path / "fake-bin"
        fake.mkdir()
        (fake / "bwrap").write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
        )
        (fake / "bwrap").chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    elif shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "mcp").mkdir(parents=True)
    (home / "mcp" / "mcp_servers.json").write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [str(MCP_SERVER)]}}})
    )
    script = home / "skills" / "count" / "scripts" / "lines.sh"
    script.parent.mkdir(parents=True)
    (home / "skills" / "count" / "SKILL.md").write_text(
        "---\nname: count\ndescription: Count the lines of a file\n---\n# count\n"
    )
    script.write_text('#!/bin/sh\nwc -l < "$1" | tr -d " "\n')
    script.chmod(0o755)
    work.mkdir()
    (work / "f.txt").write_text("alpha\nbeta\n")
    requested = "workspace-write" if mode == "fallback" else mode
    settings = Settings(synapse_home=home, command_timeout=60.0, sandbox=requested, network="off")
    status = sandbox.status(settings)
    assert status.sandboxed == (mode in ("read-only", "workspace-write")), status.describe()
    workspace = Workspace(work, settings, ask=Answers(), watch=False)
    token = f"/tmp/synapse-matrix-{uuid.uuid4().hex[:8]}"  # noqa: S108
    try:
        await workspace.registry_ready()
        assert workspace.registry is not None
        await workspace.registry.wait_for_mcp(60.0)
        yield workspace, token, work
    finally:
        await workspace.close()
        for leftover in Path("/tmp").glob(Path(token).name + "*"):  # noqa: S108
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()


@pytest.mark.parametrize("world", MODES, indirect=True)
async def test_every_layer_composes_and_sees_one_world(
    world: tuple[Workspace, str, Path], request: pytest.FixtureRequest
) -> None:
    workspace, token, work = world
    mode = request.node.callspec.params["world"]
    router = await workspace.start()
    got: list[str] = []
    wrong: list[str] = []
    for line, row in ROWS:
        want = expected(row, mode)
        if want is not None:
            want = want.replace("T.", token + ".")
        result = await router.route(line.replace("T.", token + "."))
        ok = result.exit_code == 0
        shown = result.stdout if ok else None
        got.append(f"{line!r}: exit {result.exit_code} stdout {result.stdout!r}")
        if want is None:
            if ok:
                wrong.append(f"{line!r} should be refused: {result.text}")
        elif not ok or shown != want:
            wrong.append(f"{line!r}: wanted {want!r}, got: {result.text}")
    assert not wrong, "\n".join(wrong)
    # Nothing of a refused `| write` was written.
    assert not (work / "w4.txt").exists()
    if mode == "read-only":
        assert not (work / "w1.txt").exists()


def test_the_table_is_printed_in_the_shell_doc() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "shell.md").read_text()
    assert table_markdown() in doc, "docs/shell.md lost the composition table:\n" + table_markdown()


@pytest.mark.parametrize("world", ["workspace-write"], indirect=True)
async def test_an_expansion_that_moves_a_write_outside_is_asked_again(
    world: tuple[Workspace, str, Path],
) -> None:
    """`write {/elsewhere,x}` looks like a file in the workspace to the gate; bash
    expands it to `write /elsewhere x`, which is put to the gate again."""
    workspace, _, work = world
    outside = Path(tempfile.mkdtemp(prefix="synapse-outside-", dir="/var/tmp"))  # noqa: S108
    try:
        router = await workspace.start()
        answers = workspace._ask
        assert isinstance(answers, Answers)
        answers.deny = True
        result = await router.route(f"write {{{outside}/x,hello}}")
        assert result.exit_code == 126, result.text
        assert not (outside / "x").exists() and not list(work.glob("{*"))
        assert any(str(outside) in q for q in answers.asked), answers.asked
    finally:
        shutil.rmtree(outside, ignore_errors=True)
