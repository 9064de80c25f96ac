"""parse_command against Codex's own test vectors (read from ../shared, never copied),
plus Synapse's extra kinds, the Rust shlex quoting rule and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.summaries.codex import parse_codex
from synapse_lsp.summaries.parse_command import (
    CODEX_TYPES,
    is_small_formatting_command,
    parse_command,
)
from synapse_lsp.summaries.parse_command import main as cli_main
from synapse_lsp.summaries.shell_words import (
    parse_plain_shell_script,
    parse_shell_lc_plain_commands,
    shlex_join,
    shlex_quote,
    shlex_split,
)

REPO = Path(__file__).resolve().parents[1]
VECTORS_NAME = "parse_command_vectors.json"


def _conformance_file() -> Path:
    base = os.environ.get("SYNAPSE_CONFORMANCE_DIR")
    folder = Path(base) if base else REPO.parent / "shared" / "conformance"
    return folder / VECTORS_NAME


def _load() -> dict[str, Any] | None:
    path = _conformance_file()
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


_DATA = _load()
_SKIP_REASON = (
    f"Codex conformance vectors not found at {_conformance_file()} "
    "(set SYNAPSE_CONFORMANCE_DIR to the folder holding parse_command_vectors.json)"
)
_VECTORS: list[dict[str, Any]] = _DATA["vectors"] if _DATA else []
_HELPERS: list[dict[str, Any]] = _DATA["helper_vectors"] if _DATA else []
needs_vectors = pytest.mark.skipif(_DATA is None, reason=_SKIP_REASON)


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


@needs_vectors
def test_vector_file_is_complete() -> None:
    assert _DATA is not None
    assert len(_VECTORS) == _DATA["counts"]["vectors"]
    assert len(_HELPERS) == _DATA["counts"]["helper_vectors"]


@needs_vectors
@pytest.mark.parametrize("vector", _VECTORS, ids=_ids(_VECTORS))
def test_codex_vector(vector: dict[str, Any]) -> None:
    got = [p.to_dict() for p in parse_command(vector["argv"], codex_only=True)]
    assert got == vector["expected"]


@needs_vectors
@pytest.mark.parametrize("vector", _VECTORS, ids=_ids(_VECTORS))
def test_the_codex_port_alone_gives_codex_answer(vector: dict[str, Any]) -> None:
    """`codex.py` stands alone (it imports none of our kinds) and is Codex."""
    got = [p.to_dict() for p in parse_codex(vector["argv"])]
    assert got == vector["expected"]


@needs_vectors
@pytest.mark.parametrize("vector", _VECTORS, ids=_ids(_VECTORS))
def test_extended_mode_keeps_codex_answer(vector: dict[str, Any]) -> None:
    """Our extra kinds never change the answer to one of Codex's inputs."""
    got = [p.to_dict() for p in parse_command(vector["argv"])]
    assert got == vector["expected"]


@needs_vectors
@pytest.mark.parametrize("vector", _HELPERS, ids=_ids(_HELPERS))
def test_helper_vector(vector: dict[str, Any]) -> None:
    function = vector["function"]
    if function == "is_small_formatting_command":
        assert is_small_formatting_command(vector["tokens"]) is vector["expected"]
    elif function == "parse_plain_shell_script":
        assert parse_plain_shell_script(vector["script"]) == vector["expected"]
    elif function == "parse_shell_lc_plain_commands":
        assert parse_shell_lc_plain_commands(vector["argv"]) == vector["expected"]
    else:  # pragma: no cover - a new helper kind in the file must be handled here
        pytest.fail(f"unhandled helper function {function!r}")


@needs_vectors
def test_vector_json_shape_keeps_nulls_and_tag_first() -> None:
    vector = next(v for v in _VECTORS if v["id"] == "supports_rg_files_then_head")
    (parsed,) = parse_command(vector["argv"])
    as_dict = parsed.to_dict()
    assert list(as_dict) == ["type", "cmd", "path"]
    assert json.dumps(as_dict) == '{"type": "list_files", "cmd": "rg --files", "path": null}'


# ------------------------------------------------------------ Rust shlex rules


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("plain-word_1.2/x:y@z]+", "plain-word_1.2/x:y@z]+"),
        ("", "''"),
        ("1,10p", "'1,10p'"),
        ("--color=always", "'--color=always'"),
        ("|", "'|'"),
        ("COD`EX", "'COD`EX'"),
        ("pkg\\src\\main.rs", '"pkg\\\\src\\\\main.rs"'),
        ("foo bar", "'foo bar'"),
        ("it's", '"it\'s"'),
        ("*.rs", "'*.rs'"),
        ("{print $1}", "'{print $1}'"),
        ("héllo", "'héllo'"),
        ("^start", "'^start'"),
        # No single style fits both halves: the crate splits into chunks.
        ("it's $HOME", "\"it's \"'$HOME'"),
    ],
)
def test_shlex_quote_matches_rust_crate(word: str, quoted: str) -> None:
    assert shlex_quote(word) == quoted
    assert shlex_split(quoted) == [word]


