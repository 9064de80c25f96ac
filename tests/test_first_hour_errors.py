"""Issue 14 ("first hour of a real user"): the errors the model and the user see.

One test (or a few) per item; each fails without its fix."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.agent.tool_names import unknown_tool_result
from synapse_lsp.commands import CommandContext, FailureCategory, Layer
from synapse_lsp.config import Settings
from synapse_lsp.events import NO_ANSWER
from synapse_lsp.extensions import wrapper_files
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.extensions.search import CommandSearchCommand, SearchIndex, search_commands
from synapse_lsp.extensions.skill_commands import SkillSearchCommand
from synapse_lsp.extensions.skills import run_script, scan_skills
from synapse_lsp.files import DiskFiles
from synapse_lsp.lsp.logs import setup_logging
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession
from tests.fake_api import FakeApiProcess
from tests.test_agent import MakeSession, api, finished, make, tool_results, turn  # noqa: F401


def _write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def _skill(home: Path, name: str, description: str = "A skill") -> Path:
    folder = home / "skills" / name
    _write(folder / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n")
    return folder


# ------------------------------------------------------------------ item 8


async def test_item8_executable_script_without_shebang_names_the_missing_interpreter(
    settings: Settings, workdir: Path
) -> None:
    home = settings.synapse_home
    folder = _skill(home, "greet")
    _write(folder / "scripts" / "hello.ts", 'console.log("hi")\n', mode=0o755)
    skills, _ = scan_skills(home / "skills")
    script = next(s for k in skills if k.name == "greet" for s in k.scripts)
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles(), env=dict(os.environ))
    out = await run_script(script, [], ctx, timeout=10)
    assert out.exit_code == 126 and out.category is FailureCategory.DEPENDENCY_MISSING
    assert "no shebang" in out.stderr and "#!/usr/bin/env -S npx tsx" in out.stderr
    assert "skill:greet:hello" in out.stderr


# ------------------------------------------------------------------ item 9


@pytest.mark.parametrize("name", ["skill:x", "mcp:x"])
async def test_item9_unknown_two_part_extension_name_is_an_unknown_extension_command(
    router: BashRouter, name: str
) -> None:
    result = await router.route(f"{name} --help")
    assert result.layer is Layer.EXTENSION and result.category is FailureCategory.NOT_FOUND
    assert "unknown extension command" in result.stderr
    assert "bash:" not in result.stderr  # never reached bash
    assert "command:search" in result.text
    assert f"Run `{name} --help`" not in result.text


# ------------------------------------------------------------------ item 12


@pytest.mark.parametrize("line", ["bash", "bash ", "bash -l"])
async def test_item12_bare_bash_is_a_usage_error(router: BashRouter, line: str) -> None:
    result = await router.route(line)
    assert result.exit_code == 2 and result.category is FailureCategory.INVALID_USAGE
    assert "(no output)" not in result.text and "Not run" in result.text
    assert 'Bash(command="' in result.text


# ------------------------------------------------------------------ item 20


async def test_item20_shell_exit_says_a_fresh_shell_started(router: BashRouter) -> None:
    result = await router.route("exit 3")
    assert result.exit_code == 3
    assert "fresh shell" in result.text
    assert "exit --help" not in result.text


async def test_item20_typo_gets_did_you_mean_and_command_search(router: BashRouter) -> None:
    result = await router.route("gti status")
    assert result.category is FailureCategory.NOT_FOUND
    assert "Did you mean `git`" in result.text
    assert "command:search" in result.text
    assert "Run `gti --help`" not in result.text


class _Directory:
    """A registry stand-in: knows one server with one tool."""

    def get(self, name: str) -> None:
        return None

    def command_names(self) -> list[str]:
        return ["mcp:github:list_issues"]

    def extension_sources(self) -> dict[str, list[str]]:
        return {"mcp": ["github"], "skill": ["pdf"]}


async def test_item20_unknown_extension_name_names_servers_and_near_matches(
    shell: ShellSession, settings: Settings
) -> None:
    router = BashRouter(shell, settings, extensions=_Directory())
    result = await router.route("mcp:github:list_issue")
    assert "Did you mean `mcp:github:list_issues`" in result.text
    assert "configured MCP servers: github" in result.text and "skills: pdf" in result.text
    two_part = await router.route("mcp:github")
    assert "`mcp:github:list_issues`" in two_part.text


async def test_item20_edit_not_found_gives_its_own_advice_first(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "f.txt").write_text("alpha\n")
    result = await router.route("edit f.txt beta gamma")
    hint = result.text[result.text.index("Hint:") :]
    assert hint.startswith("Hint: Read the file first (`read f.txt`)")
    assert "edit --help" not in hint  # the text did not match: not a usage mistake


# ------------------------------------------------------------------ item 21


async def test_item21_read_numbers_lines_for_the_model_and_not_in_a_pipe(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "f.txt").write_text("alpha\nbeta\ngamma\n")
    result = await router.route("read f.txt --offset 1")
    assert result.stdout == "     2\tbeta\n     3\tgamma\n"
    piped = await router.route("read f.txt | cat")
    assert piped.stdout == "alpha\nbeta\ngamma\n"
    await router.route("read f.txt | write g.txt")
    assert (workdir / "g.txt").read_text() == "alpha\nbeta\ngamma\n"


async def test_item21_edit_strips_copied_line_numbers(router: BashRouter, workdir: Path) -> None:
    (workdir / "f.txt").write_text("alpha\nbeta\ngamma\n")
    old, new = r"$'     2\tbeta\n     3\tgamma'", r"$'     2\tBETA\n     3\tGAMMA'"
    result = await router.route(f"edit f.txt {old} {new}")
    assert result.exit_code == 0, result.text
    assert (workdir / "f.txt").read_text() == "alpha\nBETA\nGAMMA\n"


async def test_item21_read_help_says_offset_skips_lines(router: BashRouter) -> None:
    result = await router.route("read --help")
    assert "--offset N    skip the first N lines" in result.stdout


# ------------------------------------------------------------------ item 10


@dataclass(frozen=True)
class _Cmd:
    name: str
    summary: str = ""
    usage: str = ""


_COMMANDS = [
    _Cmd("mcp:test:echo", "Echo text"),
    _Cmd("mcp:test:add", "Add numbers"),
    _Cmd("mcp:testing:echo", "Echo for testing"),
    _Cmd("skill:pdf:extract", "Extract text from a PDF"),
]


class _Source:
    def search_index(self) -> SearchIndex:
        return SearchIndex.of(_COMMANDS)

    def notes(self) -> list[str]:
        return []


def _names(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.split()]


async def test_item10_no_pattern_lists_all_and_globs_match_whole_names(
    settings: Settings, workdir: Path
) -> None:
    search = CommandSearchCommand(_Source())
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles())
    everything = await search.run([], ctx)
    assert everything.exit_code == 0 and len(_names(everything.stdout)) == 4
    only_mcp = await search.run(["--type=mcp"], ctx)
    assert only_mcp.exit_code == 0 and len(_names(only_mcp.stdout)) == 3
    star = await search.run(["*"], ctx)
    assert len(_names(star.stdout)) == 4
    glob = await search.run(["mcp:test:*"], ctx)
    assert sorted(_names(glob.stdout)) == ["mcp:test:add", "mcp:test:echo"]
    forced = await search.run(["--regex", "echo$"], ctx)
    assert sorted(_names(forced.stdout)) == ["mcp:test:echo", "mcp:testing:echo"]
    bad = await search.run(["--regex", "("], ctx)
    assert bad.category is FailureCategory.INVALID_USAGE
    # the same rule for every entry point (synapse tools search, synapse.tools.search)
    assert [m.name for m in search_commands(_COMMANDS, "mcp:test:*")] == [
        "mcp:test:add",
        "mcp:test:echo",
    ]
    assert search_commands(_COMMANDS, "").total == 4


async def test_item10_skill_search_with_an_empty_query_lists_every_skill(
    settings: Settings, workdir: Path
) -> None:
    home = settings.synapse_home
    _skill(home, "pdf", "Work with PDF files")
    _skill(home, "git-helper", "Git chores")
    skills, _ = scan_skills(home / "skills")

    class Skills:
        def __init__(self) -> None:
            self.skills = {s.name: s for s in skills}

    search = SkillSearchCommand(Skills())
    ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles())
    for argv in ([""], [], ["*"]):
        out = await search.run(argv, ctx)
        assert out.exit_code == 0, out.stderr
        assert out.data["matches"] == ["git-helper", "pdf"], argv
    glob = await search.run(["pd*"], ctx)
    assert glob.data["matches"] == ["pdf"]


# ------------------------------------------------------------------ item 11


async def test_item11_command_search_waits_for_connecting_servers(
    tmp_path: Path, workdir: Path
) -> None:
    home = tmp_path / "home11"
    (home / "mcp").mkdir(parents=True)
    server = Path(__file__).parent / "mcp_servers" / "demo_server.py"
    entry = {"command": sys.executable, "args": [str(server), "--startup-delay", "1.5"]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"slow": entry}}))
    settings = Settings(synapse_home=home, command_timeout=30)
    reg = ExtensionRegistry(settings, None, watch=False, serve_socket=False)
    await reg.start()
    try:
        assert reg.mcp.servers["slow"].state == "connecting"
        ctx = CommandContext(cwd=workdir, settings=settings, files=DiskFiles())
        out = await CommandSearchCommand(reg).run(["--type", "mcp"], ctx)
        assert "mcp:slow:echo" in out.stdout, out.stdout
        assert "still connecting" not in out.stdout
    finally:
        await reg.close()


# ---------------------------------------------------------- items 12 and 23 (agent loop)


async def test_item12_malformed_tool_input_is_not_called_max_tokens(
    api: FakeAnthropic,  # noqa: F811
    make: MakeSession,  # noqa: F811
    workdir: Path,
) -> None:
    bad = '{"command": "echo hi" "oops"}'  # complete but malformed; stop_reason tool_use
    session = make([{"content": [{"type": "tool_use", "input_json": bad}]}, "ok"])
    events = await turn(session, "go")
    assert finished(events).stop_reason == "end_turn"
    (result,) = tool_results(api.message_requests[1])
    assert result["is_error"] is True
    assert "malformed JSON" in result["content"] and "max_tokens" not in result["content"]


@pytest.mark.parametrize(
    ("name", "tool_input", "expected"),
    [
        (
            "Read",
            {"file_path": "a b.py", "offset": 11, "limit": 5},
            "read 'a b.py' --offset 10 --limit 5",
        ),
        (
            "Edit",
            {"file_path": "x.py", "old_string": "a = 1", "new_string": "a = 2"},
            "edit x.py 'a = 1' 'a = 2'",
        ),
        (
            "Grep",
            {"pattern": "def main", "path": "src", "-i": True},
            "grep -rlEi -e 'def main' src",
        ),
        ("Glob", {"pattern": "**/*.py"}, "(shopt -s globstar nullglob; printf '%s\\n' **/*.py)"),
        (
            "TodoWrite",
            {"todos": [{"content": "Fix it", "status": "in_progress"}]},
            'TodoWrite \'{"todos": [{"content": "Fix it", "status": "in_progress"}]}\'',
        ),
        (
            "Task",
            {
                "description": "find config",
                "prompt": "Where is retry set?",
                "subagent_type": "Explore",
            },
            "task:explore --prompt 'Where is retry set?' --description 'find config'",
        ),
    ],
)
async def test_item23_hallucinated_tool_names_get_the_exact_bash_call(
    api: FakeAnthropic,  # noqa: F811
    make: MakeSession,  # noqa: F811
    name: str,
    tool_input: dict[str, Any],
    expected: str,
) -> None:
    session = make([{"content": [{"type": "tool_use", "name": name, "input": tool_input}]}, "ok"])
    await turn(session, "go")
    (result,) = tool_results(api.message_requests[1])
    assert result["is_error"] is True and "the only tool is Bash" in result["content"]
    assert f"Bash(command={json.dumps(expected)})" in result["content"], result["content"]


def test_item23_a_multi_line_write_equivalent_uses_a_heredoc(workdir: Path) -> None:
    text = unknown_tool_result("Write", {"file_path": "n.txt", "content": "---\ntitle: x\n"})
    call = text.splitlines()[-1]
    command = json.loads(call[len("Bash(command=") : -1])
    assert command == "write n.txt <<'EOF'\n---\ntitle: x\nEOF"


# ------------------------------------------------------------------ item 12 (wrappers)


def test_item12_a_directory_in_a_wrapper_path_is_reported(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    (bin_dir / "skill:s:x").mkdir(parents=True)
    problems: list[str] = []
    wrapper_files.sync(bin_dir, {"skill:s:x": "#!/bin/sh\n"}, lambda n: True, problems)
    assert len(problems) == 1 and "a directory is in its place" in problems[0]
    assert "skill:s:x" in problems[0]


# ------------------------------------------------------------------ item 13


async def test_item13_write_content_may_start_with_a_dash(
    router: BashRouter, workdir: Path
) -> None:
    result = await router.route("write post.md '---\ntitle: x\n---\nbody'")
    assert result.exit_code == 0, result.text
    assert (workdir / "post.md").read_text() == "---\ntitle: x\n---\nbody"
    dashed = await router.route("write list.txt '- item'")
    assert dashed.exit_code == 0 and (workdir / "list.txt").read_text() == "- item"
    named = await router.route("write --odd x")
    assert named.exit_code == 2 and "write -- --odd" in named.text
    page = await router.route("write --help")
    assert "write post.md '---" in page.stdout


# ------------------------------------------------------------------ items 14 and 23 (CLI)


def _synapse(home: Path, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SYNAPSE_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(home),
        **kw,
    )


def test_item14_a_closed_stdout_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home14"
    for n in range(200):
        _write(home / "skills" / f"s{n}" / "scripts" / "x.sh", "echo\n")
    for args in (["tools", "list"], ["-h"]):
        proc = _synapse(home, *args)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # like `| head` that has read enough
        err = proc.stderr.read().decode()
        assert proc.wait(60) in (0, 141), err
        assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_item23_tools_refresh_fails_on_an_unreadable_skills_folder_and_says_it_once(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home23"
    home.mkdir()
    (home / "skills").write_text("not a folder\n")
    proc = _synapse(home, "tools", "refresh", "skills")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert err.decode().count("cannot list skills") == 1, err


# ------------------------------------------------------------------ item 22


async def test_item22_skill_search_subagent_is_read_only_but_may_ask_for_help(
    api: FakeAnthropic,  # noqa: F811
    make: MakeSession,  # noqa: F811
    workdir: Path,
) -> None:
    (workdir / "keep.txt").write_text("keep\n")
    session = make(
        [
            {"commands": ["rm keep.txt", "skill:pdf:extract --help", "ls"]},
            {"text": "Found nothing."},
        ]
    )
    result = await session.router.route('task:skill:search --prompt "pdf" --description "find"')
    assert result.exit_code == 0, result.text
    removed, helped, listed = tool_results(api.message_requests[1])
    assert removed["is_error"] and "task:skill:search is read-only" in removed["content"]
    assert (workdir / "keep.txt").exists()
    assert "read-only" not in helped["content"]  # -h/--help of an extension command may run
    assert not listed["is_error"]


async def test_item22_a_nested_task_in_explore_gets_the_recursion_message(
    api: FakeAnthropic,  # noqa: F811
    make: MakeSession,  # noqa: F811
) -> None:
    session = make(
        [
            {"commands": ['task:general --prompt "more" --description "nested"']},
            {"text": "Done myself."},
        ]
    )
    result = await session.router.route('task:explore --prompt "look" --description "ro"')
    assert result.exit_code == 0, result.text
    (nested,) = tool_results(api.message_requests[1])
    assert "Nested task not run" in nested["content"]
    assert "read-only" not in nested["content"]


# ------------------------------------------------------------------ item 23 (empty answer)


async def test_item23_an_empty_answer_is_noted_in_the_turn_finished_event(
    make: MakeSession,  # noqa: F811
) -> None:
    session = make([{"content": []}])
    events = await turn(session, "say nothing")
    done = finished(events)
    assert done.stop_reason == "end_turn" and done.note == NO_ANSWER
    spoken = make([{"text": "hello"}])
    assert finished(await turn(spoken, "hi")).note is None


def test_item23_chat_p_with_an_empty_answer_exits_non_zero(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    with FakeApiProcess([{"content": []}], tmp_path / "api") as fake:
        env = {**fake.env(), "SYNAPSE_HOME": str(tmp_path / "home")}
        proc = subprocess.run(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", "hi"],
            capture_output=True,
            text=True,
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert "without an answer" in proc.stderr


# ------------------------------------------------------------------ item 15


def test_item15_answered_client_errors_are_one_log_line_bugs_keep_their_traceback(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "logs" / "lsp.log"
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        setup_logging(log_file)
        pygls_log = logging.getLogger("pygls.protocol.json_rpc")
        try:
            raise JsonRpcInvalidParams("synapse.session.load: unknown sessionId 'nope'")
        except JsonRpcInvalidParams:
            pygls_log.exception('Exception occurred for message "1"')
        try:
            raise KeyError("a real bug")
        except KeyError:
            pygls_log.exception('Exception occurred for message "2"')
        for handler in root.handlers:
            handler.flush()
        text = log_file.read_text()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
    first, rest = text.split("\n", 1)
    assert "INFO" in first and "unknown sessionId 'nope'" in first
    assert rest.count("Traceback") == 1 and "KeyError: 'a real bug'" in rest


# ------------------------------------------------------------------ items 6 and 7
# (fixed by the session store v2, f0157ec; kept here as the regression tests)


def test_item6_a_session_file_that_is_not_utf8_does_not_break_list_or_resume(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home6"
    sessions = home / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "s1.jsonl").write_bytes(
        b'\xff\xfe{"kind":"meta","title":"x"}\n{"kind":"message","message":'
        b'{"role":"user","content":"hi"}}\n{"kind":"mes'
    )
    proc = _synapse(home, "chat", "--list")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert b"s1" in out and b"Traceback" not in err
    store = ChatStore(sessions)
    loaded = store.load("s1")
    assert [m["role"] for m in loaded.messages] == ["user"]
    assert any("not UTF-8" in p for p in loaded.problems)
    store.append_message("s1", {"role": "assistant", "content": "after resume"})
    store.close()
    texts = [m["content"][0]["text"] for m in ChatStore(sessions).load("s1").messages]
    assert texts == ["hi", "after resume"]  # the torn line did not swallow it


def test_item7_an_orphan_tool_result_is_dropped_on_load(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "sessions")
    store.create("s", "t", None)
    orphan = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "x"}
    store.append_message("s", {"role": "user", "content": [orphan]})
    store.append_message("s", {"role": "user", "content": "hello"})
    store.close()
    messages = ChatStore(tmp_path / "sessions").load("s").messages
    blocks = [b for m in messages for b in m["content"]]
    assert all(b["type"] != "tool_result" for b in blocks)
