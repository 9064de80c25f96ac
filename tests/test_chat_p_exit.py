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


async def test_chat_p_answers_and_ends_its_shell_beside_the_after_snapshot(
    tmp_path: Path,
) -> None:
    home, work, bin_dir = tmp_path / "home", tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    (work / "notes.txt").write_text("x\n")
    log = tmp_path / "status.log"
    git = shutil.which("git")
    assert git is not None
    wrapper = bin_dir / "git"  # every `git status` of the checkpoints takes a second more
    wrapper.write_text(SLOW_STATUS.format(log=log, git=git))
    wrapper.chmod(0o755)
    api = FakeAnthropic([{"commands": ["echo ran-it"]}, {"text": "Done."}])
    await api.start()
    env = dict(os.environ, SYNAPSE_HOME=str(home), ANTHROPIC_API_KEY=FAKE_KEY)
    env.update(ANTHROPIC_BASE_URL=api.base_url, PATH=f"{bin_dir}:{env['PATH']}")
    env.pop("SYNAPSE_SANDBOX", None)  # what a user gets
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", "run it",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, env=env, cwd=work,
        )  # fmt: skip
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
    stamps = log.read_text().split()
    starts, ends = [float(t) for t in stamps[1::4]], [float(t) for t in stamps[3::4]]
    assert len(starts) == len(ends) >= 2, stamps
    after_end = ends[-1]  # the turn's "after" snapshot, the last `git status`
    assert answered < after_end, "the answer waited for the after-snapshot"
    assert bash_seen and bash_gone, "the agent's bash was never seen to start and end"
    assert bash_gone[0] < after_end, "the shell's end waited for the after-snapshot"
    # The session's close waited for the snapshot: the turn's record has its "after".
    [record] = [p for p in home.rglob("1.json") if p.parent.name == "checkpoints"]
    assert json.loads(record.read_text()).get("after"), record.read_text()
