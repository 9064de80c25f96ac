"""Fault drill, issue 28 item 7: the permission gate judges the real parse of a line
(`bashparse`, tree-sitter-bash), not a guess. A quoted `>` is text and a quoted
`$(…)` a file name; what bash really redirects or substitutes is still judged; a
line the parser cannot read is asked about, never silently allowed; and reading
stays linear on huge and hostile lines."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from synapse_lsp import bashparse
from synapse_lsp.commands import Layer, Step
from synapse_lsp.config import Settings
from synapse_lsp.policy.gate import ALLOW_ONCE, DENY, AskingGate
from synapse_lsp.question import Question
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


class Recorder:
    """Answers every question with `answer` and keeps the questions."""

    def __init__(self, answer: str | None = DENY) -> None:
        self.answer = answer
        self.questions: list[tuple[str, tuple[str, ...]]] = []

    async def __call__(self, question: Question) -> str | None:
        message, actions = question.message, question.actions
        self.questions.append((message, actions))
        return self.answer


def _gate(
    tmp_path: Path,
    asker: Recorder,
    policy: str = "ask-writes-outside-workspace",
    *,
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
) -> AskingGate:
    settings = Settings(synapse_home=tmp_path / "home", permission=policy, allow=allow, deny=deny)
    return AskingGate(settings, tmp_path / "ws", asker)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


# ------------------------------------------------------------ what is only text

NOT_ASKED = [
    # the two cases (already right since the scanner learnt quotes; kept)
    "echo 'hello > /etc/passwd'",
    "cat '$(touch PWNED).txt'",
    "rm '$(touch PWNED).txt'",
    # a quoted heredoc body is data, not commands (the scanner read its lines as commands)
    "cat <<'EOF' > notes.md\nrm -rf /etc/x\necho hi > /etc/passwd\nEOF",
    # a comment is not a command (the scanner cut the line at its `;`)
    "echo hi # ; rm -rf /etc/x",
    "echo hi # > /etc/passwd",
    # `2>&1`, an fd or /dev/null are no file
    "make 2>&1 | tail -5",
    "echo x >&2",
    "echo x 2>/dev/null",
]


@pytest.mark.parametrize("line", NOT_ASKED)
async def test_text_that_only_looks_like_a_write_is_not_asked(
    tmp_path: Path, ws: Path, line: str
) -> None:
    (ws / "$(touch PWNED).txt").write_text("literal name\n")
    asker = Recorder()
    assert await _gate(tmp_path, asker).check(line, Layer.NATIVE, ws) is None, line
    assert asker.questions == []


# ------------------------------------------------------------ what bash really does

ASKED = {
    "echo x > /etc/passwd": "/etc/passwd",
    'echo "a" >/tmp/../etc/x': "/tmp/../etc/x",
    "echo x >| /etc/passwd": "/etc/passwd",  # noclobber's override: missed by the scanner
    "echo x &> /etc/passwd": "/etc/passwd",
    "echo x &>> /etc/passwd": "/etc/passwd",
    "echo x 1>/etc/passwd": "/etc/passwd",
    "exec 3>/etc/passwd": "/etc/passwd",
    "echo x >& /etc/passwd": "/etc/passwd",
    "[ x > /etc/passwd ]": "/etc/passwd",  # `[` is a command: `>` redirects
    "cat <<EOF > /etc/passwd\nhi\nEOF": "/etc/passwd",
    "cat <<EOF\n$(rm -f /etc/passwd)\nEOF": "/etc/passwd",  # an unquoted body runs it
    "python - <<EOF && rm /etc/passwd\nprint(1)\nEOF": "/etc/passwd",
    "cat $(rm -f /etc/passwd)": "/etc/passwd",
    'echo "$(echo x > /etc/passwd)"': "/etc/passwd",
    "tee >(cat > /etc/passwd)": "/etc/passwd",
    "(cd /etc && touch passwd) > out.txt": "/etc/passwd",
    "rm {/etc/passwd,x}": "{/etc/passwd,x}",  # brace expansion: missed by the scanner
}


@pytest.mark.parametrize("line", list(ASKED))
async def test_real_redirections_and_substitutions_are_still_judged(
    tmp_path: Path, ws: Path, line: str
) -> None:
    asker = Recorder()
    reason = await _gate(tmp_path, asker).check(line, Layer.NATIVE, ws)
    assert reason == "denied by the user", line
    assert "writes outside the workspace" in asker.questions[0][0]
    assert ASKED[line] in asker.questions[0][0]


async def test_a_substitution_is_judged_as_a_command_of_its_own(tmp_path: Path, ws: Path) -> None:
    """`cat $(echo /etc/shadow)`: the deny rules see `echo /etc/shadow`, and an allow
    glob for `cat *` does not vouch for what the substitution runs."""
    asker = Recorder()
    gate = _gate(tmp_path, asker, "ask-all-native", allow=("cat *",), deny=("echo *",))
    denied = await gate.check("cat $(echo /etc/shadow)", Layer.NATIVE, ws)
    assert denied is not None and "`deny` setting" in denied
    gate = _gate(tmp_path, asker, "ask-all-native", allow=("cat *",))
    assert await gate.check("cat notes.txt", Layer.NATIVE, ws) is None
    assert await gate.check("cat $(echo /etc/shadow)", Layer.NATIVE, ws) == "denied by the user"
    assert await gate.check("cat '$(echo /etc/shadow)'", Layer.NATIVE, ws) is None  # a name


# ------------------------------------------------------------ what cannot be read

UNREADABLE = [
    "echo x <> /etc/passwd",  # tree-sitter-bash cannot read `<>`; the scanner missed it
    "echo 'unclosed > /etc/passwd",
    "cat <<EOF\n`touch /etc/x`\nEOF",  # a backtick in an unquoted heredoc runs
    "echo " + "$(" * 40 + "x" + ")" * 40,  # nested deeper than the walk reads
]


@pytest.mark.parametrize("line", UNREADABLE)
async def test_a_line_the_parser_cannot_read_is_asked_not_allowed(
    tmp_path: Path, ws: Path, line: str
) -> None:
    asker = Recorder()
    gate = _gate(tmp_path, asker, allow=("echo*", "cat*"))
    assert await gate.check(line, Layer.NATIVE, ws) == "denied by the user"
    message, actions = asker.questions[0]
    assert "cannot be read reliably" in message
    assert not any(a.startswith("Always") for a in actions)  # no rule for a guess
    # in `auto` nothing is asked (documented): the sandbox still confines the line
    assert await _gate(tmp_path, Recorder(), "auto").check(line, Layer.NATIVE, ws) is None


async def test_an_allow_glob_does_not_vouch_for_an_unreadable_line(
    tmp_path: Path, ws: Path
) -> None:
    """The scanner's `_is_plain` saw no redirection in `echo 'x` and let `echo*` allow it."""
    asker = Recorder(ALLOW_ONCE)
    gate = _gate(tmp_path, asker, "ask-all-native", allow=("echo*",))
    assert await gate.check("echo hi", Layer.NATIVE, ws) is None
    assert asker.questions == []
    assert await gate.check("echo 'x", Layer.NATIVE, ws) is None  # allowed once, asked
    assert len(asker.questions) == 1


# ------------------------------------------------------------ linear time


def _timed(line: str) -> tuple[float, bashparse.Parsed]:
    bashparse.clear_cache()
    started = time.perf_counter()
    parsed = bashparse.parse(line)
    return time.perf_counter() - started, parsed


def test_hostile_lines_are_read_in_linear_time() -> None:
    """The scanner re-read each `$(` level (quadratic: 100 KB of nesting took ~8 min);
    tree-sitter-bash's error recovery after a long pipeline is quadratic too (80 KB:
    16 s, 3 GB). Both are now bounded: the walk stops at a nesting depth, a parse has
    a time budget, and a line of many `|` operators goes to the scanner."""
    nested = "echo " + "$(" * 50_000 + "x" + ")" * 50_000
    broken = "a | " * 50_000 + ")"
    for line in (nested, broken, "cat x | " * 30_000 + "cat", "(;;" * 50_000):
        took, parsed = _timed(line)
        budget = bashparse.BUDGET_BASE + bashparse.BUDGET_PER_CHAR * len(line)
        assert took < 5 * budget + 2, (line[:20], took)
        assert parsed.problem is not None  # read by the scanner: judged conservatively


async def test_a_hostile_line_through_the_gate_is_asked_quickly(tmp_path: Path, ws: Path) -> None:
    asker = Recorder()
    gate = _gate(tmp_path, asker)
    line = "echo " + "$(" * 30_000 + "rm /etc/x" + ")" * 30_000
    started = time.perf_counter()
    assert await gate.check(line, Layer.NATIVE, ws) == "denied by the user"
    assert time.perf_counter() - started < 20
    assert "cannot be read reliably" in asker.questions[0][0]


# ------------------------------------------------------------ the router's plan


async def test_the_plan_splits_where_bash_does(router: BashRouter) -> None:
    """A `;` in a comment or a heredoc body is no operator: nothing after it becomes a
    built-in step (the scanner cut `echo a # ; read x` and ran `read x` itself)."""
    line = "echo a # ; read x"
    assert await router._plan(line, Layer.NATIVE) == [Step(line, Layer.NATIVE)]
    line = "cd /tmp; read notes.txt"
    assert await router._plan(line, Layer.NATIVE) == [
        Step("cd /tmp", Layer.NATIVE),
        Step("read notes.txt", Layer.AGENT),
    ]
    line = "read a.txt | grep 'x|y;z'"
    assert [s.text for s in await router._plan(line, Layer.AGENT)] == ["read a.txt", "grep 'x|y;z'"]
    line = "write f 'a && b' && read f # ; rm x"
    assert [s.text for s in await router._plan(line, Layer.AGENT)] == [
        "write f 'a && b'",
        "read f # ; rm x",
    ]


async def test_quoted_redirections_run_as_bash_reads_them(
    shell: ShellSession, settings: Settings, workdir: Path
) -> None:
    """End to end, default policy: nothing asked, and bash does what the gate read."""
    (workdir / "$(touch PWNED).txt").write_text("literal\n")
    asker = Recorder()
    gate = AskingGate(Settings(synapse_home=settings.synapse_home), workdir, asker)
    router = BashRouter(shell, settings, permission=gate)
    said = await router.route("echo 'hello > /etc/passwd'")
    assert said.exit_code == 0 and said.stdout == "hello > /etc/passwd\n"
    read = await router.route("cat '$(touch PWNED).txt'")
    assert read.exit_code == 0 and read.stdout == "literal\n"
    assert not (workdir / "PWNED").exists()
    assert asker.questions == []


async def test_a_line_bash_cannot_parse_is_its_syntax_error_not_a_question(
    tmp_path: Path,
) -> None:
    """A native line tree-sitter cannot read and `bash -n` rejects is reported as bash's
    own syntax error (exit 2, nothing run, nobody asked); one bash reads is asked."""
    from synapse_lsp.commands import FailureCategory
    from synapse_lsp.policy.gate import AskingGate

    asked: list[str] = []

    async def ask(question: Question) -> str | None:
        asked.append(question.message)
        return None

    settings = Settings(synapse_home=tmp_path / "home", sandbox="full-access")
    shell = ShellSession(tmp_path, settings)
    router = BashRouter(shell, settings, permission=AskingGate(settings, tmp_path, ask))
    try:
        for line in ('echo "unclosed > /tmp/x', "if then fi; touch made"):
            result = await router.route(line)
            assert result.exit_code == 2, result.text
            assert result.category is FailureCategory.INVALID_USAGE
            assert "syntax error" in result.text or "unexpected EOF" in result.text
            assert "bash cannot parse this line" in result.text
        assert asked == [] and not (tmp_path / "made").exists()
    finally:
        await shell.close()
