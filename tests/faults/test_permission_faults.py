"""Fault drill, the permission gate and the router's reading of a line: every native
part of a line passes the gate as if typed alone; `… | write f` takes the pipe;
long lines are scanned in linear time; an unanswered question is denied."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp import cmdline
from synapse_lsp.cmdline import simple_commands
from synapse_lsp.commands import FailureCategory, Layer
from synapse_lsp.config import Settings
from synapse_lsp.policy.gate import DENY, AskingGate
from synapse_lsp.question import Question
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


class Recorder:
    """Answers every question with `answer` and keeps the questions."""

    def __init__(self, answer: str | None = DENY) -> None:
        self.answer = answer
        self.questions: list[str] = []

    async def __call__(self, question: Question) -> str | None:
        self.questions.append(question.message)
        return self.answer


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "victim.txt").write_text("keep me\n")
    return path


def _gated(
    shell: ShellSession, settings: Settings, root: Path, policy: str, asker: Recorder
) -> BashRouter:
    live = Settings(synapse_home=settings.synapse_home, command_timeout=30.0, permission=policy)
    gate = AskingGate(live, root, asker)
    return BashRouter(shell, live, permission=gate)


BYPASSES = [
    "read a.txt | rm -f {out}/victim.txt",
    "read a.txt | tee {out}/p",
    "read a.txt | cat > {out}/p",
    "read a.txt | bash -c 'touch {out}/p'",
    "plan --help | cp a.txt {out}/p",
    "read a.txt && touch {out}/p",
    "read a.txt; rm -f {out}/victim.txt",
    "read missing.txt || touch {out}/p",
    "(cd {out} && touch p)",
    "{{ cd {out}; touch p; }}",
    "true && (cd {out} && rm -f victim.txt)",
    "echo $(touch {out}/p)",
    'echo "`touch {out}/p`"',
    "cat <(touch {out}/p)",
    "if true; then rm -f {out}/victim.txt; fi",
    "read a.txt | eval 'rm -f {out}/victim.txt'",
    "read a.txt\nrm -f {out}/victim.txt",
]


@pytest.mark.parametrize("policy", ["ask-writes-outside-workspace", "ask-all-native"])
@pytest.mark.parametrize("template", BYPASSES)
async def test_every_native_part_of_a_line_is_asked_about(
    shell: ShellSession,
    settings: Settings,
    workdir: Path,
    outside: Path,
    policy: str,
    template: str,
) -> None:
    (workdir / "a.txt").write_text("a\n")
    asker = Recorder(DENY)
    router = _gated(shell, settings, workdir, policy, asker)
    line = template.format(out=outside)
    result = await router.route(line)
    assert len(asker.questions) == 1, f"{line!r} was not asked about under {policy}"
    assert line in asker.questions[0]
    assert result.exit_code == 126 and result.category is FailureCategory.PERMISSION_DENIED
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "keep me\n"
    assert shell.cwd == workdir  # the brace group did not move the session


@pytest.mark.sandbox_mode("full-access")  # the gate's questions, not the kernel's refusals
async def test_allowed_parts_run_and_a_line_is_asked_once(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    (workdir / "a.txt").write_text("a\n")
    asker = Recorder("Allow once")
    router = _gated(shell, settings, workdir, "ask-all-native", asker)
    result = await router.route(f"read a.txt && touch {outside}/p && ls {outside}")
    assert result.exit_code == 0, result.text
    assert len(asker.questions) == 1  # one question for the whole line, not one per part
    assert (outside / "p").exists()
    # A line of built-ins only asks nothing under ask-all-native.
    assert (await router.route("read a.txt")).exit_code == 0
    assert len(asker.questions) == 1


async def test_inside_the_workspace_nothing_is_asked(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("a\n")
    asker = Recorder(DENY)
    router = _gated(shell, settings, workdir, "ask-writes-outside-workspace", asker)
    for line in ("read a.txt | tee copy.txt", "(mkdir -p sub && touch sub/x)", "{ touch y; }"):
        assert (await router.route(line)).exit_code == 0, line
    assert asker.questions == []
    assert (workdir / "copy.txt").read_text() == "a\n"


def test_simple_commands_open_groups_and_substitutions() -> None:
    found = simple_commands("(cd /o && touch x) > f; { a; b; } && echo \"$(rm y)\" '$(no)'")
    assert "cd /o" in found and "touch x" in found and "> f" in found
    assert "a" in found and "b" in found and "rm y" in found
    assert "no" not in found  # single-quoted: not a substitution


async def test_an_unanswered_question_is_denied_after_the_wait(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    never = asyncio.Event()

    async def silent(question: Question) -> str | None:
        await never.wait()
        return None

    live = Settings(
        synapse_home=settings.synapse_home,
        permission="ask-all-native",
        permission_timeout=0.5,
    )
    router = BashRouter(shell, live, permission=AskingGate(live, workdir, silent))
    result = await asyncio.wait_for(router.route(f"touch {outside}/p"), 30)
    assert result.exit_code == 126 and result.category is FailureCategory.PERMISSION_DENIED
    assert "nobody answered the permission question within 0.5 s" in result.text
    assert not (outside / "p").exists()


# ------------------------------------------------------------- `… | write f`


async def test_content_piped_into_write_is_written(router: BashRouter, workdir: Path) -> None:
    (workdir / "a.txt").write_text("b\na\n")
    cases = {
        "echo x | write f1": "x\n",
        "printf 'one\\ntwo\\n' | grep two | write f2": "two\n",
        "cat <<EOF | write f3\nhello $((1+1))\nEOF": "hello 2\n",
        "read a.txt | write f4": "b\na\n",
        "read a.txt | sort | write f5": "a\nb\n",
    }
    for line, expected in cases.items():
        result = await router.route(line)
        assert result.exit_code == 0, (line, result.text)
        name = line.split("write ")[1].split()[0]
        assert (workdir / name).read_text() == expected, line
        assert result.layer is Layer.AGENT or line.startswith("read")


async def test_a_failing_pipe_writes_nothing_and_bash_read_is_untouched(
    router: BashRouter, workdir: Path
) -> None:
    (workdir / "keep.txt").write_text("precious\n")
    failed = await router.route("cat missing-file | write keep.txt")
    assert failed.exit_code != 0 and "not written" in failed.text
    assert (workdir / "keep.txt").read_text() == "precious\n"
    # Only `write <path>` as the last stage is ours; bash's `read` in a loop stays bash's.
    looped = await router.route("printf 'a\\nb\\n' | while read line; do echo \"<$line>\"; done")
    assert looped.stdout == "<a>\n<b>\n"


async def test_ansi_c_quoting_reaches_built_ins(router: BashRouter, workdir: Path) -> None:
    result = await router.route("write t.txt $'one\\ntwo\\t\\'q\\''")
    assert result.exit_code == 0, result.text
    assert (workdir / "t.txt").read_text() == "one\ntwo\t'q'"


async def test_a_timeout_hint_does_not_name_shell_syntax(
    shell: ShellSession, settings: Settings
) -> None:
    quick = Settings(synapse_home=settings.synapse_home, command_timeout=0.5)
    router = BashRouter(shell, quick)
    result = await router.route("for i in 1 2 3; do sleep 5; done")
    assert result.category is FailureCategory.TIMEOUT
    assert "for --help" not in result.text
    assert "background" in result.text
    syntax = await router.route("for i in 1; do false; done")
    assert "for --help" not in syntax.text


# ------------------------------------------------------------------ big lines


async def test_a_line_over_the_limit_gets_a_clear_error(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    small = Settings(synapse_home=settings.synapse_home, max_command_bytes=100_000)
    router = BashRouter(shell, small)
    result = await router.route("write big.txt '" + "x" * 200_000 + "'")
    assert result.exit_code == 2 and result.category is FailureCategory.INVALID_USAGE
    assert "over the 100,000-byte limit" in result.text and "maxCommandBytes" in result.text
    assert not (workdir / "big.txt").exists()


async def test_a_2mb_line_is_routed_and_the_loop_stays_responsive(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """A 2 MB `write` through the gate (which scans every part) completes, and a
    ticker on the same loop keeps ticking (the scanning is linear and off the loop)."""
    asker = Recorder(DENY)
    router = _gated(shell, settings, workdir, "ask-writes-outside-workspace", asker)
    content = "word 'quoted' \"dq\" $x ; | && " * 70_000
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    result = await asyncio.wait_for(router.route(f"write big.txt {cmdline.quote(content)}"), 60)
    stop.set()
    await task
    assert result.exit_code == 0, result.text[:300]
    assert (workdir / "big.txt").read_text() == content
    assert asker.questions == []
    assert ticks >= 1


def test_scanning_is_linear_in_the_line() -> None:
    """Not a timing test: count the work instead. Splitting a line twice as long must
    not take more than ~2× the regex steps; we check the result is right for a 1 MB
    single word (shlex took 16 s on that) and that a 4 MB line is handled at all."""
    word = "a" * 1_000_000
    started = time.process_time()
    assert cmdline.split_argv(f"write f {word}") == ["write", "f", word]
    assert cmdline.first_word(word) == word
    assert not cmdline.has_redirection(word)
    assert len(simple_commands("x; " * 300_000)) == 300_000
    assert time.process_time() - started < 60  # "did not hang", not a speed figure


async def test_the_models_own_piped_call_is_asked_in_an_lsp_chat(tmp_path: Path) -> None:
    """The same bypass as the model's tool call in a real LSP chat: asked, denied, not run."""
    from synapse_lsp.agent.scripted_api import FakeAnthropic
    from tests.lsp_client import editor

    proj, out = tmp_path / "proj", tmp_path / "outside"
    proj.mkdir()
    out.mkdir()
    (proj / "a.txt").write_text("a\n")
    (out / "victim.txt").write_text("keep me\n")
    line = f"read a.txt | rm -f {out}/victim.txt"
    async with FakeAnthropic([]) as api:
        api.add({"commands": [line]}, "Done.")
        env = {"ANTHROPIC_API_KEY": "sk-ant-fake", "ANTHROPIC_BASE_URL": api.base_url}
        options = {"permission": "ask-all-native"}
        async with editor(tmp_path / "home", [proj], env=env, init_options=options) as ed:
            ed.answer = DENY
            created = await ed.command("synapse.session.new", {})
            sid = created["sessionId"]
            await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
            assert len(ed.asks) == 1 and line in ed.asks[0].message
    assert (out / "victim.txt").read_text() == "keep me\n"


