"""Issue 31 item 6: a rewind under stress. Two rewinds of one session at once (one
wins, the other is refused clearly and changes nothing), a rewind while a turn runs
(refused, in-process and over LSP), the server killed (SIGKILL) in the middle of a
rewind (a journal was written first, each file is replaced by rename, never
half-written, and the next start finishes the rewind, telling what it did), and a
rewind after `/compact`.

Real git, real bash, the fake Messages API; the LSP cases run `synapse lsp` as a
process. The crash stops the server at a named stage (`rewind_write`, before the
second file: agent/stages.py) and kills it there, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.checkpoints import CheckpointError, journal, store_dir
from synapse_lsp.config import Settings
from synapse_lsp.errors import SessionBusyError, SynapseError
from synapse_lsp.events import Event
from synapse_lsp.router import BashRouter
from tests.lsp_client import Editor, editor
from tests.test_server_chat import fake_env, new_session

KEY = "sk-ant-rewind-faults-key"
GUARD = 60.0  # seconds: a hang guard only, never what a test measures
WAIT = "touch started; while [ ! -e go ]; do sleep 0.01; done"


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings, workdir: Path
) -> AsyncIterator[Callable[..., ChatSession]]:
    opened: list[Any] = []

    def factory(store: ChatStore | None = None, session_id: str | None = None) -> ChatSession:
        model = ModelClient(api_key=KEY, base_url=api.base_url, model="fake-model")
        if session_id is not None and store is not None:
            session = ChatSession.resume(
                store, session_id, router, settings, model=model, workspace_root=workdir
            )
        else:
            session = ChatSession(
                router, dataclasses.replace(settings), model=model, store=store,
                workspace_root=workdir,
            )  # fmt: skip
        opened.extend([session, model])
        return session

    yield factory
    for thing in reversed(opened):
        await thing.close()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(int(GUARD / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"hang guard: {what}")


def contents(folder: Path, *names: str) -> dict[str, str | None]:
    return {n: (folder / n).read_text() if (folder / n).exists() else None for n in names}


# ------------------------------------------------------------ two at once


async def test_two_rewinds_of_one_session_at_once_one_wins_the_other_changes_nothing(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path, settings: Settings
) -> None:
    """Two clients of one session (the VS Code picker and a `/rewind` typed meanwhile):
    the second is refused while the first asks about a conflict; only the first one's
    result happens, whole. A second process with the session open (read-only there)
    is refused too, and one whose rewind of the session is running (its journal lock
    held) refuses a third."""
    for name in ("a", "b"):
        (workdir / f"{name}.txt").write_text(f"{name}0\n")
    api.add({"commands": ["echo a1 > a.txt; echo b1 > b.txt"]}, {"text": "ok"})
    store = ChatStore(settings.synapse_home / "sessions")
    session = make(store)
    await turn(session, "change both")
    (workdir / "b.txt").write_text("the user's b\n")  # a conflict: the first one asks
    asking = asyncio.Event()
    answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    async def decide(path: str) -> bool:
        asking.set()
        return await answer

    first = asyncio.ensure_future(session.rewind(1, decide=decide))
    await asyncio.wait_for(asking.wait(), GUARD)
    with pytest.raises(SessionBusyError, match="Another rewind of this session is running"):
        await session.rewind(1)
    assert contents(workdir, "a.txt", "b.txt") == {"a.txt": "a1\n", "b.txt": "the user's b\n"}
    # Another process (a second store is one) has the session read-only: refused.
    other_store = ChatStore(settings.synapse_home / "sessions")
    other = make(other_store, session.id)
    assert other.read_only
    with pytest.raises(SynapseError, match="read-only"):
        await other.rewind(1)
    answer.set_result(False)  # keep the user's b.txt
    report = await asyncio.wait_for(first, GUARD)
    assert report.restored == ["a.txt"] and report.skipped == ["b.txt"] and report.truncated
    assert contents(workdir, "a.txt", "b.txt") == {"a.txt": "a0\n", "b.txt": "the user's b\n"}
    assert not journal.journal_path(store_dir(settings.synapse_home, workdir), session.id).exists()
    other_store.close()

    # A rewind of the session running in another process holds its journal's lock.
    api.add({"commands": ["echo a2 > a.txt"]}, {"text": "ok"})
    await turn(session, "again")
    git_dir = store_dir(settings.synapse_home, workdir)
    with journal.locked(git_dir, session.id) as mine:
        assert mine
        with pytest.raises(CheckpointError, match="already running"):
            await session.rewind(1)
    assert (workdir / "a.txt").read_text() == "a2\n" and len(session.checkpoints.kept()) == 1
    store.close()


# ------------------------------------------------------------ during a turn


async def test_a_rewind_while_a_turn_runs_is_refused_in_process(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("a0\n")
    api.add({"commands": ["echo a1 > a.txt"]}, {"text": "ok"})
    api.add({"commands": ["echo a2 > a.txt", WAIT]}, {"text": "ok"})
    session = make()
    await turn(session, "one")
    running = asyncio.ensure_future(turn(session, "two"))
    await until(lambda: (workdir / "started").exists(), "the command started")
    with pytest.raises(SessionBusyError, match="A turn .* is running"):
        await session.rewind(1)
    assert (workdir / "a.txt").read_text() == "a2\n"  # nothing was put back
    (workdir / "go").write_text("")
    await asyncio.wait_for(running, GUARD)
    report = await session.rewind(1)
    assert report.restored == ["a.txt"] and (workdir / "a.txt").read_text() == "a0\n"


async def test_a_rewind_while_a_turn_runs_is_refused_over_lsp(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("a0\n")
    api.add({"commands": ["echo a1 > a.txt"]}, {"text": "ok"})
    api.add({"commands": ["echo a2 > a.txt", WAIT]}, {"text": "ok"})
    async with editor(tmp_path / "home", [proj], env=fake_env(api)) as ed:
        sid = await new_session(ed, proj)
        await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "one"})
        prompt = asyncio.ensure_future(
            ed.command("synapse.session.prompt", {"sessionId": sid, "text": "two"})
        )
        await until(lambda: (proj / "started").exists(), "the command started")
        with pytest.raises(JsonRpcException) as refused:
            await ed.command("synapse.session.rewind", {"sessionId": sid, "turn": 1})
        assert "A turn is running" in refused.value.message
        assert refused.value.data == {"reason": "session_busy"}
        assert (proj / "a.txt").read_text() == "a2\n"
        (proj / "go").write_text("")
        assert (await asyncio.wait_for(prompt, GUARD))["stopReason"] == "end_turn"
        report = await ed.command(
            "synapse.session.rewind", {"sessionId": sid, "turn": 1, "onConflict": "skip"}
        )
        assert report["restored"] == ["a.txt"] and (proj / "a.txt").read_text() == "a0\n"


# ------------------------------------------------------------ SIGKILL mid-rewind


async def finished_checkpoints(ed: Editor, sid: str) -> list[dict[str, Any]]:
    for _ in range(int(GUARD / 0.02)):
        listed = await ed.command("synapse.session.checkpoints", {"sessionId": sid})
        if listed["checkpoints"] and all(c["finished"] for c in listed["checkpoints"]):
            return list(listed["checkpoints"])
        await asyncio.sleep(0.02)
    raise AssertionError("hang guard: the checkpoint after the turn")


async def test_a_rewind_killed_half_way_is_finished_by_the_next_start(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    proj, home, stages_dir = tmp_path / "proj", tmp_path / "home", tmp_path / "stages"
    proj.mkdir()
    before = {"a.txt": "a0\n", "b.txt": "b0\n", "c.txt": "c0\n"}
    for name, text in before.items():
        (proj / name).write_text(text)
    after = {"a.txt": "a1\n", "b.txt": "b1\n", "c.txt": None, "new.txt": "new\n"}
    api.add(
        {"commands": ["echo a1 > a.txt; echo b1 > b.txt; rm c.txt; echo new > new.txt"]},
        {"text": "changed"},
    )
    names = ("a.txt", "b.txt", "c.txt", "new.txt")
    crash = {"SYNAPSE_TEST_STAGE": "rewind_write@2", "SYNAPSE_TEST_STAGE_DIR": str(stages_dir)}
    async with editor(home, [proj], env={**fake_env(api), **crash}) as ed:
        sid = await new_session(ed, proj)
        await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "change files"})
        await finished_checkpoints(ed, sid)
        assert contents(proj, *names) == after
        inodes = {n: (proj / n).stat().st_ino for n in ("a.txt", "b.txt")}
        rewind = asyncio.ensure_future(
            ed.command("synapse.session.rewind", {"sessionId": sid, "turn": 1})
        )
        reached = stages_dir / "rewind_write.reached"
        await until(reached.exists, "the rewind's second file")
        # The journal was written before any file changed, and names every file.
        path = journal.journal_path(store_dir(home, proj), sid)
        written = json.loads(path.read_text())
        assert [s["path"] for s in written["steps"]] == ["a.txt", "b.txt", "c.txt", "new.txt"]
        assert written["conversation"] == {"messages": 0, "events": 0}
        server = ed.client._server
        assert server is not None
        os.kill(server.pid, signal.SIGKILL)
        await server.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(rewind, GUARD)
    # Killed between two files: each is whole, the old text or the new, none half-written.
    now = contents(proj, *names)
    assert now["a.txt"] == "a0\n"  # put back before the kill
    assert {k: v for k, v in now.items() if k != "a.txt"} == {
        k: v for k, v in after.items() if k != "a.txt"
    }
    assert not list(proj.rglob("*.synapse-tmp"))
    assert path.exists()

    # The next start: loading the session finishes the rewind, and says so.
    async with editor(home, [proj], env=fake_env(api)) as ed:
        await ed.command("synapse.session.load", {"sessionId": sid})
        assert contents(proj, *names) == {**before, "new.txt": None}
        assert not path.exists()
        assert not list(proj.rglob("*.synapse-tmp"))
        # Replaced by rename: new files (inodes) in their places, never written in place.
        assert all((proj / n).stat().st_ino != ino for n, ino in inodes.items())
        replayed = json.dumps([u for u in ed.updates if u["sessionId"] == sid])
        assert "was interrupted" in replayed and "put back now: b.txt, c.txt, new.txt" in replayed
        assert "change files" not in replayed  # the conversation ends before turn 1
        assert (await ed.command("synapse.session.checkpoints", {"sessionId": sid})) == {
            "checkpoints": []
        }
        # The session goes on from there: its next prompt is turn 1 again.
        api.add({"text": "fresh"})
        await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "again"})
        (listed,) = await finished_checkpoints(ed, sid)
        assert listed["turn"] == 1 and listed["prompt"] == "again"


def test_recovery_leaves_a_file_changed_since_and_says_so(tmp_path: Path) -> None:
    """Between the crash and the next start someone edited a file the rewind had not
    reached: it is left as it is, and named."""
    git_dir, root = tmp_path / "store", tmp_path / "work"
    root.mkdir()
    (root / "f.txt").write_text("the agent's\n")
    (root / "g.txt").write_text("the agent's\n")
    steps = [
        journal.Step(name, None, 0, journal.blob_id(b"the agent's\n"), f".{name}.x.synapse-tmp")
        for name in ("f.txt", "g.txt")
    ]
    records = tmp_path / "records"
    records.mkdir()
    (records / "1.json").write_text("{}")
    journal.Journal("s1", 1, str(root), str(records), str(tmp_path / "index"), steps).write(
        journal.journal_path(git_dir, "s1")
    )
    (root / "g.txt").write_text("the user's\n")
    found = journal.recover(git_dir, "s1", owner=True)
    assert found is not None and found.conversation is None
    assert not (root / "f.txt").exists() and (root / "g.txt").read_text() == "the user's\n"
    text = found.text()
    assert "put back now: f.txt" in text
    assert "g.txt: changed since the interrupted rewind; left as it is" in text
    assert not (records / "1.json").exists() and journal.pending(git_dir) == []


def test_another_session_finishes_the_files_and_leaves_the_cut_to_the_owner(
    tmp_path: Path,
) -> None:
    """A session of the same folder finds the journal first (its first snapshot): it
    puts the files back and tells it once; the session's own next start still cuts
    its conversation and tells what was done."""
    git_dir, root = tmp_path / "store", tmp_path / "work"
    root.mkdir()
    (root / "f.txt").write_text("the agent's\n")
    step = journal.Step("f.txt", None, 0, journal.blob_id(b"the agent's\n"), ".f.synapse-tmp")
    path = journal.journal_path(git_dir, "s1")
    cut = {"messages": 2, "events": 3}
    journal.Journal("s1", 2, str(root), str(tmp_path), str(tmp_path / "i"), [step], cut).write(path)
    with journal.locked(git_dir, "s1") as mine:  # the rewind is alive (another process)
        assert mine and journal.recover(git_dir, "s1", owner=False) is None
    assert (root / "f.txt").exists()
    seen = journal.recover(git_dir, "s1", owner=False)
    assert seen is not None and seen.lines == ["put back now: f.txt"]
    assert not (root / "f.txt").exists() and path.exists()
    assert journal.recover(git_dir, "s1", owner=False) is None  # told once
    owner = journal.recover(git_dir, "s1", owner=True)
    assert owner is not None and owner.conversation == cut
    assert owner.lines == ["put back now: f.txt"]
    journal.remove(git_dir, "s1")
    assert journal.pending(git_dir) == []


# ------------------------------------------------------------ after /compact


async def test_a_rewind_after_compact(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path, settings: Settings
) -> None:
    """`/compact` keeps the last turn whole and summarises the others: a rewind of the
    last turn still cuts the conversation there; one of a summarised turn puts the
    files back and keeps the conversation whole (it says so); the turn numbers stay."""
    for n in (1, 2, 3):
        api.add({"commands": [f"echo changed > f{n}.txt"]}, {"text": f"done {n}"})
    store = ChatStore(settings.synapse_home / "sessions")
    session = make(store)
    for n in (1, 2, 3):
        (workdir / f"f{n}.txt").write_text("original\n")
    for n in (1, 2, 3):
        await turn(session, f"change f{n}")
    api.add({"text": "Summary: f1 and f2 were changed."})
    said = await session.compact()
    assert "summarised" in said
    assert [c.turn for c in session.checkpoints.kept()] == [1, 2, 3]

    report = await session.rewind(3)
    assert report.truncated and report.restored == ["f3.txt"]
    assert session.turns == 2
    last = session.messages[-1]
    assert "change f3" not in json.dumps(last) and "done 2" not in json.dumps(session.messages)

    report = await session.rewind(1)
    assert not report.truncated and sorted(report.restored) == ["f1.txt", "f2.txt"]
    assert any("compacted since that turn" in p for p in report.problems)
    assert session.turns == 2  # kept whole: the next prompt is turn 3
    assert all((workdir / f"f{n}.txt").read_text() == "original\n" for n in (1, 2, 3))
    stored = store.load(session.id)
    assert stored.messages == session.messages
    api.add({"text": "ok"})
    await turn(session, "next")
    assert [c.turn for c in session.checkpoints.kept()] == [3]
    store.close()
