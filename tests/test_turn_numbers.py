"""Issue 31 item 7: one turn numbering everywhere. The REPL's `You (N)>` is the turn
the prompt starts, the number `/checkpoints` and `/rewind N` use (and the editors'
pickers, from `synapse.session.checkpoints`); `--resume` goes on with the stored
count and shows a recap; a rewound turn's number is used again; labels are the
user's own words, never the note about their `!` commands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synapse_lsp.agent.turn_numbers import count_turns, label
from synapse_lsp.events import UserMessage
from tests.fake_api import FakeApiProcess
from tests.test_repl import finish, home_env, spawn


def test_labels_are_the_users_words_on_one_line() -> None:
    note = "\n\n[Before this message the user ran these commands themselves in this ...]"
    assert label("fix the tests" + note) == "fix the tests"
    assert label("first line\n  second   line") == "first line second line"
    assert label("x" * 100, 10) == "x" * 9 + "\u2026"
    sub = UserMessage("a sub-agent's prompt", parent_tool_call_id="call-1")
    assert count_turns([UserMessage("one"), sub, UserMessage("two")]) == 2


def test_the_repl_counts_turns_as_checkpoints_do_across_resume_and_rewind(
    tmp_path: Path, workdir: Path
) -> None:
    script: list[Any] = [
        {"commands": ["echo 1 > one.txt"]},
        "first done",
        {"commands": ["echo 2 > two.txt"]},
        "second done",
        {"commands": ["echo 3 > three.txt"]},
        "third done",
        "fourth done",
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        lines = "make one\n!echo from the user\nmake two\n/checkpoints\n/exit\n"
        first = finish(spawn([], env, workdir, stdin=lines))
        assert first.returncode == 0, first.stderr
        out = first.stdout
        assert "You (1)> make one" in out and "You (2)> !echo" in out
        assert "You (2)> make two" in out and "You (3)> /checkpoints" in out
        assert '  turn 1  "make one": +one.txt' in out
        assert '  turn 2  "make two": +two.txt' in out  # not the `!` note
        assert "[Before this message" not in out
        sid = re.search(r"session (\S+)\. /help", out)
        assert sid is not None

        lines = "/checkpoints\nmake three\n/rewind 3\nmake four\n/checkpoints\n/exit\n"
        again = finish(spawn(["--resume", sid.group(1)], env, workdir, stdin=lines))
        assert again.returncode == 0, again.stderr
        out = again.stdout
        # The recap: how many turns, the last exchange, what was used.
        assert "2 turns so far; your next prompt is turn 3." in out
        assert "You: make two" in out and "Synapse: second done" in out
        assert "So far:" in out and "2 commands run." in out
        assert "You (3)> /checkpoints" in out and "You (3)> make three" in out
        assert "You (4)> /rewind 3" in out
        assert "You (3)> make four" in out  # the rewound turn's number, again
        assert not (workdir / "three.txt").exists()
        listing = out.rsplit("/checkpoints", 1)[1]
        assert '  turn 1  "make one"' in listing and '  turn 3  "make four"' in listing
        assert "make three" not in listing
