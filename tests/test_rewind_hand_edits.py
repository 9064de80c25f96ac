"""Issue 31 item 4: a rewind puts back only what the agent changed. A hand edit made
during a turn (another editor while the model is asked, a buffer typed in while the
agent's command runs) is a conflict, never silently reverted; the agent's own
commands, built-ins and hooks are put back unasked; a background job the agent
started that writes between its commands counts as someone else (a safe conflict).

The "user" acts at a named stage of the turn (agent/stages.py): while the model is
asked (`request`: the agent's work is done until it answers), or while the agent's
command runs (the command waits for a file the test creates)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from synapse_lsp.agent import hand_edits, stages
from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.checkpoints import Checkpoint, fingerprints, folder_events
from synapse_lsp.config import Settings
from synapse_lsp.events import Event
from synapse_lsp.router import BashRouter
from tests.lsp_client import editor
from tests.test_folder_events import inotify_instances
from tests.test_hooks import Env, hooks_of
from tests.test_hooks import env as env  # noqa: F401  (the fixture)
from tests.test_server_chat import fake_env, new_session

KEY = "sk-ant-hand-edits-test-key"
GUARD = 60.0  # seconds: a hang guard only, never what a test measures


@pytest.fixture(autouse=True, params=["events", "walks", "thread-walks", "snapshots"])
def probes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test four ways: the kernel's events (inotify, the default), and what stands
    in for them where they cannot be had: stat walks of a small folder (on the event
    loop, these folders being tiny), the same walks in a thread (as in a folder of more
    than `INLINE_WALK` entries), and snapshots of a folder too large to walk (here:
    any)."""
    if request.param != "events":
        monkeypatch.setattr(hand_edits, "EVENTS", False)
    if request.param == "snapshots":
        monkeypatch.setattr(fingerprints, "STAT_ENTRIES", -1)
    if request.param == "thread-walks":
        monkeypatch.setattr(hand_edits, "INLINE_WALK", -1)
    return "walks" if request.param == "thread-walks" else str(request.param)


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings, workdir: Path
) -> AsyncIterator[Callable[..., ChatSession]]:
    opened: list[Any] = []

    def factory(**changes: Any) -> ChatSession:
        model = ModelClient(api_key=KEY, base_url=api.base_url, model="fake-model")
        session = ChatSession(
            router, dataclasses.replace(settings, **changes), model=model, workspace_root=workdir
        )
        opened.extend([session, model])
        return session

    yield factory
    for thing in reversed(opened):
        await thing.close()


@pytest.fixture
def at_request() -> Iterator[Callable[[int, Callable[[], Awaitable[None] | None]], None]]:
    """`at_request(n, act)`: `act` runs while the model is asked the n-th time (a top
    level request: the agent's work is done until the model answers)."""
    acts: dict[int, Callable[[], Awaitable[None] | None]] = {}
    seen = [0]

    async def hook(stage: str, detail: str | None) -> None:
        if stage != "request" or detail is not None:
            return
        seen[0] += 1
        act = acts.get(seen[0])
        if act is not None:
            done = act()
            if done is not None:
                await done

    def install(n: int, act: Callable[[], Awaitable[None] | None]) -> None:
        acts[n] = act
        stages.set_hook(hook)

    yield install
    stages.set_hook(None)


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


async def edited_meanwhile(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    commands: list[str],
    edits: dict[int, str],
) -> tuple[ChatSession, Checkpoint]:
    """One turn running `commands` (one per model reply) while the user writes each file
    of `edits` (model request number -> file) as the model is asked; the session and
    the turn's record."""
    api.add(*({"commands": [command]} for command in commands), {"text": "ok"})
    for number, name in edits.items():
        at_request(number, write(workdir / name, f"the user's {name}\n"))
    session = make()
    await turn(session, "go")
    (record,) = session.checkpoints.kept()
    return session, record


def write(path: Path, text: str) -> Callable[[], None]:
    def act() -> None:
        path.write_text(text)

    return act


