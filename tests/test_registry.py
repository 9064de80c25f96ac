"""Registry pieces without a running server: config parsing, wrapper generation and
cleanup, search ranking, `synapse tools` and `synapse exec` on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synapse_lsp.cli import tools as tools_cli
from synapse_lsp.extensions import wrapper_files
from synapse_lsp.extensions.mcp_client import load_config
from synapse_lsp.extensions.search import IndexEntry, SearchIndex, compile_query, search_commands
from synapse_lsp.extensions.wrapper_files import WrapperSpec

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "invalid JSON at line 1"),
        ('{"servers": {}}', "unknown top-level key(s) servers"),
        (
            '{"mcpServers": {"a": {"command": "x", "bogus": 1}}}',
            "server 'a': unknown key(s) 'bogus'",
        ),
        ('{"mcpServers": {"a": {"env": {}}}}', "server 'a': missing 'command'"),
        ('{"mcpServers": {"a": {"command": ""}}}', "server 'a': 'command' must be a non-empty"),
        ('{"mcpServers": {"a": {"url": "ftp://x"}}}', "server 'a': 'url' must be an http"),
        ('{"mcpServers": {"a:b": {"command": "x"}}}', "server 'a:b': the name must be"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "'args' must be a list"),
        ('{"mcpServers": {"a": {"command": "x", "timeout": -1}}}', "'timeout' must be a positive"),
        ('{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}', "either 'command' or 'url'"),
    ],
)
def test_each_kind_of_bad_config_names_file_and_server(
    tmp_path: Path, text: str, fragment: str
) -> None:
    bad = tmp_path / "mcp_servers.json"
    bad.write_text(text)
    good = tmp_path / "good.json"
    good.write_text('{"mcpServers": {"ok": {"command": "x"}}}')
    servers, problems = load_config([good, bad])
    assert len(problems) == 1
    assert str(bad) in problems[0] and fragment in problems[0]
    assert "ok" in servers


def test_workspace_entries_override_home_entries_by_name(tmp_path: Path) -> None:
    home = tmp_path / "home.json"
    home.write_text('{"mcpServers": {"a": {"command": "h"}, "b": {"command": "hb"}}}')
    work = tmp_path / "work.json"
    work.write_text('{"mcpServers": {"a": {"command": "w", "tools": {"t": {"disabled": true}}}}}')
    servers, problems = load_config([home, work])
    assert problems == []
    assert (servers["a"].command, servers["b"].command) == ("w", "hb")
    assert servers["a"].disabled_tools == frozenset({"t"})


# ----------------------------------------------------------------- wrappers


def test_sync_writes_atomically_removes_only_our_stale_files(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    spec = WrapperSpec("skill:a:b", "Usage: skill:a:b\nSays b.", None, ["/bin/echo", "b"])
    text = wrapper_files.render(spec)

    def skills_only(name: str) -> bool:
        return name.startswith("skill:")

    assert wrapper_files.sync(bin_dir, {"skill:a:b": text}, skills_only) == (1, 0)
    assert wrapper_files.sync(bin_dir, {"skill:a:b": text}, skills_only) == (0, 0)
    (bin_dir / "skill:user:mine").write_text("#!/bin/sh\necho mine\n")
    stale = WrapperSpec("skill:a:old", "x", None, ["/bin/true"])
    wrapper_files.install(bin_dir / "skill:a:old", wrapper_files.render(stale))
    assert wrapper_files.sync(bin_dir, {"skill:a:b": text}, skills_only) == (0, 1)
    assert sorted(p.name for p in bin_dir.iterdir()) == ["skill:a:b", "skill:user:mine"]
    run = subprocess.run([str(bin_dir / "skill:a:b"), "x y"], capture_output=True, text=True)
    assert run.stdout == "b x y\n"
    helped = subprocess.run([str(bin_dir / "skill:a:b"), "-h"], capture_output=True, text=True)
    assert helped.stdout == "Usage: skill:a:b\nSays b.\n"


def test_wrapper_text_quotes_hostile_values(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}) `touch {marker}` ; touch {marker}\nSYNAPSE_TEXT\ntouch {marker}"
    spec = WrapperSpec("skill:a:b", evil, evil, ["/bin/echo", evil], env=(("X", evil),))
    path = tmp_path / "w"
    wrapper_files.install(path, wrapper_files.render(spec))
    for args in ([], ["-h"], ["--help"]):
        subprocess.run([str(path), *args], capture_output=True, check=True)
    assert not marker.exists()
    shown = subprocess.run([str(path), "--help"], capture_output=True, text=True).stdout
    assert shown == evil + "\n"


def test_long_synapse_home_gets_a_short_socket_path(tmp_path: Path) -> None:
    long_home = tmp_path / ("x" * 120)
    run = wrapper_files.RunDir.create(long_home)
    try:
        assert len(str(run.socket)) < 108
        assert run.socket.parent.is_dir() and run.socket.parent.stat().st_mode & 0o777 == 0o700
        assert run.visible == (run.path, run.socket.parent)
    finally:
        run.remove()
    assert not run.path.exists() and not run.socket.parent.exists()


# ------------------------------------------------------------------- search


def _entry(name: str, summary: str) -> IndexEntry:
    return IndexEntry.of(name, summary)


ENTRIES = [
    _entry("mcp:git-tools:commit", "Record changes to the repository"),
    _entry("mcp:git-tools:push", "Upload commits"),
    _entry("mcp:filesystem:read_pdf", "Read a PDF file"),
    _entry("skill:pdf-editor:extract_text", "Extract text from PDF files"),
    _entry("skill:notes:todo", "Keep a list; mentions git commits"),
]


@pytest.mark.parametrize(
    ("query", "kind", "expected"),
    [
        ("pdf", None, ["mcp:filesystem:read_pdf", "skill:pdf-editor:extract_text"]),
        ("PDF", "skill", ["skill:pdf-editor:extract_text"]),
        ("mcp:git-.*", None, ["mcp:git-tools:commit", "mcp:git-tools:push"]),
        ("commit", None, ["mcp:git-tools:commit", "mcp:git-tools:push", "skill:notes:todo"]),
        # Words may be split over name and description (push: "git" + "commits").
        ("git commit", None, ["mcp:git-tools:commit", "mcp:git-tools:push", "skill:notes:todo"]),
        ("^skill:", None, ["skill:notes:todo", "skill:pdf-editor:extract_text"]),
        ("mcp:git-tools:push", None, ["mcp:git-tools:push"]),
        ("[unclosed", None, []),
    ],
)
def test_search_rule_and_ranking(query: str, kind: str | None, expected: list[str]) -> None:
    index = SearchIndex(sorted(ENTRIES, key=lambda e: e.name))
    assert [m.name for m in search_commands(index, query, kind)] == expected


def test_query_rule_regex_only_with_metacharacters() -> None:
    assert compile_query("a.c")("abc")  # regex
    assert not compile_query("a z")("abc")  # keywords: every word must appear
    assert compile_query("(")("x (y")  # not a valid regex: a keyword


# --------------------------------------------------------------- command line


def _home_with_skill(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    scripts = home / "skills" / "demo" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "hello.sh").write_text("# Say hello.\necho hello\n")
    return home


def test_tools_cli_list_search_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home_with_skill(tmp_path)
    monkeypatch.setenv("SYNAPSE_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert tools_cli.main(["list"]) == 0
    assert capsys.readouterr().out == "skill:demo:hello  Say hello.\n"
    assert tools_cli.main(["search", "HELLO", "--type", "skill"]) == 0
    assert capsys.readouterr().out == "skill:demo:hello  Say hello.\n"
    assert tools_cli.main(["search", "nothing"]) == 0
    assert "No extension commands match" in capsys.readouterr().err
    (home / "bin" / "skill:demo:hello").unlink()
    assert tools_cli.main(["refresh", "skills"]) == 0
    out = capsys.readouterr().out
    assert "Skills: 1 skill(s), 1 command(s)" in out
    assert (home / "bin" / "skill:demo:hello").is_file()


def test_tools_refresh_mcp_reports_a_bad_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SYNAPSE_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcp_servers.json").write_text('{"mcpServers": {"x": {"comand": "y"}}}')
    assert tools_cli.main(["refresh", "mcp", "--trust"]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / "mcp_servers.json") in err and "server 'x'" in err


def test_synapse_exec_runs_mcp_and_skill_commands(tmp_path: Path) -> None:
    home = _home_with_skill(tmp_path)
    (home / "mcp").mkdir()
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": [str(SERVER)]}}}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps(config))
    env = {**os.environ, "SYNAPSE_HOME": str(home)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "synapse_lsp.cli.entry",
            "exec",
            "--json",
            "mcp:demo:add 2 3",
            "skill:demo:hello",
            "tools search add",
            'command:search ""',
            'command:search "" --type skill',
            'command:search "" --type mcp',
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["stdout"] for r in records[:3]] == [
        "5\n",
        "hello\n",
        "mcp:demo:add  Add two integers.\n",
    ]
    assert [r["layer"] for r in records] == ["extension", "extension"] + ["agent"] * 4
    assert run.returncode == 0
    # Both kinds are found by one search, and --type keeps one kind.
    names = [
        [line.split()[0] for line in r["stdout"].splitlines() if line.strip()] for r in records[3:]
    ]
    every, skills, tools = names
    assert "skill:demo:hello" in every and "mcp:demo:add" in every
    assert skills == ["skill:demo:hello"]
    assert "mcp:demo:add" in tools and all(n.startswith("mcp:demo:") for n in tools)
    assert set(every) == set(skills) | set(tools)
