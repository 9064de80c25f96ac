"""Issue 14 item 16: summaries never hide a write; task:explore's read-only rule is its
own allow-list (not the summaries); a denied command has the `denied` status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.readonly import denial
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.subagents import ExploreGate
from synapse_lsp.commands import Layer, Step
from synapse_lsp.config import Settings
from synapse_lsp.events import ToolCallFinished, ToolCallStarted
from synapse_lsp.lsp.updates import event_to_update
from synapse_lsp.lsp.wire import to_wire
from synapse_lsp.router import BashRouter
from synapse_lsp.summaries.parse_command import main as parse_command_main
from synapse_lsp.summaries.titles import summarize
from synapse_lsp.summaries.writes import writes

WRITING = [
    "sed -i s/a/b/ x.py && cat x.py",
    "sed -i.bak 's/a/b/' x.py; cat x.py",
    "sed -i s/a/b/ x.py && pytest",
    "cat a.py | tee x.py",
    "tee x.py < a.py | cat x.py",
    "cat a.py | sort -o x.py",
    "sort -o x.py a.py && cat x.py",
    "dd if=a.py of=x.py && cat x.py",
    "cat a.py > x.py",
    "cat a.py >> x.py && cat x.py",
    "cp a.py x.py && cat x.py",
    "mv a.py x.py && ls",
    "rm -f x.py && ls",
    "cat $(touch x.py) a.py",
    "rg -n x src > hits.txt",
    "curl -o x.json https://example.com/x.json",
    "ruff check --fix .",
    "(cd src && cat a.py) > x.txt",
]


@pytest.mark.parametrize("command", WRITING)
def test_a_line_that_writes_is_titled_as_an_edit_not_a_read(command: str) -> None:
    summary = summarize(command)
    assert summary.kind == "edit", summary
    assert summary.title.startswith("Run `"), summary
    assert writes(command)


@pytest.mark.parametrize(
    ("command", "kind", "title"),
    [
        ("cat x.py", "read", "Read x.py"),
        ("cat x.py 2>/dev/null | head", "read", "Read x.py"),
        ("pytest -q 2>&1 | tail -30", "execute", "Run tests"),
        ("grep -n '>' x.py", "search", "Search `>` in x.py"),
        ("sed -n '1,20p' x.py", "read", "Read x.py"),
        ("write x.py 'hi'", "edit", "Write x.py"),
        ("curl -s https://example.com/x.json", "fetch", "Fetch https://example.com/x.json"),
    ],
)
def test_lines_that_only_read_keep_their_titles(command: str, kind: str, title: str) -> None:
    summary = summarize(command)
    assert (summary.kind, summary.title) == (kind, title)


def test_codex_exact_output_stays_available(capsys: pytest.CaptureFixture[str]) -> None:
    line = "sed -i s/a/b/ x.py && cat x.py"
    assert parse_command_main(["--codex", "--script", line]) == 0
    codex = json.loads(capsys.readouterr().out)
    assert (codex["kind"], codex["title"]) == ("read", "Read x.py")
    assert parse_command_main(["--script", line]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours["parsed"] == codex["parsed"]  # the parse itself is Codex's
    assert (ours["kind"], ours["title"]) == ("edit", f"Run `{line}`")


# ------------------------------------------------------------ the explore allow-list

ALLOWED = [
    "ls -la",
    "cat a.py | head -20",
    "wc -l a.py b.py",
    "grep -rn TODO src 2>/dev/null",
    "rg -n 'x > y' src",
    "find . -name '*.py' -type f",
    "sed -n 1,20p a.py",
    "git log --oneline -5",
    "git show HEAD:a.py",
    "git diff HEAD~1 -- a.py",
    "git status --short 2>&1",
    "git grep -n foo",
    "git blame a.py",
    "git ls-files",
    "git branch",
    "git branch -a --contains HEAD",
    "cd src && ls",
    "diff <(ls a) <(ls b)",
]
REFUSED = [
    "git branch -D main",
    "git branch -d old",
    "git branch -m new",
    "git branch newbranch",
    "git checkout main",
    "git diff --output=x.txt",
    "git -c core.pager=sh log",
    "sed -i s/a/b/ a.py",
    "sort -o a.py a.py",
    "cat a.py > b.py",
    "echo hi | tee b.py",
    "find . -delete",
    "find . -name x -exec rm {} ;",
    "rg --pre ./evil x",
    "ls; rm a.py",
    'ls && python -c \'open("x","w")\'',
    "cat $(rm a.py)",
    "X=1 ls",
    "ls >(cat)",
    "dd if=a.py of=b.py",
]


@pytest.mark.parametrize("command", ALLOWED)
def test_explore_allows_read_only_commands(command: str) -> None:
    assert denial(command) is None


@pytest.mark.parametrize("command", REFUSED)
def test_explore_refuses_anything_not_on_the_allow_list(command: str) -> None:
    assert denial(command) is not None


async def test_the_gate_judges_every_step_not_the_summary(tmp_path: Path) -> None:
    gate = ExploreGate(None)
    # The summary of this line is "Read x.py"; the gate must not trust it.
    line = "sed -i s/a/b/ x.py && cat x.py"
    assert summarize(line).parsed[0]["type"] == "read"
    assert await gate.check(line, Layer.NATIVE, tmp_path, [Step(line, Layer.NATIVE)])
    steps = [Step("read x.py", Layer.AGENT), Step("git branch -D main", Layer.NATIVE)]
    assert await gate.check("read x.py | git branch -D main", Layer.AGENT, tmp_path, steps)
    assert await gate.check("git log -3", Layer.NATIVE, tmp_path) is None


# ------------------------------------------------------------- the denied status


async def test_a_refused_command_in_explore_is_denied_not_failed(
    router: BashRouter, settings: Settings, workdir: Path
) -> None:
    async with FakeAnthropic([]) as api:
        api.add(
            {"commands": ['task:explore --prompt "clean up" --description "ro"']},
            {"commands": ["git branch -D main", "ls"]},
            {"text": "Could not delete."},
            {"text": "Done."},
        )
        model = ModelClient(
            api_key="sk-ant-test", base_url=api.base_url, model="fake", retry_base_delay=0.001
        )
        try:
            session = ChatSession(router, settings, model=model)
            events = [e async for e in session.run_turn("go")]
        finally:
            await model.close()
    started = {e.tool_call_id: e.command for e in events if isinstance(e, ToolCallStarted)}
    done = {started[e.tool_call_id]: e for e in events if isinstance(e, ToolCallFinished)}
    denied = done["git branch -D main"]
    assert denied.status == "denied" and denied.category == "permission_denied"
    assert done["ls"].status == "completed"
    update = event_to_update(denied)
    assert update is not None
    assert to_wire(update)["status"] == "denied"  # the LSP tool_call_update status
