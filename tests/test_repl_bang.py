"""`!command` in `synapse chat` runs in the chat session's own shell, through the router,
with the terminal attached (issue 14, item 1); `synapse.shell.run` with a `sessionId`
does the same for editors."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ptyprocess import PtyProcessUnicode  # type: ignore[import-untyped]

from tests.fake_api import FakeApiProcess
from tests.lsp_client import editor
from tests.test_repl import TIMEOUT, finish, home_env, spawn


class PtyChat:
    """`synapse chat` on a pseudo-terminal, as a person runs it."""

    def __init__(
        self,
        env: dict[str, str],
        cwd: Path,
        args: list[str] | None = None,
        *,
        columns: int = 100,
        no_color: bool = False,
    ) -> None:
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "30"}
        env.pop("NO_COLOR", None)
        if no_color:
            env["NO_COLOR"] = "1"
        self.proc = PtyProcessUnicode.spawn(
            [sys.executable, "-m", "synapse_lsp.cli.entry", "chat", *(args or [])],
            cwd=str(cwd),
            env=env,
            dimensions=(30, columns),
        )
        self._chunks: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        while True:
            try:
                self._chunks.append(self.proc.read(4096))
            except (EOFError, OSError):
                return

    @property
    def out(self) -> str:
        return "".join(self._chunks)

    def type(self, text: str) -> None:
        self.proc.write(text)

    def wait_for(self, text: str, after: int = 0, timeout: float = TIMEOUT) -> int:
        """Wait until `text` shows (after offset `after`); its end offset."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.out.find(text, after)
            if at >= 0:
                return at + len(text)
            assert self.proc.isalive(), f"chat exited early:\n{self.out}"
            assert time.monotonic() < deadline, f"never printed {text!r}:\n{self.out}"
            time.sleep(0.02)

    def wait_exit(self) -> int:
        deadline = time.monotonic() + TIMEOUT
        while self.proc.isalive():
            if time.monotonic() > deadline:
                self.proc.kill(9)
                raise AssertionError(f"chat did not exit:\n{self.out}")
            time.sleep(0.05)
        self._reader.join(timeout=5)
        code: int = self.proc.exitstatus if self.proc.exitstatus is not None else -1
        return code

    def close(self) -> None:
        if self.proc.isalive():
            self.proc.kill(9)


def test_bang_runs_in_the_sessions_shell_through_the_router(tmp_path: Path, workdir: Path) -> None:
    """`!cd` and `!export` persist, `!read` is the built-in, a bare `!` shows the usage,
    and the model's next command runs where the user's did; the next prompt tells the
    model briefly what the user ran and how it ended."""
    (workdir / "sub").mkdir()
    (workdir / "sub" / "notes.txt").write_text("alpha line\nbeta line\n")
    script: list[Any] = [{"commands": ["pwd; echo FOO=$FOO"]}, {"text": "done"}]
    with FakeApiProcess(script, tmp_path / "api") as api:
        env = home_env(tmp_path / "home", api.env())
        lines = "!\n!cd sub\n!pwd\n!export FOO=bar\n!echo got $FOO\n!read notes.txt\n"
        lines += "!false\nwhere are we?\n/exit\n"
        proc = finish(spawn([], env, workdir, stdin=lines))
        bodies = api.message_bodies()
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Usage: !<command>" in out
    assert f"{workdir / 'sub'}\n" in out  # `!pwd` after `!cd sub`
    assert "got bar" in out  # `!export` stuck
    assert "alpha line" in out and "read:" not in out  # Synapse's `read`, not bash's
    assert "Command exited with code 1" in out
    assert "You (1)> " in out and "You (2)> " in out and "You (3)> " not in out
    sent = bodies[0]["messages"][0]["content"][-1]["text"]
    assert sent.startswith("where are we?\n\n[Before this message the user ran")
    assert "$ cd sub\n(exit 0)" in sent and "$ false\n(exit 1)]" in sent
    assert "$ export FOO=bar" in sent and len(sent) < 2000
    result = bodies[1]["messages"][2]["content"][0]["content"]
    assert f"{workdir / 'sub'}" in result and "FOO=bar" in result  # the model's command


def test_bang_attaches_the_terminal_for_interactive_programs(tmp_path: Path, workdir: Path) -> None:
    """On a terminal, `!python3 …` reads the keyboard through the session's terminal (it
    is a tty there) and the REPL gets its terminal back afterwards; `!cd` persists."""
    (workdir / "sub").mkdir()
    script: list[Any] = [{"text": "ok"}]
    program = (
        "import sys; print('tty', sys.stdin.isatty(), sys.stdout.isatty()); "
        "print('hello', input('name? '))"
    )
    with FakeApiProcess(script, tmp_path / "api") as api:
        chat = PtyChat(home_env(tmp_path / "home", api.env()), workdir)
        try:
            at = chat.wait_for("You (1)> ")
            chat.type("!cd sub\r")
            at = chat.wait_for("You (1)> ", at)
            chat.type(f"!python3 -c {json.dumps(program)}\r")
            at = chat.wait_for("tty True True", at)  # stdin and stdout are a terminal
            at = chat.wait_for("name? ", at)
            chat.type("bob\r")
            at = chat.wait_for("hello bob", at)
            at = chat.wait_for("You (1)> ", at)
            chat.type("!pwd\r")
            at = chat.wait_for(str(workdir / "sub"), at)
            at = chat.wait_for("You (1)> ", at)
            chat.type("hi\r")  # the terminal is back in line mode: the REPL reads a line
            at = chat.wait_for("ok", at)
            chat.type("/exit\r")
            assert chat.wait_exit() == 0
        finally:
            chat.close()
        sent = api.message_bodies()[0]["messages"][0]["content"][-1]["text"]
    assert sent.startswith("hi\n\n[Before this message")
    assert "$ python3 -c" in sent and "$ pwd\n(exit 0" in sent


async def test_shell_run_with_a_session_id_runs_in_that_sessions_shell(
    tmp_path: Path, workdir: Path
) -> None:
    """`synapse.shell.run` with `sessionId`: the chat session's shell (cd persists there
    and only there), built-ins included."""
    (workdir / "sub").mkdir()
    (workdir / "sub" / "f.txt").write_text("inside\n")
    async with editor(tmp_path / "home", [workdir]) as ed:
        created = await ed.command("synapse.session.new", {"workspaceUri": workdir.as_uri()})
        sid = created["sessionId"]
        moved = await ed.command("synapse.shell.run", {"sessionId": sid, "command": "cd sub"})
        assert moved["exitCode"] == 0
        here = await ed.command("synapse.shell.run", {"sessionId": sid, "command": "pwd"})
        assert here["stdout"].strip() == str(workdir / "sub")
        read = await ed.command(
            "synapse.shell.run", {"sessionId": sid, "command": "read f.txt", "timeout": 30}
        )
        assert "inside" in read["stdout"] and read["layer"] == "agent"
        folder = await ed.command(
            "synapse.shell.run", {"workspaceUri": workdir.as_uri(), "command": "pwd"}
        )
        assert folder["stdout"].strip() == str(workdir)  # the folder's shell did not move