async def test_a_question_and_a_title_show_escapes_not_what_a_terminal_draws(
    shell: ShellSession, settings: Settings, workdir: Path, outside: Path
) -> None:
    """Issue 28 item 5: the REPL's question printed the command's raw escape sequences,
    so a terminal could show `echo harmless` for a line that does more."""
    from synapse_lsp.summaries.titles import summarize

    asker = Recorder(None)
    router = _gated(shell, settings, workdir, "ask-all-native", asker)
    raw = f"touch {outside}/x;\x1b[2K\x1b[1A\r echo harmless"
    await router.route(raw)
    question = asker.questions[0]
    assert "\x1b" not in question and "\r" not in question
    assert "\\x1b[2K\\x1b[1A\\r" in question and f"touch {outside}/x" in question
    title = summarize("rm -r d;\x1b[2K\r echo hi").title
    assert "\x1b" not in title and "\\x1b[2K" in title, title


async def test_a_huge_lines_rules_are_matched_off_the_event_loop(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """Issue 28 item 9: a 4 MB heredoc (40,000 body lines, each matched against the
    remembered rules) blocked the event loop ~4 s: the editor's other requests waited.
    The rules of a line over 64 KiB are matched in a worker thread."""
    import threading

    from synapse_lsp.policy import rules as permission_rules
    from synapse_lsp.policy import run_rules

    threads: set[int] = set()

    class WatchedRules:
        def __init__(self, inner: permission_rules.Rules) -> None:
            self.inner = inner
            self.closed = inner.closed

        def decide_line(self, commands: Any) -> Any:
            threads.add(threading.get_ident())
            return self.inner.decide_line(commands)

        def outside_line(self, commands: Any) -> Any:
            threads.add(threading.get_ident())
            return self.inner.outside_line(commands)

        def why_denied(self, prefix: str) -> str:
            return self.inner.why_denied(prefix)

    class Watched(run_rules.RuleFile):
        def load(self, root: Path) -> Any:
            return WatchedRules(super().load(root))

    live = replace(settings, permission="auto")
    gate = AskingGate(
        live, workdir, Recorder(), sandboxed=lambda: shell.sandbox.sandboxed,
        view=lambda: shell.view, rules=Watched(settings.synapse_home),
    )  # fmt: skip
    router = BashRouter(shell, live, permission=gate)
    line = "cat > f.txt <<'EOF'\n" + ("x" * 99 + "\n") * 40000 + "EOF"
    result = await router.route(line)
    assert result.exit_code == 0 and (workdir / "f.txt").stat().st_size == 4_000_000
    assert threads and threading.get_ident() not in threads