async def test_a_hand_edit_while_the_model_is_asked_is_a_conflict_not_reverted(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    probes: str,
) -> None:
    for name in ("a", "b", "c", "d"):
        (workdir / f"{name}.txt").write_text(f"{name}0\n")
    api.add(
        {"commands": ["echo a1 > a.txt"]},
        {"commands": ["echo c1 > c.txt"]},
        {"text": "done"},
    )
    # In another editor, while the model is asked the second time (between the
    # agent's two commands) and the third (its last answer, after its last command).
    at_request(2, write(workdir / "b.txt", "the user's b\n"))
    at_request(3, write(workdir / "d.txt", "the user's d\n"))
    session = make()
    await turn(session, "change a and c")
    (record,) = session.checkpoints.kept()
    assert sorted(p for _, p in record.changed) == ["a.txt", "b.txt", "c.txt", "d.txt"]
    assert record.foreign == ["b.txt", "d.txt"]
    asked: list[str] = []

    async def keep(path: str) -> bool:
        asked.append(path)
        return False

    report = await session.rewind(1, decide=keep)
    assert sorted(report.restored) == ["a.txt", "c.txt"]  # the agent's: unasked
    assert asked == ["b.txt", "d.txt"] and report.skipped == ["b.txt", "d.txt"]
    assert (workdir / "a.txt").read_text() == "a0\n" and (workdir / "c.txt").read_text() == "c0\n"
    assert (workdir / "b.txt").read_text() == "the user's b\n"
    assert (workdir / "d.txt").read_text() == "the user's d\n"
    assert "changed by you or another program" in report.text()
    if probes == "events":  # the kernel's events told them apart, not a walk
        assert session.checkpoints.guard._since == "ended"


async def test_a_folder_that_grows_too_large_to_walk_while_the_model_is_asked(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    monkeypatch: pytest.MonkeyPatch,
    probes: str,
) -> None:
    """The wait began with a walk; by its end the folder is past the walk's limit (the
    user unpacked files meanwhile): no change of that wait is taken for the agent's.
    What changed since the turn began is asked about, the agent's own first change too
    (the safe side)."""
    monkeypatch.setattr(fingerprints, "STAT_ENTRIES", -1 if probes == "snapshots" else 4)
    (workdir / "a.txt").write_text("a0\n")

    def unpack() -> None:
        for i in range(6):
            (workdir / f"u{i}.txt").write_text(f"user {i}\n")

    api.add({"commands": ["echo a1 > a.txt"]}, {"commands": ["echo b1 > b.txt"]}, {"text": "ok"})
    at_request(2, unpack)
    session = make()
    await turn(session, "go")
    (record,) = session.checkpoints.kept()
    assert {f"u{i}.txt" for i in range(6)} <= set(record.foreign)
    assert "b.txt" not in record.foreign  # made after the wait: the agent's
    report = await session.rewind(1)
    assert {f"u{i}.txt" for i in range(6)} <= set(report.skipped)
    assert (workdir / "u0.txt").read_text() == "user 0\n"  # never silently removed
    assert not (workdir / "b.txt").exists()


async def test_a_tiny_folder_that_grows_past_the_inline_walk_while_the_model_is_asked(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    probes: str,
) -> None:
    """A folder walked on the event loop (tiny) that grows past the inline walk's cap
    while the model is asked is walked whole (in a thread): every file the user added
    is someone else's, and the agent's next change stays the agent's."""
    (workdir / "a.txt").write_text("a0\n")
    many = hand_edits.INLINE_WALK * 4 + 20

    def unpack() -> None:
        for i in range(many):
            (workdir / f"u{i}.txt").write_text(f"user {i}\n")

    api.add(
        {"commands": ["echo a1 > a.txt"]},
        {"commands": ["echo a2 > a.txt"]},
        {"commands": ["echo b1 > b.txt"]},
        {"text": "ok"},
    )
    at_request(3, unpack)  # the walks of the second wait were inline: 1-2 entries
    session = make()
    await turn(session, "go")
    (record,) = session.checkpoints.kept()
    assert {f"u{i}.txt" for i in range(many)} <= set(record.foreign)
    assert "b.txt" not in record.foreign and "a.txt" not in record.foreign
    if probes == "walks":  # still watched by walks: the inline cap is not the walk's limit
        assert session.checkpoints.guard._entries == many + 2


async def test_events_that_cannot_tell_count_everything_since_the_turn_began(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    monkeypatch: pytest.MonkeyPatch,
    probes: str,
) -> None:
    """The kernel's queue overflowed (or a folder moved) while the model was asked: no
    change of that wait is taken for the agent's; what changed since the turn began is
    asked about, the agent's own first change too (the safe side)."""
    if probes != "events":
        pytest.skip("the kernel's events only")
    (workdir / "a.txt").write_text("a0\n")
    reads = [0]
    real = folder_events.FolderEvents.changes

    def changes(self: folder_events.FolderEvents) -> set[str] | None:
        reads[0] += 1
        found = real(self)
        return None if reads[0] == 2 else found  # the wait's end cannot tell

    monkeypatch.setattr(folder_events.FolderEvents, "changes", changes)
    commands = ["echo a1 > a.txt", "echo c1 > c.txt"]
    _, record = await edited_meanwhile(make, api, workdir, at_request, commands, {2: "b.txt"})
    assert {"a.txt", "b.txt"} <= set(record.foreign)
    assert "c.txt" not in record.foreign  # made after the wait: the agent's


