"""One search behind every entry point: `command:search` (and its alias `tools search`)
through the real router, `synapse tools search|list` (the CLI's own code, and once as a
real process), and `search_commands`, which the LSP's `synapse.tools.search` calls.
One real registry: skills on disk and the demo MCP server (tests/mcp_servers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from synapse_lsp.cli import tools as tools_cli
from synapse_lsp.cmdline import quote
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.extensions.search import (
    RANK_DESCRIPTION,
    RANK_EXACT,
    RANK_NAME,
    RANK_PREFIX,
    Match,
    search_commands,
)
from synapse_lsp.policy import trust
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

# The registry (one MCP server) is shared by the module, so its tests share one loop.
module_loop = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"
SCRIPTS = {
    "text/echo.sh": '# Echo the words back.\necho "$@"\n',
    "text/echo_all.sh": "# Echo every argument on its own line.\nprintf '%s\\n' \"$@\"\n",
    "text/upper.py": '"""Upper-case text from stdin."""\nimport sys\nprint(input().upper())\n',
    "math/sum.sh": "# Add numbers, like the add tool of an MCP server.\necho $(($1 + $2))\n",
}
MCP_TOOLS = [
    "mcp:demo:add",
    "mcp:demo:configure",
    "mcp:demo:crash",
    "mcp:demo:document",
    "mcp:demo:echo",
    "mcp:demo:fail",
    "mcp:demo:picture",
    "mcp:demo:pid",
    "mcp:demo:secret",
    "mcp:demo:slow",
]
SKILLS = ["skill:math:sum", "skill:text:echo", "skill:text:echo_all", "skill:text:upper"]

# (argv after `search`, the names every entry point must list, in this order)
CASES: list[tuple[list[str], list[str]]] = [
    # keyword: name matches by name, then description-only matches by name
    (
        ["echo"],
        ["mcp:demo:echo", "skill:text:echo", "skill:text:echo_all", "mcp:demo:configure"],
    ),
    # exact name first, then names starting with the query
    (["skill:text:echo"], ["skill:text:echo", "skill:text:echo_all"]),
    # several keywords, split over name and description
    (["add", "--type", "skill"], ["skill:math:sum"]),
    (["add integers"], ["mcp:demo:add"]),
    # regex (case-insensitive, anchored on the name)
    (["^MCP:demo:(echo|add)$"], ["mcp:demo:add", "mcp:demo:echo"]),
    (["^skill:text:"], ["skill:text:echo", "skill:text:echo_all", "skill:text:upper"]),
    # --type filter and the empty query
    (["", "--type", "mcp"], MCP_TOOLS),
    (["", "--type", "skill"], SKILLS),
    ([""], MCP_TOOLS + SKILLS),
    (["", "--limit", "3"], MCP_TOOLS[:3]),
    (["nothing-like-this"], []),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("search")
    home, work = root / "home", root / "work"
    for rel, text in SCRIPTS.items():
        skill, script = rel.split("/")
        path = home / "skills" / skill / "scripts" / script
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    work.mkdir()
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": [str(SERVER)]}}}
    (work / "mcp_servers.json").write_text(json.dumps(config))
    trust.remember(home, work, True)  # the user trusts the folder: its server starts
    return {"home": home, "work": work}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def registry(env: dict[str, Path]) -> AsyncIterator[ExtensionRegistry]:
    settings = Settings(synapse_home=env["home"], command_timeout=30.0)
    reg = ExtensionRegistry(settings, env["work"], watch=False, serve_socket=False)
    await reg.start()
    await reg.wait_for_mcp(60)
    try:
        yield reg
    finally:
        await reg.close()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def router(env: dict[str, Path], registry: ExtensionRegistry) -> AsyncIterator[BashRouter]:
    shell = ShellSession(env["work"], registry.settings)
    await shell.start()
    routed = BashRouter(shell, registry.settings, extensions=registry)
    for command in registry.builtins():
        routed.register(command)
    try:
        yield routed
    finally:
        await shell.close()


def listed(text: str) -> list[str]:
    """The command names a text listing shows, in order (notes and counts skipped)."""
    return [
        line.split("  ")[0] for line in text.splitlines() if line.startswith(("mcp:", "skill:"))
    ]


def quoted(argv: list[str]) -> str:
    return " ".join(quote(a) for a in argv)


def call_args(argv: list[str]) -> tuple[str, str | None, int | None]:
    """(query, kind, limit) as `command:search` and `synapse tools search` parse argv."""
    args = tools_cli.build_parser().parse_args(["search", *argv])
    return args.query, args.type, args.limit


async def cli_search(
    env: dict[str, Path], settings: Settings, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """`synapse tools search ARGV` run by the CLI module's own code (its own registry)."""
    args = tools_cli.build_parser().parse_args(["search", *argv, "--connect-timeout", "60"])
    capsys.readouterr()
    assert await tools_cli.run(args, settings, env["work"]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@module_loop
async def test_the_registry_is_the_one_expected(registry: ExtensionRegistry) -> None:
    assert sorted(c.name for c in registry.commands()) == MCP_TOOLS + SKILLS


@module_loop
@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[" ".join(c[0]) for c in CASES])
async def test_every_entry_point_lists_the_same_names_in_the_same_order(
    argv: list[str],
    expected: list[str],
    env: dict[str, Path],
    registry: ExtensionRegistry,
    router: BashRouter,
    capsys: pytest.CaptureFixture[str],
) -> None:
    query, kind, limit = call_args(argv)
    # The LSP entry point (core.Workspace.search -> search_commands over the commands).
    lsp = [m.name for m in search_commands(registry.commands(), query, kind, limit)]
    cached = [m.name for m in search_commands(registry.search_index(), query, kind, limit)]
    # The model's entry point, under both names.
    model = await router.route(f"command:search {quoted(argv)}")
    alias = await router.route(f"tools search {quoted(argv)}")
    # The terminal's entry point.
    out, err = await cli_search(env, registry.settings, argv, capsys)
    assert model.exit_code == alias.exit_code == 0
    assert lsp == expected
    assert cached == expected
    assert listed(model.stdout) == expected
    assert model.data["matches"] == expected
    assert listed(alias.stdout) == expected
    assert listed(out) == expected
    # Same lines, too: both text faces render a match as `name  summary`.
    assert out.splitlines() == model.stdout.splitlines()[: len(expected)]
    if not expected:
        assert "No extension commands match" in model.stdout
        assert "No extension commands match" in err
    if argv[-2:] == ["--limit", "3"]:
        assert "[11 more; narrow the query or raise --limit]" in model.stdout
        assert "[11 more; narrow the query or raise --limit]" in err