def test_shlex_join_and_nul() -> None:
    assert shlex_join(["sed", "-n", "1,10p", "a b"]) == "sed -n '1,10p' 'a b'"
    assert shlex_join(["a\0b"]) == "<command included NUL byte>"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('rg -n "x" -S', ["rg", "-n", "x", "-S"]),
        ('echo "a\\$b"', ["echo", "a$b"]),  # Python's shlex keeps the backslash here
        ('echo "a\\qb"', ["echo", "a\\qb"]),
        ("foo #comment\nbar", ["foo", "bar"]),
        ("foo#bar", ["foo#bar"]),
        ("'unterminated", None),
        ("trailing\\", None),
    ],
)
def test_shlex_split_matches_rust_crate(text: str, words: list[str] | None) -> None:
    assert shlex_split(text) == words


# ------------------------------------------------------------ our extra kinds


def _one(command: str, *, codex_only: bool = False) -> dict[str, Any]:
    parsed = parse_command(["bash", "-lc", command], codex_only=codex_only)
    assert len(parsed) == 1, parsed
    return parsed[0].to_dict()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("pytest -q tests", {"type": "test", "cmd": "pytest -q tests"}),
        ("cargo test -p core", {"type": "test", "cmd": "cargo test -p core"}),
        ("go test ./...", {"type": "test", "cmd": "go test ./..."}),
        ("npm test", {"type": "test", "cmd": "npm test"}),
        ("yarn run test", {"type": "test", "cmd": "yarn run test"}),
        ("uv run pytest -x", {"type": "test", "cmd": "uv run pytest -x"}),
        ("python -m pytest tests", {"type": "test", "cmd": "python -m pytest tests"}),
        ("cd app && pnpm test", {"type": "test", "cmd": "pnpm test"}),
        (
            "ruff check synapse_lsp tests",
            {"type": "lint", "cmd": "ruff check synapse_lsp tests", "tool": "ruff",
             "targets": ["synapse_lsp", "tests"]},
        ),
        ("npx eslint src", {"type": "lint", "cmd": "npx eslint src", "tool": "eslint",
                            "targets": ["src"]}),
        ("cargo clippy", {"type": "lint", "cmd": "cargo clippy", "tool": "cargo clippy",
                          "targets": []}),
        ("pnpm run lint", {"type": "lint", "cmd": "pnpm run lint", "tool": "pnpm run lint",
                           "targets": []}),
        ("black --check .", {"type": "lint", "cmd": "black --check .", "tool": "black",
                             "targets": ["."]}),
        ("prettier --write src", {"type": "format", "cmd": "prettier --write src",
                                  "tool": "prettier", "targets": ["src"]}),
        ("cargo fmt", {"type": "format", "cmd": "cargo fmt", "tool": "cargo fmt",
                       "targets": []}),
        ("ruff format app.py", {"type": "format", "cmd": "ruff format app.py", "tool": "ruff",
                                "targets": ["app.py"]}),
        ("true", {"type": "noop", "cmd": "true"}),
        (":", {"type": "noop", "cmd": ":"}),
        ("curl -sL https://x.dev/a.json", {"type": "fetch", "cmd": "curl -sL https://x.dev/a.json",
                                           "url": "https://x.dev/a.json"}),
    ],
)  # fmt: skip
def test_dev_tool_kinds(command: str, expected: dict[str, Any]) -> None:
    assert _one(command) == expected
    # Codex itself calls all of these unknown.
    assert _one(command, codex_only=True) == {"type": "unknown", "cmd": command}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("read src/app.py --offset 2 --limit 10",
         {"type": "read", "cmd": "read src/app.py --offset 2 --limit 10", "name": "app.py",
          "path": "src/app.py"}),
        ("edit app.py 'old text' 'new text' --all",
         {"type": "edit", "cmd": "edit app.py 'old text' 'new text' --all", "name": "app.py",
          "path": "app.py"}),
        ("write notes/todo.md 'hello'",
         {"type": "edit", "cmd": "write notes/todo.md hello", "name": "todo.md",
          "path": "notes/todo.md"}),
        ("mcp:github:search_issues --query bug",
         {"type": "tool", "cmd": "mcp:github:search_issues --query bug", "source": "mcp:github",
          "name": "search_issues"}),
        ("skill:pdf:extract a.pdf",
         {"type": "tool", "cmd": "skill:pdf:extract a.pdf", "source": "skill:pdf",
          "name": "extract"}),
        ("skill:load pdf", {"type": "tool", "cmd": "skill:load pdf", "source": "skill",
                            "name": "load"}),
        ("task:explore --prompt 'find it' --description 'Find the parser'",
         {"type": "task", "cmd": "task:explore --prompt 'find it' --description 'Find the parser'",
          "task_type": "explore", "description": "Find the parser"}),
        ("command:search github --type mcp",
         {"type": "search", "cmd": "command:search github --type mcp", "query": "github",
          "path": None}),
        ("tools search issue", {"type": "search", "cmd": "tools search issue", "query": "issue",
                                "path": None}),
        ("skill search pdf", {"type": "search", "cmd": "skill search pdf", "query": "pdf",
                              "path": None}),
        ("plan done 2", {"type": "plan", "cmd": "plan done 2"}),
        ("todo set a b", {"type": "plan", "cmd": "todo set a b"}),
    ],
)  # fmt: skip
def test_own_command_kinds(command: str, expected: dict[str, Any]) -> None:
    assert _one(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("write app.py <<'EOF'\nprint('hi')\nEOF",
         {"type": "edit", "cmd": "write app.py", "name": "app.py", "path": "app.py"}),
        ("plan <<'EOF'\n{\"plan\": []}\nEOF", {"type": "plan", "cmd": "plan"}),
        ('task:general --prompt "$(cat p.md)" --description "Review"',
         {"type": "task", "cmd": "task:general --prompt '$(cat p.md)' --description Review",
          "task_type": "general", "description": "Review"}),
        ("pytest -q 2>&1 | tail -30", {"type": "test", "cmd": "pytest -q"}),
        ("rg -n TODO src 2>/dev/null | head",
         {"type": "search", "cmd": "rg -n TODO src", "query": "TODO", "path": "src"}),
    ],
)  # fmt: skip
def test_scripts_outside_the_safe_subset(command: str, expected: dict[str, Any]) -> None:
    assert _one(command) == expected
    assert _one(command, codex_only=True) == {"type": "unknown", "cmd": command}