async def test_a_watch_that_breaks_mid_turn_turns_to_walks(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    monkeypatch: pytest.MonkeyPatch,
    probes: str,
) -> None:
    """A new folder that cannot be watched (a limit reached) while the model is asked:
    that wait goes to the safe side, and the turn's next waits are walked."""
    if probes != "events":
        pytest.skip("the kernel's events only")
    (workdir / "a.txt").write_text("a0\n")
    reads = [0]
    real = folder_events.FolderEvents._changes

    def changes(self: folder_events.FolderEvents) -> set[str] | None:
        reads[0] += 1
        if reads[0] == 2:
            raise OSError(28, "No space left on device (max_user_watches)")
        return real(self)

    monkeypatch.setattr(folder_events.FolderEvents, "_changes", changes)
    commands = ["echo a1 > a.txt", "echo c1 > c.txt", "echo e1 > e.txt"]
    edits = {2: "b.txt", 3: "d.txt"}
    session, record = await edited_meanwhile(make, api, workdir, at_request, commands, edits)
    assert {"a.txt", "b.txt", "d.txt"} <= set(record.foreign)  # a.txt: the safe side
    assert "c.txt" not in record.foreign and "e.txt" not in record.foreign
    assert session.checkpoints.guard._no_events  # walked after the break


async def test_the_turns_watch_ends_with_the_turn_and_the_session(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    probes: str,
) -> None:
    """One inotify instance per running turn at most: none left after the turn, or
    after a session whose turn was cancelled while the model was asked."""
    before = inotify_instances()
    api.add({"commands": ["echo a1 > a.txt"]}, {"text": "ok"})
    session = make()
    await turn(session, "go")
    assert await instances_become(before)
    api.add({"commands": ["echo a2 > a.txt"]}, {"text": "never", "hang_after": 1})
    events = session.run_turn("again")
    async for event in events:
        if type(event).__name__ == "ToolCallFinished":
            break
    await asyncio.sleep(0.3)  # the model is asked: the wait's watch is open
    assert inotify_instances() == before + (1 if probes == "events" else 0)
    session.cancel()
    async for _ in events:
        pass
    await session.close()
    assert await instances_become(before)


async def instances_become(count: int) -> bool:
    """Whether this process holds `count` inotify instances within 4 s (a turn's end
    closes its watch in a thread: the kernel's grace period)."""
    for _ in range(200):
        if inotify_instances() == count:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_folder_inotify_cannot_watch_is_walked(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
    monkeypatch: pytest.MonkeyPatch,
    probes: str,
) -> None:
    if probes != "events":
        pytest.skip("the kernel's events only")
    monkeypatch.setattr(folder_events, "MAX_FOLDERS", 0)  # as when a limit is reached
    commands = ["echo a1 > a.txt", "echo c1 > c.txt"]
    session, record = await edited_meanwhile(make, api, workdir, at_request, commands, {2: "b.txt"})
    assert record.foreign == ["b.txt"]
    assert session.checkpoints.guard._no_events and isinstance(
        session.checkpoints.guard._since, dict
    )


async def test_a_file_both_edited_is_asked_about_and_restored_only_when_told(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], None]], None],
) -> None:
    """The user edits a file while the model is asked, then the agent edits it too: a
    rewind cannot put the agent's change back without the user's, so it asks."""
    (workdir / "a.txt").write_text("one\n")
    api.add({"commands": ["echo x"]}, {"commands": ["echo agent >> a.txt"]}, {"text": "ok"})
    at_request(2, write(workdir / "a.txt", "one\nthe user's line\n"))
    session = make()
    await turn(session, "go")
    asked: list[str] = []

    async def overwrite(path: str) -> bool:
        asked.append(path)
        return True

    report = await session.rewind(1, decide=overwrite)
    assert asked == ["a.txt"] and report.overwritten == ["a.txt"] and report.restored == []
    assert (workdir / "a.txt").read_text() == "one\n"


