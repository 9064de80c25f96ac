"""Issue 14 item 17: every example in README.md and docs/*.md runs as written, tested.

Each fenced block is marked, on the line just before its fence:

    <!-- example: run -->                 run it (sh: bash -e; python: the venv's python),
                                          offline: no API key, no model given
    <!-- example: run-with-model -->      run it with a model: the fake Messages API
                                          stands in for the key the reader would give;
                                          a yaml block is a GitHub Actions workflow: its
                                          `run:` steps run in order (below)
    <!-- example: no-run: REASON -->      not run, and why

or, for blocks without their own mark, by a file-level `<!-- examples: no-run: REASON -->`
line. An unmarked block fails the test. Runnable blocks execute in a scratch copy of the
repository (its tracked files; `.venv` linked in) with `synapse` on PATH, a scratch
`SYNAPSE_HOME`, no `ANTHROPIC_*` variable (a `run` block is what a reader without a
key can run; `run-with-model` blocks get ANTHROPIC_BASE_URL pointing at the fake
Messages API, `synapse fake-api`, and a key), each with a timeout; every command must
succeed. Every block is
linted: JSON blocks parse, and every `synapse …` flag exists in that command's parser
(what `--help` prints). Benchmarks are never run here (nor anywhere in CI).

A workflow (`yaml`, one job) runs its steps' `run:` scripts in order, each in `bash -e -o
pipefail`, with the job's `env` (a `${{ … }}` value, such as the API key secret, is the
fake API's), `$GITHUB_STEP_SUMMARY` and `$RUNNER_TEMP` in a scratch folder. The scratch
copy of the repository, with `synapse` on PATH, stands in for the steps that set up the
runner (`uses:`) and the one that installs Synapse (`id: install-synapse`).

And the docs match the repository (issue 27 item 10): the README links every
docs/*.md, relative links name files that exist, the README points to the fake API's
script format with a runnable example, docs/neovim.md and `:help synapse` list the
plugin's setup options as `M.defaults` has them and show `cmd` with the venv's
`synapse`, and vscode-client/package.json names no placeholder repository.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from synapse_lsp.cli.entry import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 120
_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_MARK = re.compile(r"^<!-- example: (run|run-with-model|no-run: (?P<why>.+?)) -->$")
_RUN = ("run", "run-with-model")
_FILE_MARK = re.compile(r"^<!-- examples: no-run: (?P<why>.+?) -->$", re.M)
_SYNAPSE = re.compile(r"(?:^|(?<=[\s;&|(]))(?:\.venv/bin/)?synapse[ \t]+(?P<rest>.*)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    body: str
    mark: str | None  # "run", "run-with-model", "no-run: why", or None (unmarked)

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> Iterator[Block]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    file_mark = _FILE_MARK.search(text)
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        close = index + 1
        while close < len(lines) and not lines[close].startswith(fence.group(1)):
            close += 1
        before = _MARK.match(lines[index - 1]) if index else None
        mark = before.group(1) if before else None
        if mark is None and file_mark is not None:
            mark = f"no-run: {file_mark.group('why')}"
        yield Block(
            path, index + 1, fence.group(2).strip(), "\n".join(lines[index + 1 : close]), mark
        )
        index = close + 1


ALL = [b for path in DOCS for b in blocks(path)]
RUNNABLE = [b for b in ALL if b.mark in _RUN]


def test_the_docs_have_runnable_examples() -> None:
    names = {b.path.name for b in RUNNABLE}
    assert {"README.md", "user-guide.md"} <= names, names


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_every_block_is_marked_runnable_or_not_with_a_reason(block: Block) -> None:
    assert block.mark is not None, (
        f"{block.id}: mark the block with <!-- example: run --> or "
        "<!-- example: no-run: REASON --> on the line before its fence"
    )
    if block.mark not in _RUN:
        assert len(block.mark.removeprefix("no-run:").strip()) >= 5, f"{block.id}: give a reason"
    else:
        languages = ("sh", "bash", "python", *(("yaml",) if block.mark == "run-with-model" else ()))
        assert block.info in languages, (
            f"{block.id}: runnable blocks are sh or python (a workflow: yaml, run-with-model)"
        )
        assert "bench" not in block.body, f"{block.id}: benchmarks never run in CI"
        if block.info == "yaml":
            _, steps = workflow(block.body)
            assert [s for s in steps if "run" in s], f"{block.id}: a workflow runs something"


@pytest.mark.parametrize("block", [b for b in ALL if b.info == "json"], ids=lambda b: b.id)
def test_json_blocks_parse(block: Block) -> None:
    decoder, index, body = json.JSONDecoder(), 0, block.body
    while True:  # one value, or several one after another (a message sequence)
        while index < len(body) and body[index].isspace():
            index += 1
        if index >= len(body):
            return
        try:
            _, index = decoder.raw_decode(body, index)
        except ValueError as exc:
            pytest.fail(f"{block.id}: not JSON: {exc}")


def _parser_flags(words: list[str]) -> tuple[str, set[str]]:
    """The subcommand's name (with a `tools` action) and every option its parser knows."""
    module = importlib.import_module(SUBCOMMANDS[words[0]][0])
    parser: argparse.ArgumentParser = module.build_parser()
    name = words[0]
    flags = {f for action in parser._actions for f in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = next((w for w in words[1:] if w in action.choices), None)
            if sub is not None:
                name += f" {sub}"
                flags |= {f for a in action.choices[sub]._actions for f in a.option_strings}
    return name, flags


def synapse_invocations(body: str) -> Iterator[list[str]]:
    """The words of every `synapse <subcommand> …` in a block (up to a comment or an
    operator such as `|`, `&&`, `;`)."""
    for line in body.replace("\\\n", " ").splitlines():
        for match in _SYNAPSE.finditer(line):
            lexer = shlex.shlex(match.group("rest"), posix=True, punctuation_chars=";&|<>")
            lexer.whitespace_split = True
            words: list[str] = []
            try:
                for word in lexer:
                    if word and set(word) <= set(";&|<>"):
                        break
                    words.append(word.strip("[]()"))
            except ValueError:  # unbalanced quotes: the block shows a fragment
                words = match.group("rest").split("#")[0].split()
            if words and (words[0] in SUBCOMMANDS or words[0].startswith("-")):
                yield words
            elif words and re.fullmatch(r"[a-z][a-z-]+", words[0]) and len(words) > 1:
                yield words  # looks like a subcommand: must be one


def test_synapse_invocations_are_found() -> None:
    found = [w for b in ALL for w in synapse_invocations(b.body)]
    assert any(w[:3] == ["exec", "--yes", "read README.md --limit 5"] for w in found), found[:5]


@pytest.mark.parametrize(
    "block", [b for b in ALL if list(synapse_invocations(b.body))], ids=lambda b: b.id
)
def test_every_synapse_flag_exists(block: Block) -> None:
    top = {"-h", "--help", "--version"}
    for words in synapse_invocations(block.body):
        if words[0].startswith("-"):
            assert words[0] in top, f"{block.id}: synapse {words[0]}"
            continue
        assert words[0] in SUBCOMMANDS, f"{block.id}: unknown command synapse {words[0]}"
        name, flags = _parser_flags(words)
        for word in words[1:]:
            if word == "--":
                break
            if word.startswith("-") and word not in ("-", "…") and not word.startswith("-…"):
                flag = word.split("=", 1)[0]
                assert flag in flags, f"{block.id}: `synapse {name}` has no option {flag}"


# ------------------------------------------------------------------ running them


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A copy of the repository's tracked files, and the environment examples run in
    (fake Messages API, scratch SYNAPSE_HOME, the venv's `synapse` first on PATH)."""
    base = tmp_path_factory.mktemp("docs-examples")
    repo = base / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    (repo / ".venv").symlink_to(ROOT / ".venv" if (ROOT / ".venv").exists() else sys.prefix)
    script = base / "script.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"commands": ["read README.md --limit 5"]},
                    {"text": "Synapse is an LLM coding agent whose one tool is Bash."},
                ],
                "loop": True,
            }
        ),
        encoding="utf-8",
    )
    port_file = base / "port"
    server = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "fake-api", "--script", str(script),
         "--port-file", str(port_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert server.poll() is None and time.monotonic() < deadline, "fake API did not start"
            time.sleep(0.05)
        home = base / "home"
        home.mkdir()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "SYNAPSE_"))},
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "SYNAPSE_HOME": str(home),
            "ANTHROPIC_API_KEY": "sk-ant-docs-examples",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port_file.read_text().strip()}",
            "NO_COLOR": "1",
        }
        yield repo, env
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_runnable_examples_run_as_written(
    block: Block, scratch: tuple[Path, dict[str, str]]
) -> None:
    repo, env = scratch
    if block.mark == "run":  # what a reader without a key runs: no model is given
        env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    scripts = [block.body]
    if block.info == "yaml":
        env, scripts = _workflow_run(block, env, repo)
    before = _tracked_state(repo)
    for script in scripts:
        if block.info == "python":
            argv = [sys.executable, "-c", script]
        else:
            argv = ["bash", "-e", "-o", "pipefail", "-c", script]
        proc = subprocess.run(
            argv, cwd=repo, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        assert proc.returncode == 0, (
            f"{block.id} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    assert _tracked_state(repo) == before, f"{block.id} changed files of the repository"
    if block.info == "yaml" and "GITHUB_STEP_SUMMARY" in block.body:
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        assert summary.strip(), f"{block.id}: the job's summary stayed empty"


# Steps a workflow example's run stands in for: the runner's set-up and the install.
STOOD_IN = "install-synapse"


def workflow(body: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """A one-job GitHub Actions workflow, read for the subset the docs use: the job's
    `env` and its steps' scalar keys (`name`, `id`, `uses`, `run`: a `|` block or one
    line); nested mappings (`with:`) are skipped."""
    lines = body.split("\n")
    env: dict[str, str] = {}
    steps: list[dict[str, str]] = []
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 4 and stripped.endswith(":"):
            section = stripped[:-1]
            continue
        if section == "env" and indent == 6:
            key, _, value = stripped.partition(":")
            env[key] = value.strip().strip('"')
        elif section == "steps" and indent in (6, 8):
            if stripped.startswith("- "):
                steps.append({})
                stripped = stripped[2:]
            key, _, value = stripped.partition(":")
            if key not in ("name", "id", "uses", "run"):
                continue
            value = value.strip()
            if value == "|":  # a literal block: the lines indented deeper
                block: list[str] = []
                while index < len(lines) and (
                    not lines[index].strip() or len(lines[index]) - len(lines[index].lstrip()) > 8
                ):
                    block.append(lines[index])
                    index += 1
                value = textwrap.dedent("\n".join(block)).strip("\n") + "\n"
            steps[-1][key] = value
    return env, steps


def _workflow_run(
    block: Block, env: dict[str, str], repo: Path
) -> tuple[dict[str, str], list[str]]:
    """The environment and the scripts a workflow block runs (see the module doc)."""
    job_env, steps = workflow(block.body)
    runner = repo.parent / f"runner-{block.line}"
    runner.mkdir(exist_ok=True)
    summary = runner / "summary.md"
    literal = {k: v for k, v in job_env.items() if not v.startswith("${{")}
    env = {**env, **literal, "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(runner)}
    missing = [k for k, v in job_env.items() if v.startswith("${{") and k not in env]
    assert not missing, f"{block.id}: nothing stands in for {missing}"
    runs = [s["run"] for s in steps if "run" in s and "uses" not in s and s.get("id") != STOOD_IN]
    return env, runs


def _tracked_state(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and ".venv" not in p.parts and p.suffix in (".md", ".py", ".json")
    }


# ---------------------------------------------- docs that match (issue 27 item 10)

_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _links(path: Path) -> set[Path]:
    """The files `path` links to (relative links; anchors and URLs left out)."""
    found = set()
    for match in _LINK.finditer(path.read_text(encoding="utf-8")):
        target = match.group("target").split("#")[0]
        if target and not re.match(r"[a-z][a-z0-9+.-]*:", target):
            found.add((path.parent / target).resolve())
    return found


def test_every_doc_is_linked_from_the_readme() -> None:
    unlinked = [d.name for d in sorted((ROOT / "docs").glob("*.md")) if d not in _links(DOCS[0])]
    assert not unlinked, f"README.md links no docs/{unlinked}"


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_relative_links_name_files_that_exist(doc: Path) -> None:
    missing = sorted(str(p) for p in _links(doc) if not p.exists())
    assert not missing, f"{doc.relative_to(ROOT)} links to {missing}"


def test_the_user_guide_and_readme_point_to_acp_and_the_fake_api_script_format() -> None:
    guide = ROOT / "docs" / "user-guide.md"
    assert ROOT / "docs" / "acp.md" in _links(guide)
    readme = DOCS[0].read_text(encoding="utf-8")
    assert "docs/agent.md#script-format" in readme
    assert "### Script format" in (ROOT / "docs" / "agent.md").read_text(encoding="utf-8")
    fake_api = [b for b in RUNNABLE if b.path == DOCS[0] and "synapse fake-api --script" in b.body]
    assert fake_api, "README.md: a runnable example of the agent on a fake-API script"


def _lua_table_keys(text: str, start: str) -> list[str]:
    """The keys of the Lua table literal that opens on the line `start` (its own level)."""
    lines = text[text.index(start) :].splitlines()[1:]
    keys = []
    for line in lines:
        if line.startswith("}"):  # its closing brace (or `})`)
            break
        key = re.match(r"^  ([a-z_]+) = ", line)
        if key:
            keys.append(key.group(1))
    return keys


def test_the_neovim_docs_name_every_setup_option_and_how_to_name_the_server() -> None:
    defaults = _lua_table_keys(
        (ROOT / "nvim-client/lua/synapse/init.lua").read_text(encoding="utf-8"), "M.defaults = {"
    )
    assert "cmd" in defaults and len(defaults) >= 5, defaults
    guide = (ROOT / "docs" / "neovim.md").read_text(encoding="utf-8")
    assert _lua_table_keys(guide, 'require("synapse").setup({\n') == defaults
    help_text = (ROOT / "nvim-client/doc/synapse.txt").read_text(encoding="utf-8")
    options = help_text[help_text.index("*synapse.setup()*") :].split("\n\n")[1]
    assert re.findall(r"^  ([a-z_]+) {2,}", options, re.M) == defaults
    # `./dev setup` puts no `synapse` on PATH: the guide shows `cmd` with the venv's one.
    assert re.search(r"setup\(\{ cmd = \{ [^}]*\.venv/bin/synapse\"\), \"lsp\" \} \}\)", guide)
    assert "`./dev setup` does not put `synapse` on your `PATH`" in guide


_PLACEHOLDER_HOST = re.compile(r"https?://[^/\"]*\b(example\.(com|org|net)|\.invalid|\.test)\b")


def test_the_vscode_package_names_no_placeholder_repository() -> None:
    text = (ROOT / "vscode-client" / "package.json").read_text(encoding="utf-8")
    assert not _PLACEHOLDER_HOST.search(text), _PLACEHOLDER_HOST.search(text)
    manifest = json.loads(text)
    if "repository" not in manifest:  # vsce would stop to ask for it
        script = (ROOT / "vscode-client" / "scripts" / "package.sh").read_text(encoding="utf-8")
        assert "--allow-missing-repository" in script
