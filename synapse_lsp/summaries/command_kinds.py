"""Synapse's summary kinds beyond Codex, and `parse_command` (docs/command-summaries.md).

`parse_command` asks the Codex port (`codex.py`) first and consults these kinds only
for stages Codex calls `unknown`, so a Codex answer that is not `unknown` never
changes (one exception, for safety: a `find` that deletes or executes). Two kinds
of knowledge live here: well-known developer tools (tests, linters, formatters,
fetchers, no-ops) and the commands of our own Agent/Extension Shell (`read`,
`edit`, `mcp:*`, `task:*`, …). The public import path is
`synapse_lsp.summaries.parse_command`, which re-exports `parse_command`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from synapse_lsp import catalog, cmdline
from synapse_lsp.summaries.codex import (
    Edit,
    Fetch,
    Format,
    Lint,
    Noop,
    ParsedCommand,
    Plan,
    Read,
    Search,
    Task,
    Test,
    Tool,
    Unknown,
    finish,
    has_unknown,
    parse_codex,
    parse_script_commands,
    parse_shell_script,
    short_display_path,
    single_unknown,
)
from synapse_lsp.summaries.shell_words import (
    Parsed,
    extract_bash_script,
    parse_bash,
    parse_plain_shell_script,
    shlex_join,
    shlex_split,
    word_only_commands,
)


def parse_command(argv: Sequence[str], *, codex_only: bool = False) -> list[ParsedCommand]:
    """Summaries of one command (argv as the shell would run it), left to right.

    `codex_only=True` gives exactly Codex's answer. By default Synapse's extra kinds
    replace an `unknown` answer when every stage is then understood."""
    argv = list(argv)
    parsed = _parse(argv, codex_only)
    if not codex_only and any(_mutating_find(p) for p in parsed):
        return [single_unknown(argv)]
    return parsed


# `find` actions that change or run things: a title saying "List"/"Search" would hide
# them from the user, so Synapse (not Codex) shows such a command as unknown.
_FIND_ACTIONS = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)


def _mutating_find(parsed: ParsedCommand) -> bool:
    if isinstance(parsed, Unknown):
        return False
    words = shlex_split(parsed.cmd) or []
    return bool(words) and words[0] == "find" and not _FIND_ACTIONS.isdisjoint(words)


def _parse(argv: list[str], codex_only: bool) -> list[ParsedCommand]:
    script = extract_bash_script(argv)
    if script is None:
        codex = parse_codex(argv)
        if codex_only or not has_unknown(codex):
            return codex
        extended = parse_codex(argv, upgrade_stage)
        return codex if has_unknown(extended) else extended
    # One parse (shared with the gate and the plan) serves Codex's answer, the extended
    # one and the fallback.
    tree = parse_bash(script)
    commands = word_only_commands(tree)
    codex = finish(argv, parse_script_commands(script, commands))
    if codex_only or not has_unknown(codex):
        return codex
    if commands:
        extended = finish(argv, parse_script_commands(script, commands, upgrade_stage))
        return codex if has_unknown(extended) else extended
    return fallback_for_script(script, tree) or codex


# Wrappers that run a tool: `uv run pytest`, `npx eslint`, `python -m pytest`.
_RUNNERS: dict[tuple[str, ...], int] = {
    ("uv", "run"): 2,
    ("poetry", "run"): 2,
    ("pipenv", "run"): 2,
    ("hatch", "run"): 2,
    ("pdm", "run"): 2,
    ("rye", "run"): 2,
    ("pnpm", "exec"): 2,
    ("yarn", "exec"): 2,
    ("bundle", "exec"): 2,
    ("npx",): 1,
    ("pnpx",): 1,
    ("bunx",): 1,
    ("uvx",): 1,
    ("pipx", "run"): 2,
}
_PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")
_SCRIPT_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun"})

_TEST_TOOLS = frozenset(
    {"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava", "rspec", "phpunit",
     "ctest", "nextest", "karma", "playwright", "cypress", "bats"}
)  # fmt: skip
_TEST_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "cargo": frozenset({"test", "nextest"}),
    "go": frozenset({"test"}),
    "deno": frozenset({"test"}),
    "bun": frozenset({"test"}),
    "dotnet": frozenset({"test"}),
    "mix": frozenset({"test"}),
    "mvn": frozenset({"test", "verify"}),
    "gradle": frozenset({"test", "check"}),
    "./gradlew": frozenset({"test", "check"}),
    "make": frozenset({"test", "check", "tests"}),
    "swift": frozenset({"test"}),
    "zig": frozenset({"test"}),
}
_LINT_TOOLS = frozenset(
    {"flake8", "pylint", "mypy", "pyright", "eslint", "golangci-lint", "shellcheck", "stylelint",
     "rubocop", "hadolint", "yamllint", "markdownlint", "biome", "oxlint", "tsc", "pyflakes",
     "bandit", "vulture", "staticcheck", "clippy-driver"}
)  # fmt: skip
_FORMAT_TOOLS = frozenset(
    {"black", "isort", "rustfmt", "gofmt", "goimports", "prettier", "clang-format", "shfmt",
     "autopep8", "yapf", "dprint"}
)  # fmt: skip
_SCRIPT_KINDS = {
    "test": "test",
    "tests": "test",
    "lint": "lint",
    "typecheck": "lint",
    "type-check": "lint",
    "format": "format",
    "fmt": "format",
}
_FETCHERS = frozenset({"curl", "wget"})
_WRITE_FLAGS = frozenset(
    {"-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "-F", "--form", "-T",
     "--upload-file", "--post-data", "--post-file"}
)  # fmt: skip


def upgrade_stage(tokens: list[str]) -> ParsedCommand | None:
    """A better summary for one stage Codex calls unknown, or None to keep `unknown`."""
    if not tokens:
        return None
    own = own_command(tokens)
    if own is not None:
        return own
    cmd = shlex_join(tokens)
    if tokens in (["true"], [":"]):
        return Noop(cmd)
    words = _unwrap_runner(tokens)
    if not words:
        return None
    head, rest = words[0], words[1:]
    if head in _FETCHERS:
        return _fetch(cmd, rest)
    if head in _SCRIPT_RUNNERS and rest:
        script = rest[1] if rest[0] == "run" and len(rest) > 1 else rest[0]
        kind = _SCRIPT_KINDS.get(script)
        if kind == "test":
            return Test(cmd)
        if kind == "lint":
            return Lint(cmd, f"{head} run {script}", ())
        if kind == "format":
            return Format(cmd, f"{head} run {script}", ())
        return None
    name = head.rsplit("/", 1)[-1] if head.startswith("/") else head
    if name in _TEST_TOOLS or (name in _TEST_SUBCOMMANDS and rest[:1] and
                               rest[0] in _TEST_SUBCOMMANDS[name]):  # fmt: skip
        return Test(cmd)
    return _lint_or_format(cmd, name, rest)


def _unwrap_runner(tokens: list[str]) -> list[str]:
    words = tokens
    for _ in range(3):
        for prefix, width in _RUNNERS.items():
            if tuple(words[: len(prefix)]) == prefix:
                words = words[width:]
                # `npx --yes eslint`: skip the runner's own flags.
                while words and words[0].startswith("-"):
                    words = words[1:]
                break
        else:
            if len(words) >= 3 and _PYTHON.match(words[0]) and words[1] == "-m":
                words = words[2:]
                continue
            break
    return words


def _lint_or_format(cmd: str, name: str, rest: list[str]) -> ParsedCommand | None:
    found = _lint_or_format_tool(cmd, name, rest)
    if isinstance(found, Format) and _CHECK_ONLY.intersection(rest):
        # `black --check`, `ruff format --diff`: verifies formatting, changes nothing.
        return Lint(found.cmd, found.tool, found.targets)
    return found


_CHECK_ONLY = frozenset({"--check", "--diff", "--list-different"})


def _lint_or_format_tool(cmd: str, name: str, rest: list[str]) -> ParsedCommand | None:
    if name == "ruff":
        sub = rest[0] if rest else "check"
        targets = _targets(rest[1:] if rest and not rest[0].startswith("-") else rest)
        if sub == "format":
            return Format(cmd, "ruff", targets)
        return Lint(cmd, "ruff", targets) if sub in ("check", "-") or sub.startswith("-") else None
    if name == "cargo" and rest[:1] in (["fmt"], ["clippy"]):
        variant = Format if rest[0] == "fmt" else Lint
        return variant(cmd, f"cargo {rest[0]}", _targets(rest[1:]))
    if name == "go" and rest[:1] in (["fmt"], ["vet"]):
        variant = Format if rest[0] == "fmt" else Lint
        return variant(cmd, f"go {rest[0]}", _targets(rest[1:]))
    if name in ("terraform", "dotnet") and rest[:1] == ["fmt" if name == "terraform" else "format"]:
        return Format(cmd, f"{name} {rest[0]}", _targets(rest[1:]))
    if name in _FORMAT_TOOLS:
        return Format(cmd, name, _targets(rest))
    if name in _LINT_TOOLS:
        return Lint(cmd, name, _targets(rest))
    if name == "unittest":
        return Test(cmd)
    return None


def _targets(args: list[str]) -> tuple[str, ...]:
    return tuple(a for a in args if not a.startswith("-"))


def _fetch(cmd: str, args: list[str]) -> Fetch | None:
    url: str | None = None
    for index, arg in enumerate(args):
        if arg in _WRITE_FLAGS or arg.startswith(("--data", "--form", "--upload")):
            return None
        method = args[index + 1].upper() if index + 1 < len(args) else "GET"
        if arg in ("-X", "--request") and method not in ("GET", "HEAD"):
            return None
        if url is None and arg.startswith(("http://", "https://")):
            url = arg
    return Fetch(cmd, url) if url is not None else None


def own_command(tokens: list[str], body: str | None = None) -> ParsedCommand | None:
    """Summaries of Synapse's own commands (`tokens` as the router would split them;
    `body`, a heredoc's text): a built-in as its catalog entry describes it, an
    extension command (`mcp:<server>:<tool>`, `skill:<skill>:<tool>`) as a tool."""
    cmd = shlex_join(tokens)
    argv = catalog.normalized(tokens)
    builtin = catalog.lookup(argv)
    if builtin is not None:
        return _builtin_summary(cmd, argv, catalog.traits(builtin).shape, body)
    head = tokens[0]
    if head.startswith(("mcp:", "skill:")) and head.count(":") >= 2:
        source, _, name = head.rpartition(":")
        if name and source.partition(":")[2]:
            return Tool(cmd, source, name)
    return None


def _builtin_summary(
    cmd: str, argv: list[str], shape: catalog.Shape, body: str | None
) -> ParsedCommand | None:
    call = catalog.invocation(argv, body)
    if call is None or shape is catalog.Shape.NONE:
        return None
    if shape is catalog.Shape.READ and call.reads:
        return Read(cmd, short_display_path(call.reads[0]), call.reads[0])
    if shape is catalog.Shape.EDIT and call.writes:
        return Edit(cmd, short_display_path(call.writes[0]), call.writes[0])
    if shape in (catalog.Shape.READ, catalog.Shape.EDIT):
        return None
    if shape is catalog.Shape.PLAN:
        return Plan(cmd)
    if shape is catalog.Shape.SEARCH:
        return Search(cmd, call.query, None)
    if shape is catalog.Shape.TASK:
        return Task(cmd, call.subtype, call.description) if call.subtype else None
    source, _, name = argv[0].partition(":")
    return Tool(cmd, source, name)


# ------------------------------------------------ scripts outside the safe subset

_HARMLESS_REDIRECT = re.compile(
    r"^(?:\d*>&(?:\d+|-)|\d*<&-|(?:\d*|&)>>?[ \t]*/dev/null|\d*<[ \t]*/dev/null)$"
)


def fallback_for_script(script: str, tree: Parsed | None = None) -> list[ParsedCommand] | None:
    """A summary for a script Codex leaves `unknown` because it is not word-only:

    - one of our own commands fed by a heredoc (`write f <<'EOF' … EOF`) or with
      arguments bash would expand (`task:general --prompt "$(cat p)"`);
    - a word-only script once redirections that only silence or merge output
      (`2>&1`, `>/dev/null`, `2>/dev/null`, `</dev/null`) are removed.
    Returns None when nothing better than `unknown` can honestly be said."""
    own = _own_command_line(script) if _starts_like_ours(script) else None
    if own is not None:
        return [own]
    stripped = _strip_harmless_redirects(script, tree)
    if stripped is None or parse_plain_shell_script(stripped) is None:
        return None
    parsed = finish(["bash", "-lc", stripped], parse_shell_script(stripped, upgrade_stage))
    return None if has_unknown(parsed) else parsed


def _own_command_line(script: str) -> ParsedCommand | None:
    line = script.strip()
    word = cmdline.first_word(line)
    if not word or not _looks_like_ours(word):
        return None
    heredoc = cmdline.extract_heredoc(line)
    if heredoc is not None:
        line = heredoc[0]
    head = cmdline.split_top_level(line).head
    if cmdline.has_redirection(head):
        return None
    try:
        argv = cmdline.split_argv(head)
    except ValueError:
        return None
    return own_command(argv, heredoc[1] if heredoc is not None else None) if argv else None


def _starts_like_ours(script: str) -> bool:
    """Cheap pre-check before the quote-aware first word."""
    text = script.lstrip()
    return (
        catalog.starts_like_one(text)
        or text.startswith(_EXTENSION_STARTS)
        or text[:1] in ("'", '"')
    )


_EXTENSION_STARTS = ("mcp:", "skill:")


def _looks_like_ours(word: str) -> bool:
    return catalog.may_start(word) or word.startswith(_EXTENSION_STARTS)


def _strip_harmless_redirects(script: str, parsed: Parsed | None) -> str | None:
    if parsed is None:
        parsed = parse_bash(script)
    if parsed.tree is None or parsed.tree.root_node.has_error:
        return None
    source = parsed.source
    cuts: list[tuple[int, int]] = []
    stack = [parsed.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            text = parsed.node_text(node)
            if node.type != "file_redirect" or not _HARMLESS_REDIRECT.match(text):
                return None
            cuts.append((node.start_byte, node.end_byte))
            continue
        stack.extend(node.children)
    if not cuts:
        return None
    out = bytearray()
    last = 0
    for start, end in sorted(cuts):
        out += source[last:start]
        last = end
    out += source[last:]
    return out.decode("utf-8", "replace").strip()