async def test_a_background_job_writing_between_commands_counts_as_someone_else(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    at_request: Callable[[int, Callable[[], Awaitable[None]]], None],
) -> None:
    """Documented: the agent's own background job (`cmd &`) that writes while the
    model is asked is taken for someone else's write, a safe conflict (asked, or
    skipped), never silently reverted."""
    job = "(while [ ! -e go ]; do sleep 0.01; done; echo job > bg.txt) >/dev/null 2>&1 &"
    api.add({"commands": [job]}, {"commands": ["echo a > a.txt"]}, {"text": "ok"})

    async def job_writes() -> None:
        (workdir / "go").write_text("")
        for _ in range(int(GUARD / 0.01)):
            if (workdir / "bg.txt").exists():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("hang guard: the background job did not write")

    at_request(2, job_writes)
    session = make()
    await turn(session, "start a job")
    report = await session.rewind(1)
    # (`go` is the test's own write while the model was asked: someone else's too)
    assert report.skipped == ["bg.txt", "go"] and report.deleted == ["a.txt"]
    assert (workdir / "bg.txt").read_text() == "job\n"


async def test_stop_and_post_tool_use_hooks_changes_are_the_agents(
    env: Env, at_request: Callable[[int, Callable[[], None]], None]
) -> None:
    """A Stop hook runs after the model's last answer (while nothing of the agent's
    runs otherwise): what it writes is the agent's, put back unasked, as is what a
    PostToolUse hook writes."""
    hooks = {
        **hooks_of("Stop", "echo stopped >> stop.txt"),
        **hooks_of("PostToolUse", "echo posted >> post.txt", "Bash"),
    }
    (env.work / "stop.txt").write_text("before\n")
    env.api.add({"commands": ["echo x > x.txt"]}, {"text": "ok"})
    session = await env.session({"hooks": hooks}, trusted=True)
    at_request(2, write(env.work / "mine.txt", "the user's\n"))
    await turn(session, "go")
    assert (env.work / "stop.txt").read_text() == "before\nstopped\n"
    report = await session.rewind(1)
    assert sorted(report.restored) == ["stop.txt"]
    assert sorted(report.deleted) == ["post.txt", "x.txt"]
    assert report.skipped == ["mine.txt"]
    assert (env.work / "stop.txt").read_text() == "before\n"


# ------------------------------------------------------------------ the editor


async def test_typing_in_a_buffer_while_the_agents_command_runs_is_the_users(
    tmp_path: Path, api: FakeAnthropic
) -> None:
    """didChange of an open document while the agent's own command runs (the folder's
    probes cannot tell that time apart): the user's, a conflict for a rewind; the
    agent's edit of another open buffer, echoed by the editor, stays the agent's. The
    server offers didSave (`textDocumentSync.save`) for saved buffers alike."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "typed.txt").write_text("one\n")
    (proj / "edited.txt").write_text("old\n")
    wait = "touch started; while [ ! -e go ]; do sleep 0.01; done"
    api.add({"commands": ["edit edited.txt old new", wait]}, {"text": "done"})
    async with editor(tmp_path / "home", [proj], env=fake_env(api)) as ed:
        assert ed.init_result is not None
        sync = ed.init_result.capabilities.text_document_sync
        assert isinstance(sync, types.TextDocumentSyncOptions) and sync.save
        typed = ed.open(proj / "typed.txt")
        ed.open(proj / "edited.txt")
        sid = await new_session(ed, proj)
        prompt = asyncio.ensure_future(
            ed.command("synapse.session.prompt", {"sessionId": sid, "text": "go"})
        )
        for _ in range(int(GUARD / 0.01)):
            if (proj / "started").exists():
                break
            assert not prompt.done(), prompt.result()
            await asyncio.sleep(0.01)
        ed.type_text(typed, "the user's typing\n")  # unsaved, while the command runs
        await ed.command("synapse.status")  # the server has read the didChange
        (proj / "go").write_text("")
        assert (await asyncio.wait_for(prompt, GUARD))["stopReason"] == "end_turn"
        for _ in range(int(GUARD / 0.02)):
            listed = await ed.command("synapse.session.checkpoints", {"sessionId": sid})
            if listed["checkpoints"] and listed["checkpoints"][0]["finished"]:
                break
            await asyncio.sleep(0.02)
        report = await ed.command(
            "synapse.session.rewind", {"sessionId": sid, "turn": 1, "onConflict": "skip"}
        )
        assert report["skipped"] == ["typed.txt"], report
        assert report["restored"] == ["edited.txt"], report
        assert ed.docs[typed].text.endswith("the user's typing\n")
