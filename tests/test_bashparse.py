"""The one parse of a command line (`bashparse`): its operators, simple commands,
words, redirections and substitutions as bash reads them, tree-sitter-bash's
misreadings repaired, and the scanner's conservative reading of what it cannot parse."""

from __future__ import annotations

import pytest

from synapse_lsp import bashparse, cmdline
from synapse_lsp.summaries.shell_words import parse_bash


def _commands(line: str) -> list[tuple[str, list[tuple[str, bool]], list[tuple[str, str, str]]]]:
    parsed = bashparse.parse(line)
    assert parsed.problem is None, parsed.problem
    return [
        (
            c.text,
            [(w.value, w.literal) for w in c.words],
            [(r.fd, r.op, r.target.value if r.target else "") for r in c.redirects],
        )
        for c in parsed.commands
    ]


def test_top_level_operators_skip_quotes_comments_heredocs_and_groups() -> None:
    line = "a 'x;y' && b \"|\" | c # d; e\n(f; g) & cat <<'EOF' && h\n1;2\nEOF\ni"
    ops = [op for _, op in bashparse.parse(line).operators]
    assert ops == ["&&", "|", "\n", "&", "&&", "\n"]
    parts = cmdline.split_all(line)
    assert "".join(t + (op or "") for t, op in parts) == line  # the pieces tile the line
    assert [t.strip() for t, _ in parts][-1] == "i"


def test_every_simple_command_with_its_words() -> None:
    found = _commands(
        'if rm x; then echo "$(rm y)" \'$(no)\'; fi; for f in $(ls); do cat ~/"$f"; done'
    )
    assert [text for text, _, _ in found] == [
        "rm x",
        "echo \"$(rm y)\" '$(no)'",
        "rm y",
        "ls",
        'cat ~/"$f"',
    ]
    assert found[1][1] == [("echo", True), ("$(rm y)", False), ("$(no)", True)]
    assert found[4][1] == [("cat", True), ("~/$f", False)]


@pytest.mark.parametrize(
    ("line", "words", "redirects"),
    [
        # tree-sitter puts `x` into the redirection; it is an argument
        ("echo > f x", [("echo", True), ("x", True)], [("", ">", "f")]),
        # the fd of `0<in` and `{fd}>f` (tree-sitter takes them for arguments)
        ("cat 0<in", [("cat", True)], [("0", "<", "in")]),
        ("exec {fd}>f 2>&1", [("exec", True)], [("{fd}", ">", "f"), ("2", ">&", "1")]),
        # `[` is a command: `>` is a redirection, not a comparison
        ("[ a > b ]", [("[", True), ("a", True), ("]", True)], [("", ">", "b")]),
        (
            "e >| f &>> g 3<&- 4>&-",
            [("e", True)],
            [("", ">|", "f"), ("", "&>>", "g"), ("3", "<&-", ""), ("4", ">&-", "")],
        ),
        ("cat <<< 'x > y'", [("cat", True)], [("", "<<<", "x > y")]),
        ("time -p rm x", [("rm", True), ("x", True)], []),
        (
            'rm {a,b} a\\ b $\'c\\td\' "e\\"f"',
            [("rm", True), ("{a,b}", False), ("a b", True), ("c\td", True), ('e"f', True)],
            [],
        ),
    ],
)
def test_repaired_readings(
    line: str, words: list[tuple[str, bool]], redirects: list[tuple[str, str, str]]
) -> None:
    [(_, found_words, found_redirects)] = _commands(line)
    assert found_words == words
    assert found_redirects == redirects


def test_redirections_belong_to_their_command() -> None:
    # tree-sitter hangs `> f` on the list, and swallows `> g && x` into the heredoc
    found = _commands("a && b > f; cat <<EOF > g && x\nbody > h\nEOF")
    assert [(t, r) for t, _, r in found] == [
        ("a", []),
        ("b > f", [("", ">", "f")]),
        ("cat <<EOF > g", [("", "<<", "EOF"), ("", ">", "g")]),
        ("x", []),
    ]
    [group] = [c for c in bashparse.parse("(cd /o && touch x) > f").commands if not c.words]
    assert group.text == "> f"  # a group's own redirection is a command of its own