@module_loop
async def test_tools_list_is_the_empty_search(
    env: dict[str, Path], registry: ExtensionRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    for kind in (None, "mcp", "skill"):
        argv = ["list", "--connect-timeout", "60"] + (["--type", kind] if kind else [])
        args = tools_cli.build_parser().parse_args(argv)
        capsys.readouterr()
        assert await tools_cli.run(args, registry.settings, env["work"]) == 0
        expected = [m.name for m in search_commands(registry.commands(), "", kind)]
        assert listed(capsys.readouterr().out) == expected


def test_the_synapse_program_prints_the_same_order(env: dict[str, Path]) -> None:
    """The real `synapse tools search` process, end to end."""
    run = subprocess.run(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "tools", "search", "echo"],
        capture_output=True,
        text=True,
        env={**os.environ, "SYNAPSE_HOME": str(env["home"])},
        cwd=env["work"],
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert listed(run.stdout) == CASES[0][1]


# ------------------------------------------------------------ the function itself


@module_loop
async def test_matches_carry_type_usage_rank_and_the_lsp_shape(
    registry: ExtensionRegistry,
) -> None:
    found = search_commands(registry.commands(), "echo")
    assert [(m.name, m.type, m.rank) for m in found] == [
        ("mcp:demo:echo", "mcp", RANK_NAME),
        ("skill:text:echo", "skill", RANK_NAME),
        ("skill:text:echo_all", "skill", RANK_NAME),
        ("mcp:demo:configure", "mcp", RANK_DESCRIPTION),
    ]
    exact, prefix = search_commands(registry.commands(), "SKILL:text:echo")
    assert (exact.rank, prefix.rank) == (RANK_EXACT, RANK_PREFIX)
    echo = found[0]
    assert echo == Match(
        "mcp:demo:echo", "mcp", "Echo the text back unchanged.", "mcp:demo:echo <text>", RANK_NAME
    )
    assert echo.as_dict() == {
        "name": "mcp:demo:echo",
        "type": "mcp",
        "summary": "Echo the text back unchanged.",
        "usage": "mcp:demo:echo <text>",
    }
    assert echo.line() == "mcp:demo:echo  Echo the text back unchanged."
    with pytest.raises(ValueError, match="kind must be one of mcp, skill"):
        search_commands(registry.commands(), "x", "tool")


@dataclass(frozen=True)
class Cmd:
    """A command as the search sees one (name, summary, usage)."""

    name: str
    summary: str = ""
    usage: str = ""


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # exact, then prefix, then other name matches, then description matches
        ("mcp:a:b", ["mcp:a:b", "mcp:a:bc", "mcp:a:bd", "mcp:x:mcp:a:b", "skill:z:z"]),
        # alphabetical within a rank, whatever the input order
        ("b", ["mcp:a:b", "mcp:a:bc", "mcp:a:bd", "mcp:x:mcp:a:b", "skill:z:z"]),
        # a regex: `.` needs one more character (a description may give it)
        ("mcp:a:b.", ["mcp:a:bc", "mcp:a:bd", "skill:z:z"]),
        # an invalid regex is keywords
        ("(", ["skill:z:z"]),
    ],
)
def test_ranking_rule(query: str, expected: list[str]) -> None:
    commands = [
        Cmd("skill:z:z", "mentions mcp:a:b ( b"),
        Cmd("mcp:x:mcp:a:b"),
        Cmd("mcp:a:bd"),
        Cmd("mcp:a:b"),
        Cmd("mcp:a:bc"),
    ]
    assert [m.name for m in search_commands(commands, query)] == expected
    first_two = search_commands(commands, query, limit=2)
    assert first_two == search_commands(commands, query)[:2]
    assert first_two.total == len(expected)
    assert search_commands(commands, query, limit=0) == []
