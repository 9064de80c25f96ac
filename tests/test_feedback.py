"""agent/feedback.py: which problems are new, what the user changed, the note taken once."""

from __future__ import annotations

from pathlib import Path

from synapse_lsp.agent.feedback import MAX_PROBLEMS, EditorFeedback, Problem
from synapse_lsp.events import FileDiff


def err(message: str, line: int = 0, severity: str = "error") -> Problem:
    return Problem(line=line, severity=severity, message=message, source="ts", code="2322")


def test_only_new_errors_and_warnings_are_noted_once(tmp_path: Path) -> None:
    fb = EditorFeedback(enabled=lambda: True, root=tmp_path)
    path = tmp_path / "a.ts"
    fb.edited([FileDiff(str(path), "let a = 1\n", "let a: string = 1\n")])
    # No `before` and nothing known yet for a file that existed: all count as new.
    assert fb.diagnostics(path, [err("old"), err("hint", severity="hint")]) == 1
    assert fb.take() is not None and fb.take() is None
    # Next report: what was known (even on another line) is not new; a fixed one is gone.
    assert fb.diagnostics(path, [err("old", line=4), err("fresh", line=2)]) == 1
    note = fb.take()
    assert note is not None and "- a.ts:3: error: fresh [ts 2322]" in note and "old" not in note


def test_the_latest_report_wins_and_long_lists_are_cut(tmp_path: Path) -> None:
    fb = EditorFeedback(enabled=lambda: True, root=tmp_path)
    path = tmp_path / "new.json"
    fb.edited([FileDiff(str(path), None, "{")])
    fb.diagnostics(path, [err(f"e{i}", line=i) for i in range(MAX_PROBLEMS + 3)])
    fb.diagnostics(path, [err(f"e{i}", line=i) for i in range(MAX_PROBLEMS + 2)], before=[])
    note = fb.take()
    assert note is not None and note.count("\n- new.json:") == MAX_PROBLEMS
    assert "- … and 2 more" in note


def test_untouched_files_and_the_setting_off_give_nothing(tmp_path: Path) -> None:
    on = [True]
    fb = EditorFeedback(enabled=lambda: on[0], root=tmp_path)
    assert fb.diagnostics(tmp_path / "x.py", [err("boom")]) == 0
    fb.edited([FileDiff(str(tmp_path / "x.py"), "a\n", "b\n")])
    on[0] = False
    assert fb.diagnostics(tmp_path / "x.py", [err("boom")]) == 0
    assert not fb.user_changed(tmp_path / "x.py", "c\n")
    assert fb.take() is None


def test_user_changes_outside_tool_calls_with_a_diff(tmp_path: Path) -> None:
    running = [False]
    fb = EditorFeedback(enabled=lambda: True, root=tmp_path, tool_running=lambda: running[0])
    path = tmp_path / "m.py"
    fb.edited([FileDiff(str(path), "a\n", "a\nb\n")])
    running[0] = True  # the agent's own command reloading the buffer: not the user
    assert not fb.user_changed(path, "a\nb\nsed\n")
    running[0] = False
    assert not fb.user_changed(path, "a\nb\n")  # back to what the agent left: nothing
    assert fb.user_changed(path, "a\nB\n")
    note = fb.take()
    assert note is not None and "The user changed m.py" in note and "+B" in note
    assert fb.take() is None
    # An agent edit after a user change makes it moot (the edit matched what it read).
    assert fb.user_changed(path, "a\nB\nc\n")
    fb.edited([FileDiff(str(path), "a\nB\nc\n", "z\n")])
    assert fb.take() is None