def test_heredoc_bodies_and_quoting() -> None:
    quoted = bashparse.parse("cat > f <<'EOF'\n$(rm x) | y\nEOF")
    assert [c.text for c in quoted.commands] == ["cat > f <<'EOF'\n$(rm x) | y\nEOF"]
    heredoc = quoted.commands[0].redirects[1]
    assert (heredoc.op, heredoc.quoted, heredoc.heredoc) == ("<<", True, "$(rm x) | y\n")
    bare = bashparse.parse("cat <<EOF\n$(rm x) | y\nEOF")
    assert [c.text for c in bare.commands] == ["cat <<EOF\n$(rm x) | y\nEOF", "rm x"]
    assert [s.script for s in bare.substitutions] == ["rm x"]


def test_character_offsets_with_non_ascii_text() -> None:
    line = "echo 'é…' > ü.txt && ls 🙂"
    parsed = bashparse.parse(line)
    [(index, op)] = parsed.operators
    assert line[index : index + 2] == op == "&&"
    assert [c.text for c in parsed.commands] == ["echo 'é…' > ü.txt", "ls 🙂"]
    assert parsed.commands[0].redirects[0].target == bashparse.Word(12, 17, "ü.txt", "ü.txt", True)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("echo 'x; y", "could not be read"),
        ("echo x <> f", "could not be read"),
        ("cat <<EOF\n`make`\nEOF", "backtick"),
        ("echo " + "$(" * 20 + "x" + ")" * 20, "nested more than"),
        ("a | " * 600 + "b", "`|` operators"),
    ],
)
def test_what_it_cannot_read_has_a_problem_and_the_scanners_reading(line: str, why: str) -> None:
    parsed = bashparse.parse(line)
    assert parsed.problem is not None and why in parsed.problem
    assert parsed.commands  # the scanner's texts, for deny rules and the question
    assert all(not c.words and not c.redirects for c in parsed.commands)  # nothing to trust


def test_the_size_cap_and_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bashparse, "MAX_PARSED_CHARS", 10)
    bashparse.clear_cache()
    parsed = bashparse.parse("echo a && echo b")
    assert parsed.problem is not None and "over 10 characters" in parsed.problem
    assert [c.text for c in parsed.commands] == ["echo a", "echo b"]
    monkeypatch.setattr(bashparse, "MAX_PARSED_CHARS", 1 << 20)
    monkeypatch.setattr(bashparse, "BUDGET_BASE", -1.0)  # no time at all
    line = "echo c && echo d; " * 1000  # long enough for tree-sitter to check the clock
    bashparse.clear_cache()
    parsed = bashparse.parse(line)
    assert parsed.problem is not None and "too long to parse" in parsed.problem
    assert len(parsed.commands) == 2000
    monkeypatch.setattr(bashparse, "BUDGET_BASE", 0.25)
    bashparse.clear_cache()
    assert bashparse.parse(line).problem is None  # the parser is usable again


def test_one_parse_per_line_for_the_gate_the_plan_and_the_summaries() -> None:
    line = "git status && make 2>&1 | tail"
    parsed = bashparse.parse(line)
    assert bashparse.parse(line) is parsed
    assert parse_bash(line) is parsed
    cmdline.simple_commands(line)
    cmdline.split_top_level(line)
    assert bashparse.parse(line) is parsed


def test_cmdline_adapters() -> None:
    assert not cmdline.has_redirection("write f 'a > b' \"<c>\"")
    assert cmdline.has_redirection("read f > out")
    assert cmdline.has_redirection("diff <(a) b")
    assert not cmdline.has_redirection("mcp:a:b $(cat < x)")  # bash's, while expanding
    assert cmdline.substitutions("x \"$(a)\" '$(b)' `c` <(d $(e))") == ["a", "c", "d $(e)"]
    split = cmdline.split_top_level("write f 'x && y' && cat f")
    assert (split.head, split.operator, split.rest) == ("write f 'x && y' ", "&&", " cat f")
