"""summarize(command): the ACP tool kind and the one-line title the UI shows."""

from __future__ import annotations

import pytest

from synapse_lsp.summaries.titles import ACP_KINDS, Summary, shorten_command, summarize

TABLE = [
    # Codex kinds
    ("cat app.py", "read", "Read app.py"),
    ("sed -n '1,80p' src/app.py", "read", "Read app.py"),
    ("nl -ba core/parse.rs | sed -n '10,40p'", "read", "Read parse.rs"),
    ("cat a.py && cat b.py", "read", "Read a.py, b.py"),
    ("rg -n TODO src | head", "search", "Search `TODO` in src"),
    ("grep -rn 'fn main' .", "search", "Search `fn main` in ."),
    ("find . -name '*.py'", "search", "Search `*.py` in ."),
    ("grep -R 'a`b' .", "search", "Search ``a`b`` in ."),
    ("ls src", "search", "List src"),
    ("ls -la", "search", "List files"),
    ("rg --files webview/src | head -n 20", "search", "List webview"),
    ("cat README.md && rg -n x src", "search", "Read README.md, Search `x` in src"),
    ("git status", "execute", "Run `git status`"),
    ("echo hi > out.txt", "edit", "Run `echo hi > out.txt`"),
    ("for f in *.py; do wc -l $f; done", "execute", "Run `for f in *.py; do wc -l $f; done`"),
    # our extra kinds
    ("pytest -q", "execute", "Run tests"),
    ("cd app && npm test 2>&1 | tail -20", "execute", "Run tests"),
    ("ruff check synapse_lsp", "execute", "Lint synapse_lsp with ruff"),
    ("cargo fmt", "edit", "Format with cargo fmt"),
    ("black src tests", "edit", "Format src, tests with black"),
    ("curl -s https://example.com/x.json", "fetch", "Fetch https://example.com/x.json"),
    ("true", "other", "Run `true`"),
    # our own commands
    ("read src/app.py --offset 10 --limit 20", "read", "Read app.py"),
    ("edit app.py 'old' 'new'", "edit", "Edit app.py"),
    ("write docs/notes.md 'hello'", "edit", "Write notes.md"),
    ("write docs/notes.md <<'EOF'\nhello\nEOF", "edit", "Write notes.md"),
    ("mcp:github:search_issues --query 'bug'", "other", "mcp github: search_issues"),
    ("skill:pdf:extract report.pdf", "other", "skill pdf: extract"),
    ("skill:load pdf", "read", "Load skill `pdf`"),
    ("skill:search 'excel files'", "search", "Search `excel files`"),
    ("command:search github --type mcp", "search", "Search `github`"),
    ("task:explore --prompt 'find x' --description 'Find retry config'", "think",
     "Task: Find retry config"),
    ("task:general --prompt 'do it'", "think", "Task: general"),
    ("plan set 'a' 'b'", "think", "Update plan"),
    ("todo <<'EOF'\n{\"plan\": []}\nEOF", "think", "Update plan"),
    ("", "other", "Empty command"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "kind", "title"), TABLE, ids=[row[0] for row in TABLE])
def test_kind_and_title(command: str, kind: str, title: str) -> None:
    summary = summarize(command)
    assert (summary.kind, summary.title) == (kind, title)
    assert summary.kind in ACP_KINDS


def test_parsed_is_the_parse_command_json() -> None:
    assert summarize("rg -n TODO src | head") == Summary(
        kind="search",
        title="Search `TODO` in src",
        parsed=[{"type": "search", "cmd": "rg -n TODO src", "query": "TODO", "path": "src"}],
    )
    assert summarize("git status").parsed == [{"type": "unknown", "cmd": "git status"}]


def test_long_commands_are_shortened() -> None:
    command = "python - <<'EOF'\n" + "print('x')\n" * 50 + "EOF"
    summary = summarize(command)
    assert summary.kind == "execute"
    assert summary.title == "Run `python - <<'EOF' …`"
    long_line = "some-tool " + "--flag value " * 20
    title = summarize(long_line).title
    assert len(title) <= 80
    assert title.startswith("Run `some-tool --flag value") and title.endswith("…`")


def test_shorten_command() -> None:
    assert shorten_command("  a   b\n c") == "a b …"
    assert shorten_command("x" * 100, limit=10) == "x" * 9 + "…"


def test_titles_are_clipped() -> None:
    many = " && ".join(f"cat file_number_{i}.txt" for i in range(20))
    summary = summarize(many)
    assert summary.kind == "read"
    assert len(summary.title) == 80 and summary.title.endswith("…")
    assert len(summary.parsed) == 20
