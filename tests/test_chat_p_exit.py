"""`chat -p`'s end (issue 34 item 4): its one turn's answer and the shell's end do not
wait for the turn's "after" snapshot; the session's close does, and the snapshot lands."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.fake_api import FAKE_KEY
from tests.test_first_request import descendant_names

SLOW_STATUS = """#!/bin/sh
if [ "$1" = status ]; then
  echo "start $(date +%s.%N)" >> {log}
  sleep 1
  {git} "$@"; code=$?
  echo "end $(date +%s.%N)" >> {log}
  exit $code
fi
exec {git} "$@"
"""


def _slow_status(tmp_path: Path) -> tuple[Path, Path]:
    """A folder on PATH whose `git` takes a second more for each `status` (the
    checkpoints' snapshots), logging when each began and ended: (the folder, the log)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "status.log"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    wrapper = bin_dir / "git"
    wrapper.write_text(SLOW_STATUS.format(log=log, git=git))
    wrapper.chmod(0o755)
    return bin_dir, log


async def _chat_p(
    prompt: str, home: Path, work: Path, bin_dir: Path, api_url: str
) -> asyncio.subprocess.Process:
    """`synapse chat -p PROMPT` started in `work`, as a user gets it (the default
    sandbox), with the slow `git` of `bin_dir` first on PATH."""
    env = dict(os.environ, SYNAPSE_HOME=str(home), ANTHROPIC_API_KEY=FAKE_KEY)
    env.update(ANTHROPIC_BASE_URL=api_url, PATH=f"{bin_dir}:{env['PATH']}")
    env.pop("SYNAPSE_SANDBOX", None)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", prompt,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, env=env, cwd=work,
    )  # fmt: skip


def _status_ends(log: Path) -> list[float]:
    stamps = log.read_text().split()
    starts, ends = [float(t) for t in stamps[1::4]], [float(t) for t in stamps[3::4]]
    assert len(starts) == len(ends) >= 2, stamps
    return ends


async def test_chat_p_answers_and_ends_its_shell_beside_the_after_snapshot(
    tmp_path: Path,
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("x\n")
    bin_dir, log = _slow_status(tmp_path)
    api = FakeAnthropic([{"commands": ["echo ran-it"]}, {"text": "Done."}])
    await api.start()
    try:
        proc = await _chat_p("run it", home, work, bin_dir, api.base_url)
        bash_seen: list[float] = []
        bash_gone: list[float] = []

        async def watch() -> None:  # when the agent's bash comes and goes
            while proc.returncode is None:
                alive = "bash" in descendant_names(proc.pid)
                if alive and not bash_seen:
                    bash_seen.append(time.time())
                if not alive and bash_seen and not bash_gone:
                    bash_gone.append(time.time())
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        assert proc.stdout is not None and proc.stderr is not None
        answer = await asyncio.wait_for(proc.stdout.readline(), 60)
        answered = time.time()
        err = await asyncio.wait_for(proc.stderr.read(), 60)
        assert await proc.wait() == 0, err.decode()
        await watcher
    finally:
        await api.close()
    assert answer == b"Done.\n"
    after_end = _status_ends(log)[-1]  # the turn's "after" snapshot, the last `git status`
    assert answered < after_end, "the answer waited for the after-snapshot"
    assert bash_seen and bash_gone, "the agent's bash was never seen to start and end"
    assert bash_gone[0] < after_end, "the shell's end waited for the after-snapshot"
    # The session's close waited for the snapshot: the turn's record has its "after".
    [record] = [p for p in home.rglob("1.json") if p.parent.name == "checkpoints"]
    assert json.loads(record.read_text()).get("after"), record.read_text()


async def test_chat_p_session_end_hooks_run_once_the_after_snapshot_is_taken(
    tmp_path: Path,
) -> None:
    """What a SessionEnd hook changes is not the turn's: the snapshot of what the turn
    left is taken before the hooks run, though the turn's end no longer waits for it."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    bin_dir, log = _slow_status(tmp_path)
    began = tmp_path / "hook-began-at"
    hook = {"type": "command", "command": f"cat >/dev/null; date +%s.%N > {began}"}
    (home / "settings.json").write_text(json.dumps({"hooks": {"SessionEnd": [{"hooks": [hook]}]}}))
    api = FakeAnthropic([{"text": "Done."}])
    await api.start()
    try:
        proc = await _chat_p("hi", home, work, bin_dir, api.base_url)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await api.close()
    assert proc.returncode == 0, err.decode()
    assert out == b"Done.\n"
    assert float(began.read_text()) > _status_ends(log)[-1]
