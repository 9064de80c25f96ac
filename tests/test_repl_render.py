"""What `synapse chat` shows (issue 14, item 2): each command's title and command line,
the first and last N lines of its output dimmed, exit status and duration, a separator
between turns, width-aware wrapping, no ANSI through a pipe or with NO_COLOR; `You (N)>`
counts only prompts sent to the model. Golden transcripts through a pipe and a PTY."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synapse_lsp import sandbox
from synapse_lsp.config import Settings
from tests.fake_api import FakeApiProcess
from tests.test_repl import finish, home_env, spawn
from tests.test_repl_bang import PtyChat

SCRIPT: list[Any] = [
    {"text": "Let me look.", "commands": ["seq 1 12"]},
    {"commands": ["ls no-such-file"]},
    {"commands": ["echo one; echo a-rather-long-argument-that-goes-past-the-width and more"]},
    {"text": "All done."},
    {"text": "second answer"},
]

PIPE_GOLDEN = """\
Synapse chat \u2014 session SID. /help for help.
Sandbox: MODE
You (1)> show me
Let me look.
\u25b8 Run `seq 1 12`
  \u2502 1
  \u2502 2
  \u2502 \u2026 8 more lines \u2026
  \u2502 11
  \u2502 12
  \u2713 exit 0 \u00b7 T
\u25b8 List no-such-file
  $ ls no-such-file
  \u2502 ls: cannot access 'no-such-file': No such file or dire\u2026
  \u2717 exit 2 \u00b7 T
\u25b8 Run `echo one; echo
  a-rather-long-argument-that-goes-past-the-wi\u2026`
  $ echo one; echo
    a-rather-long-argument-that-goes-past-the-width and
    more
  \u2502 one
  \u2502 a-rather-long-argument-that-goes-past-the-width and mo\u2026
  \u2713 exit 0 \u00b7 T
All done.
RULE
You (2)> !echo hi
hi
You (2)> again
second answer
RULE
You (3)>\x20
""".replace("RULE", "\u2500" * 59)


def normalise(text: str) -> str:
    """Session id and durations vary; a terminal's CR LF and readline's bracketed-paste
    switches are not ours."""
    text = text.replace("\r\n", "\n").replace("\x1b[?2004h", "").replace("\x1b[?2004l", "")
    text = re.sub(r"session \S+\. ", "session SID. ", text)
    return re.sub(r"\d+(?:\.\d)?s\b", "T", text)


def test_golden_transcript_through_a_pipe(tmp_path: Path, workdir: Path) -> None:
    with FakeApiProcess(SCRIPT, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env(COLUMNS="60"))
        env.pop("NO_COLOR", None)
        proc = finish(
            spawn(["--output-lines", "2"], env, workdir, stdin="show me\n!echo hi\nagain\n")
        )
    assert proc.returncode == 0, proc.stderr
    # The mode the session runs in is the one this test leg gives (the default:
    # workspace-write with bubblewrap), said as the sandbox itself describes it.
    mode = sandbox.status(Settings(synapse_home=tmp_path / "home")).describe()
    assert normalise(proc.stdout) == PIPE_GOLDEN.replace("MODE", mode)
    assert "\x1b" not in proc.stdout  # no ANSI: stdout is not a terminal


def _pty_transcript(tmp_path: Path, workdir: Path, *, no_color: bool) -> str:
    with FakeApiProcess(SCRIPT, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        chat = PtyChat(env, workdir, ["--output-lines", "2"], columns=60, no_color=no_color)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("show me\r")
            at = chat.wait_for("You (2)> ", at)
            chat.type("!echo hi\r")
            at = chat.wait_for("You (2)> ", at)
            chat.type("again\r")
            at = chat.wait_for("You (3)> ", at)
            chat.type("/exit\r")
            assert chat.wait_exit() == 0
        finally:
            chat.close()
    return normalise(chat.out)


DIM, BOLD, GREEN, RED, OFF = "\x1b[2m", "\x1b[1m", "\x1b[32m", "\x1b[31m", "\x1b[0m"


def test_golden_transcript_through_a_pty(tmp_path: Path, workdir: Path) -> None:
    """On a terminal: the title bold, the command line and output dimmed, the status
    coloured; the typed lines are echoed by the terminal."""
    out = _pty_transcript(tmp_path, workdir, no_color=False)
    rule = DIM + "\u2500" * 59 + OFF
    expected = [
        "You (1)> show me",
        "Let me look.",
        f"{BOLD}\u25b8 Run `seq 1 12`{OFF}",
        f"{DIM}  \u2502 1{OFF}",
        f"{DIM}  \u2502 2{OFF}",
        f"{DIM}  \u2502 \u2026 8 more lines \u2026{OFF}",
        f"{DIM}  \u2502 11{OFF}",
        f"{DIM}  \u2502 12{OFF}",
        f"  {GREEN}\u2713{OFF} exit 0{DIM} \u00b7 T{OFF}",
        f"{BOLD}\u25b8 List no-such-file{OFF}",
        f"{DIM}  $ ls no-such-file{OFF}",
        f"{DIM}  \u2502 ls: cannot access 'no-such-file': No such file or dire\u2026{OFF}",
        f"  {RED}\u2717 exit 2{OFF}{DIM} \u00b7 T{OFF}",
        f"{BOLD}\u25b8 Run `echo one; echo{OFF}",
        f"{BOLD}  a-rather-long-argument-that-goes-past-the-wi\u2026`{OFF}",
        f"{DIM}  $ echo one; echo{OFF}",
        f"{DIM}    a-rather-long-argument-that-goes-past-the-width and{OFF}",
        f"{DIM}    more{OFF}",
        f"{DIM}  \u2502 one{OFF}",
        f"{DIM}  \u2502 a-rather-long-argument-that-goes-past-the-width and mo\u2026{OFF}",
        f"  {GREEN}\u2713{OFF} exit 0{DIM} \u00b7 T{OFF}",
        "All done.",
        rule,
        "You (2)> !echo hi",
        "hi",
        "You (2)> again",
        "second answer",
        rule,
        "You (3)> /exit",
    ]
    lines = out.split("\n")
    start = lines.index("You (1)> show me")
    assert lines[start : start + len(expected)] == expected


def test_no_ansi_with_no_color_on_a_terminal(tmp_path: Path, workdir: Path) -> None:
    out = _pty_transcript(tmp_path, workdir, no_color=True)
    assert "\x1b[" not in out, repr(out)
    assert "\u25b8 Run `seq 1 12`" in out and "\u2713 exit 0" in out


def test_an_empty_answer_shows_no_answer(tmp_path: Path, workdir: Path) -> None:
    """A turn the model ends with no text at all says so, instead of an empty reply."""
    script: list[Any] = [{"commands": ["true"]}, {"content": []}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env(COLUMNS="60"))
        proc = finish(spawn([], env, workdir, stdin="go\n"))
    assert proc.returncode == 0, proc.stderr
    assert "(no answer)" in proc.stdout