@pytest.mark.parametrize(
    "command",
    [
        "read -r line",  # the bash built-in, not ours
        "echo hi > out.txt",  # a real write to a file stays unknown
        "pytest -q > log.txt",
        "curl -X POST https://x.dev/api -d '{}'",
        "npm run build",
        "pytest && rm -rf build",  # one unknown stage collapses the whole line
        "edit",
        "mcp:github",
    ],
)
def test_still_unknown(command: str) -> None:
    assert _one(command) == {"type": "unknown", "cmd": command}


@pytest.mark.parametrize(
    "command",
    [
        "find . -name '*.pyc' -delete",
        "find . -type f -exec rm {} +",
        "ls && find src -execdir chmod +x {} ;",
    ],
)
def test_find_that_changes_things_is_not_shown_as_a_listing(command: str) -> None:
    codex = [p.to_dict() for p in parse_command(["bash", "-lc", command], codex_only=True)]
    assert all(p["type"] != "unknown" for p in codex)  # Codex calls it a listing/search
    assert _one(command) == {"type": "unknown", "cmd": command}


def test_plain_argv_gets_extra_kinds_too() -> None:
    parsed = parse_command(["cargo", "test", "&&", "cargo", "clippy"])
    assert [p.to_dict() for p in parsed] == [
        {"type": "test", "cmd": "cargo test"},
        {"type": "lint", "cmd": "cargo clippy", "tool": "cargo clippy", "targets": []},
    ]


def test_codex_types_are_the_protocol_enum() -> None:
    assert {"read", "list_files", "search", "unknown"} == CODEX_TYPES


# ------------------------------------------------------------------ the CLI


def test_cli_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--script", "rg -n TODO src | head"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "parsed": [{"type": "search", "cmd": "rg -n TODO src", "query": "TODO", "path": "src"}],
        "kind": "search",
        "title": "Search `TODO` in src",
    }


def test_cli_argv_and_codex_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--codex", "--", "cargo", "test"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parsed"] == [{"type": "unknown", "cmd": "cargo test"}]
    assert out["kind"] == "execute"


@pytest.mark.parametrize(
    "argv", [[], ["--script"], ["--bogus"], ["--"], ["--script", "x", "--", "y"]]
)
def test_cli_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(argv) == 2
    assert "usage: synapse parse-command" in capsys.readouterr().err


def test_cli_through_synapse_entry_point() -> None:
    """The real `synapse parse-command` dispatch, in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "parse-command", "--", "cat", "README.md"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["title"] == "Read README.md"
    assert out["kind"] == "read"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # seed 001: `echo … && rest` drops the echo
        ("echo hi && rg foo src",
         {"type": "search", "cmd": "rg foo src", "query": "foo", "path": "src"}),
        # seed 001: a flag-only `nl -<flags> && rest` drops the nl
        ("nl -ba && cat a.txt",
         {"type": "read", "cmd": "cat a.txt", "name": "a.txt", "path": "a.txt"}),
        # ...but `nl` with a file is the read itself
        ("nl -ba a.txt", {"type": "read", "cmd": "nl -ba a.txt", "name": "a.txt", "path": "a.txt"}),
    ],
)  # fmt: skip
def test_simplification_rules_of_the_seed(command: str, expected: dict[str, Any]) -> None:
    assert _one(command) == expected
    assert _one(command, codex_only=True) == expected
