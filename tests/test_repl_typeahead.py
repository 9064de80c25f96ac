"""Slash commands and lines typed while a turn runs (issue 14, item 3): lines typed
during a turn are queued as the next prompt and shown as queued; `/exit` typed then is
honoured at once; slash commands are case-insensitive with /h, /? and /q; a bare `!`
prints its usage."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.fake_api import FakeApiProcess
from tests.test_repl import finish, home_env, spawn
from tests.test_repl_bang import PtyChat


def test_lines_typed_during_a_turn_are_queued_and_exit_is_at_once(
    tmp_path: Path, workdir: Path
) -> None:
    script: list[Any] = [
        {"text": "first answer", "delay": 2},
        {"text": "second answer"},
        {"text": "never finished", "delay": 30},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        chat = PtyChat(home_env(tmp_path / "home", api.env()), workdir, no_color=True)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("one\r")
            at = chat.wait_for("one\r\n", at)
            time.sleep(0.3)
            chat.type("two\r")  # while the model is still thinking
            at = chat.wait_for("(queued: two)", at)
            at = chat.wait_for("first answer", at)
            at = chat.wait_for("You (2)> two", at)  # sent as the next prompt
            at = chat.wait_for("second answer", at)
            at = chat.wait_for("You (3)> ", at)
            chat.type("three\r")
            at = chat.wait_for("three\r\n", at)
            time.sleep(0.5)
            started = time.monotonic()
            chat.type("/EXIT\r")  # during the turn: honoured now, not after 30 s
            assert chat.wait_exit() == 0
            assert time.monotonic() - started < 15
        finally:
            chat.close()
        bodies = api.message_bodies()
    assert "(turn cancelled)" in chat.out
    assert [b["messages"][-1]["content"][-1]["text"] for b in bodies] == ["one", "two", "three"]


def test_slash_aliases_and_a_bare_bang(tmp_path: Path, workdir: Path) -> None:
    with FakeApiProcess([], tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        proc = finish(spawn([], env, workdir, stdin="!\n/?\n/HeLp\n/Q\n"))
        assert api.message_bodies() == []
    assert proc.returncode == 0, proc.stderr
    assert "Usage: !<command>" in proc.stdout
    assert proc.stdout.count("/resume ID") == 2  # /? and /HeLp both list the commands
    assert "You (1)> " in proc.stdout and "You (2)> " not in proc.stdout


def test_after_ctrl_c_a_line_typed_meanwhile_waits_for_enter(tmp_path: Path, workdir: Path) -> None:
    """Issue 31 item 3: Ctrl-C during the agent's command with a line typed meanwhile
    cancels the command; the line is not sent on its own (it would repeat the cancelled
    work) but waits at the next prompt, typed and editable, until Enter sends it."""
    script: list[Any] = [
        {"commands": ["echo started; sleep 60; touch marker"]},
        {"text": "after the edit"},
    ]
    with FakeApiProcess(script, tmp_path / "api") as api:
        chat = PtyChat(home_env(tmp_path / "home", api.env()), workdir, no_color=True)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("one\r")
            at = chat.wait_for("started", at)  # the command runs
            chat.type("two\r")
            at = chat.wait_for("(queued: two)", at)
            chat.type("\x03")  # Ctrl-C
            at = chat.wait_for("(turn cancelled)", at)
            at = chat.wait_for("You (2)> two", at)  # shown at the prompt, not sent
            assert len(api.message_bodies()) == 1
            chat.type(" more\r")  # edited, then Enter
            at = chat.wait_for("after the edit", at)
            at = chat.wait_for("You (3)> ", at)
            chat.type("/exit\r")
            assert chat.wait_exit() == 0
        finally:
            chat.close()
        bodies = api.message_bodies()
    texts = [b["messages"][-1]["content"][-1].get("text") for b in bodies]
    assert texts == ["one", "two more"]
    assert not (workdir / "marker").exists()
