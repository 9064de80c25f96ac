"""Checkpoints end to end: a real chat session with the fake Messages API, real bash and
real git; a turn that edits, writes, runs `sed -i` and `rm` and creates a file is
rewound, the user's own `.git` is never touched, later changes by someone else are
skipped (or overwritten when asked), ignored files are reported or restored."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.agent.store import ChatStore
from synapse_lsp.checkpoints import CheckpointError, Checkpoints, forget_session, store_dir
from synapse_lsp.checkpoints import records as checkpoint_records
from synapse_lsp.config import Settings
from synapse_lsp.errors import SessionBusyError
from synapse_lsp.events import Event, Notice
from synapse_lsp.router import BashRouter
from tests.slash_host import SessionHost

KEY = "sk-ant-checkpoint-test-key"


@pytest.fixture
async def api() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic([]) as server:
        yield server


@pytest.fixture
async def make(
    api: FakeAnthropic, router: BashRouter, settings: Settings, workdir: Path
) -> AsyncIterator[Callable[..., ChatSession]]:
    models: list[ModelClient] = []
    sessions: list[ChatSession] = []

    def factory(*, store: ChatStore | None = None, **changes: Any) -> ChatSession:
        model = ModelClient(
            api_key=KEY, base_url=api.base_url, model="fake-model", retry_base_delay=0.001
        )
        models.append(model)
        session = ChatSession(
            router,
            dataclasses.replace(settings, **changes),
            model=model,
            store=store,
            workspace_root=workdir,
        )
        sessions.append(session)
        return session

    yield factory
    for session in sessions:
        await session.close()
    for model in models:
        await model.close()


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def stored(keeper: Checkpoints, tree: str, name: str) -> str:
    """A file's text as a snapshot's tree keeps it."""
    return subprocess.run(
        ["git", f"--git-dir={keeper.git_dir}", "show", f"{tree}:{name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def tree_digest(folder: Path) -> str:
    """Every byte of a folder (names, modes, contents), to prove it was not touched."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            h.update(path.read_bytes())
        h.update(str(path.stat().st_mode).encode())
    return h.hexdigest()


async def turn(session: ChatSession, text: str) -> list[Event]:
    return [e async for e in session.run_turn(text)]


@pytest.fixture
def repo(workdir: Path) -> Path:
    (workdir / "a.py").write_text("x = 1\ny = 2\n")
    (workdir / "b.txt").write_text("hello\n")
    (workdir / "c.txt").write_text("keep me\n")
    (workdir / "d.txt").write_text("sed target\n")
    (workdir / ".gitignore").write_text(".env\nbig.db\n")
    (workdir / ".env").write_text("TOKEN=old\n")
    git(workdir, "init", "-q")
    git(workdir, "add", "-A")
    git(workdir, "-c", "user.email=u@x", "-c", "user.name=u", "commit", "-qm", "init")
    return workdir


async def test_a_turn_with_builtins_and_bash_is_rewound_and_git_is_untouched(
    make: Callable[..., ChatSession], api: FakeAnthropic, repo: Path, settings: Settings
) -> None:
    api.add(
        {
            "commands": [
                "edit a.py 'y = 2' 'y = 3'",
                "write b.txt 'rewritten\n'",
                "sed -i 's/target/changed/' d.txt",
                "rm c.txt",
                "echo made > new.txt && mkdir -p sub && echo deep > sub/n.txt",
                "echo TOKEN=new > .env",
            ]
        },
        {"text": "done"},
    )
    session = make(store=ChatStore(settings.synapse_home / "sessions"))
    git_before = tree_digest(repo / ".git")
    events = await turn(session, "change things")
    await session.checkpoints.settle()
    assert (repo / "a.py").read_text() == "x = 1\ny = 3\n"
    assert not (repo / "c.txt").exists()
    listing = await SESSION_COMMANDS.run(SessionHost(session), "/checkpoints")
    assert "turn 1" in listing and "+new.txt" in listing and "-c.txt" in listing
    assert "~d.txt" in listing and "!.env" in listing
    kept = session.checkpoints.kept()
    assert [c.turn for c in kept] == [1] and kept[0].after is not None
    assert not any(isinstance(e, Notice) and e.level == "warning" for e in events)

    report = await session.rewind(1)
    assert sorted(report.restored) == [".env", "a.py", "b.txt", "c.txt", "d.txt"]
    assert sorted(report.deleted) == ["new.txt", "sub/n.txt"]
    assert report.skipped == [] and report.truncated
    assert (repo / "a.py").read_text() == "x = 1\ny = 2\n"
    assert (repo / "b.txt").read_text() == "hello\n"
    assert (repo / "c.txt").read_text() == "keep me\n"
    assert (repo / "d.txt").read_text() == "sed target\n"
    assert (repo / ".env").read_text() == "TOKEN=old\n"  # small ignored file: kept whole
    assert not (repo / "new.txt").exists()
    # The user's repository: not one byte changed, and git sees a clean tree.
    assert tree_digest(repo / ".git") == git_before
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / "sub").exists()  # the folder the turn made, left empty, is gone
    # The conversation ends before the turn, and the store keeps that.
    assert session.messages == []
    (notice,) = session.transcript()  # the turn's replay is gone too; the rewind is told
    assert isinstance(notice, Notice) and "before turn 1" in notice.message
    stored = ChatStore(settings.synapse_home / "sessions").load(session.id)
    assert stored.messages == [] and stored.events == [notice]


async def test_a_file_changed_after_the_turn_is_skipped_unless_forced(
    make: Callable[..., ChatSession], api: FakeAnthropic, repo: Path
) -> None:
    api.add({"commands": ["edit a.py 'x = 1' 'x = 10'", "edit b.txt hello bye"]}, {"text": "ok"})
    session = make()
    await turn(session, "edit")
    await session.checkpoints.settle()
    (repo / "a.py").write_text("x = 10\ny = 2\n# the user's own line\n")
    answer = await SESSION_COMMANDS.run(SessionHost(session), "/rewind 1 --keep-chat")
    assert "skipped" in answer and "a.py" in answer and "--force" in answer
    assert (repo / "a.py").read_text().endswith("# the user's own line\n")
    assert (repo / "b.txt").read_text() == "hello\n"
    assert session.messages != []  # --keep-chat


async def test_force_overwrites_and_a_second_session_sees_a_conflict(
    make: Callable[..., ChatSession], api: FakeAnthropic, repo: Path
) -> None:
    api.add({"commands": ["write b.txt 'one\n'"]}, {"text": "ok"})
    session = make()
    await turn(session, "write")
    await session.checkpoints.settle()
    (repo / "b.txt").write_text("another session wrote this\n")
    asked: list[str] = []

    async def decide(path: str) -> bool:
        asked.append(path)
        return True

    report = await session.rewind(1, decide=decide)
    assert asked == ["b.txt"] and report.overwritten == ["b.txt"]
    assert (repo / "b.txt").read_text() == "hello\n"


async def test_works_in_a_folder_that_is_not_a_repository_and_reports_large_files(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path, settings: Settings
) -> None:
    (workdir / "notes.md").write_text("v1\n")
    api.add(
        {"commands": ["echo v2 > notes.md && head -c 9000000 /dev/zero > huge.bin"]},
        {"text": "ok"},
        {"commands": ["echo v3 > notes.md"]},
        {"text": "ok"},
    )
    session = make()
    await turn(session, "one")
    events = await turn(session, "two")
    warnings = [e.message for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any("huge.bin" in w and "Not kept" in w for w in warnings), warnings
    await session.checkpoints.settle()
    assert not (workdir / ".git").exists()
    assert [c.turn for c in session.checkpoints.kept()] == [1, 2]
    report = await session.rewind(2, decide=None)
    assert (workdir / "notes.md").read_text() == "v2\n" and report.restored == ["notes.md"]
    report = await session.rewind(1)
    assert (workdir / "notes.md").read_text() == "v1\n"
    assert report.not_restorable == ["huge.bin"] and (workdir / "huge.bin").exists()
    assert session.checkpoints.kept() == []
    with pytest.raises(CheckpointError, match="no checkpoint before turn 1"):
        await session.rewind(1)
    # The shadow store lives under $SYNAPSE_HOME, not in the folder.
    assert (store_dir(settings.synapse_home, workdir) / "HEAD").exists()


async def test_an_index_change_is_reported_not_undone(
    make: Callable[..., ChatSession], api: FakeAnthropic, repo: Path
) -> None:
    api.add({"commands": ["git mv c.txt moved.txt"]}, {"text": "ok"})
    session = make()
    await turn(session, "move")
    await session.checkpoints.settle()
    report = await session.rewind(1)
    assert report.repository_changed
    assert "git index or HEAD changed" in report.text()
    # The files are back; git's index still records the move (reported, not undone).
    assert (repo / "c.txt").exists() and not (repo / "moved.txt").exists()
    assert "moved.txt" in git(repo, "diff", "--cached", "--name-only")


async def test_the_setting_turns_checkpoints_off(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path, settings: Settings
) -> None:
    api.add({"commands": ["echo x > f.txt"]}, {"text": "ok"})
    session = make(checkpoints=False)
    await turn(session, "go")
    assert session.checkpoints.kept() == []
    # (the sandbox makes the folder empty to hide it; no store is made in it)
    store = settings.synapse_home / "checkpoints"
    assert not store.exists() or not any(store.iterdir())


async def test_snapshots_are_incremental_and_include_unsaved_editor_text(
    tmp_path: Path, workdir: Path
) -> None:
    (workdir / "open.py").write_text("on disk\n")

    class Editor:
        async def document_text(self, path: Path) -> str | None:
            return "unsaved\n" if path.name == "open.py" else None

        async def apply_change(self, path: Path, before: str, after: str) -> None:
            raise AssertionError

        async def write(self, path: Path, text: str) -> None:
            raise AssertionError

        def open_texts(self) -> dict[Path, str]:
            return {workdir / "open.py": "unsaved\n"}

    keeper = Checkpoints(workdir, tmp_path / "home", "s1", tmp_path / "records", files=Editor())
    keeper.begin_turn(1, 0, "p")
    await keeper.settle()
    (commit,) = [c.before for c in keeper.kept()]
    assert stored(keeper, commit, "open.py") == "unsaved\n"


async def test_a_rewind_never_writes_through_a_link_the_turn_made(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path, tmp_path: Path
) -> None:
    """A turn that swaps a folder for a link elsewhere (`ln -s ~/.ssh src`): the rewind
    puts the folder back and writes nothing outside the work tree."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("not the workspace's\n")
    (workdir / "src").mkdir()
    (workdir / "src" / "a.txt").write_text("one\n")
    api.add({"commands": [f"rm -rf src && ln -s {outside} src"]}, {"text": "ok"})
    session = make()
    await turn(session, "swap")
    assert (workdir / "src").is_symlink()
    report = await session.rewind(1)
    assert not (workdir / "src").is_symlink() and (workdir / "src" / "a.txt").read_text() == "one\n"
    assert (outside / "a.txt").read_text() == "not the workspace's\n"
    assert report.deleted == ["src"] and report.restored == ["src/a.txt"]

    # The same, but the link was changed after the turn (a conflict, skipped): the
    # file under it is not restored through the link.
    api.add({"commands": [f"rm -rf src && ln -s {outside} src"]}, {"text": "ok"})
    await turn(session, "swap again")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workdir / "src").unlink()
    (workdir / "src").symlink_to(elsewhere, target_is_directory=True)  # changed since
    second = session.checkpoints.kept()[-1].turn
    report = await session.rewind(second)
    assert report.skipped == ["src"] and report.restored == []
    assert any("leads out" in p for p in report.problems), report.problems
    assert list(elsewhere.iterdir()) == []
    assert (outside / "a.txt").read_text() == "not the workspace's\n"


# ------------------------------------------------------------- hostile folders


async def test_a_snapshot_reads_only_the_folders_own_regular_files(
    make: Callable[..., ChatSession],
    api: FakeAnthropic,
    workdir: Path,
    tmp_path: Path,
    settings: Settings,
) -> None:
    """Names git would decode (`"..\\057x"`), FIFOs, `/dev/zero` and links among the
    ignored files, a FIFO as `.git/HEAD`: the snapshot neither hangs nor keeps a byte
    from outside the folder."""
    secret = tmp_path / "outside-secret"
    secret.write_text("TOKEN=sk-outside-the-folder\n")
    (workdir / ".gitignore").write_text("*.env\n")
    (workdir / '"..\\057outside-secret".env').write_text("x")
    os.mkfifo(workdir / "pipe.env")
    (workdir / "zero.env").symlink_to("/dev/zero")
    (workdir / "link.env").symlink_to(secret)
    (workdir / "small.env").write_text("KEEP=1\n")
    (workdir / ".git").mkdir()
    os.mkfifo(workdir / ".git" / "HEAD")
    api.add({"commands": ["echo KEEP=2 > small.env"]}, {"text": "ok"})
    session = make()
    await turn(session, "go")
    store = store_dir(settings.synapse_home, workdir)
    objects = subprocess.run(
        ["git", f"--git-dir={store}", "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert b"sk-outside-the-folder" not in objects
    assert b"KEEP=1" in objects  # the folder's own small ignored file is kept
    report = await session.rewind(1)
    assert (workdir / "small.env").read_text() == "KEEP=1\n" and "small.env" in report.restored
    assert secret.read_text() == "TOKEN=sk-outside-the-folder\n"


async def test_line_endings_survive_a_rewind_whatever_gitattributes_say(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path
) -> None:
    (workdir / ".gitattributes").write_text("* text=auto eol=lf\n")
    (workdir / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    api.add({"commands": ["printf 'changed\\r\\n' > crlf.txt"]}, {"text": "ok"})
    session = make()
    await turn(session, "go")
    report = await session.rewind(1)
    assert report.restored == ["crlf.txt"] and report.skipped == []
    assert (workdir / "crlf.txt").read_bytes() == b"one\r\ntwo\r\n"


async def test_synapse_home_inside_the_folder_is_never_kept_or_restored(
    api: FakeAnthropic, router: BashRouter, workdir: Path
) -> None:
    """The folder is $HOME and $SYNAPSE_HOME is ~/.synapse: the store must not keep
    (and a rewind must not put back) its own files."""
    settings = Settings(synapse_home=workdir / ".synapse", command_timeout=30.0)
    model = ModelClient(api_key=KEY, base_url=api.base_url, model="fake-model")
    store = ChatStore(settings.synapse_home / "sessions")
    session = ChatSession(router, settings, model=model, store=store, workspace_root=workdir)
    try:
        api.add({"commands": ["echo hi > note.txt"]}, {"text": "ok"}, "again")
        await turn(session, "one")
        await turn(session, "two")
        (first, second) = session.checkpoints.kept()
        assert [p for _, p in first.changed] == ["note.txt"]
        assert second.changed == []  # the store's own growth is not a change
        await session.rewind(1)
        assert not (workdir / "note.txt").exists()
        assert (settings.synapse_home / "sessions" / session.id / "events.jsonl").exists()
    finally:
        await session.close()
        await model.close()


async def test_no_turn_starts_while_a_rewind_asks(
    make: Callable[..., ChatSession], api: FakeAnthropic, workdir: Path
) -> None:
    (workdir / "f.txt").write_text("one\n")
    api.add({"commands": ["echo two > f.txt"]}, {"text": "ok"})
    session = make()
    await turn(session, "go")
    (workdir / "f.txt").write_text("the user's\n")
    refused: list[str] = []

    async def decide(path: str) -> bool:
        assert session.busy
        with pytest.raises(SessionBusyError):
            session.run_turn("a prompt sent meanwhile")
        refused.append(path)
        return False

    await session.rewind(1, decide=decide)
    assert refused == ["f.txt"] and not session.busy


async def test_odd_names_are_kept_and_an_older_store_is_reconfigured(
    tmp_path: Path, workdir: Path
) -> None:
    """Names that look like status records (`A  x`, ` M y`, `?? z`, a leading space,
    a newline) are staged like any other; a store set up by an earlier version (the
    untracked cache on, no split index) is set up anew at its next snapshot."""
    names = ["A  x", " M y", "?? z", "sub/!! w", "new\nline", "plain.txt"]
    for name in names:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(f"{name}\n")
    keeper = Checkpoints(workdir, tmp_path / "home", "s1", tmp_path / "records")
    keeper.begin_turn(1, 0, "p")
    await keeper.settle()

    def listed(tree: str) -> set[str]:
        out = subprocess.run(
            ["git", f"--git-dir={keeper.git_dir}", "ls-tree", "-r", "-z", "--name-only", tree],
            capture_output=True,
            check=True,
        ).stdout
        return set(out.decode().split("\0")) - {""}

    def config(key: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={keeper.git_dir}", "config", key], capture_output=True, text=True
        ).stdout.strip()

    (first,) = [c.before for c in keeper.kept()]
    assert listed(first) == set(names)
    assert (config("core.splitIndex"), config("core.untrackedCache")) == ("true", "false")
    # An older store: the mark gone, the old settings back; one file changed, one gone.
    (keeper.git_dir / "synapse-config-2").unlink()
    subprocess.run(["git", f"--git-dir={keeper.git_dir}", "config", "core.untrackedCache", "true"])
    subprocess.run(["git", f"--git-dir={keeper.git_dir}", "config", "--unset", "core.splitIndex"])
    (workdir / " M y").write_text("changed\n")
    (workdir / "?? z").unlink()
    again = Checkpoints(workdir, tmp_path / "home", "s1", tmp_path / "records")
    again.begin_turn(2, 0, "q")
    await again.settle()
    second = next(c.before for c in again.kept() if c.turn == 2)
    assert listed(second) == set(names) - {"?? z"}
    assert stored(keeper, second, " M y") == "changed\n"
    assert (config("core.splitIndex"), config("core.untrackedCache")) == ("true", "false")


def _git_store(keeper: Checkpoints, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", f"--git-dir={keeper.git_dir}", *args], capture_output=True, text=True
    )


async def test_kept_ignored_files_survive_any_gc_and_a_broken_index_is_rebuilt(
    tmp_path: Path, workdir: Path
) -> None:
    """A small ignored file (`.env`) is kept as a blob that a ref reaches: a gc that
    prunes everything unreachable keeps it. A session index git cannot read (a split
    index whose shared part expired) makes the next snapshot a full one, not an error."""
    (workdir / ".gitignore").write_text(".env\n")
    (workdir / ".env").write_text("TOKEN=kept\n")
    (workdir / "a.txt").write_text("a\n")
    keeper = Checkpoints(workdir, tmp_path / "home", "s1", tmp_path / "records")
    keeper.begin_turn(1, 0, "p")
    await keeper.settle()
    (first,) = keeper.kept()
    blob = first.ignored_before[".env"]["blob"]
    assert _git_store(keeper, "gc", "--quiet", "--prune=now").returncode == 0
    assert _git_store(keeper, "cat-file", "blob", blob).stdout == "TOKEN=kept\n"

    keeper.index.write_bytes(b"DIRC garbage")
    (workdir / "a.txt").write_text("changed\n")
    keeper.begin_turn(2, 0, "q")
    await keeper.settle()
    assert keeper.disabled is None
    second = next(c for c in keeper.kept() if c.turn == 2)
    assert stored(keeper, second.before, "a.txt") == "changed\n"


async def test_forgetting_a_session_drops_its_refs_even_when_its_folder_is_gone(
    tmp_path: Path, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("a\n")
    home = tmp_path / "home"
    mine = Checkpoints(workdir, home, "mine", tmp_path / "records-mine")
    other = Checkpoints(workdir, home, "other", tmp_path / "records-other")
    for keeper in (mine, other):
        keeper.begin_turn(1, 0, "p")
        await keeper.settle()

    def sessions_with_refs() -> set[str]:
        listed = _git_store(mine, "for-each-ref", "--format=%(refname)", "refs/synapse/")
        return {ref.split("/")[2] for ref in listed.stdout.split()}

    assert sessions_with_refs() == {"mine", "other"}
    shutil.rmtree(workdir)
    await forget_session(home, workdir, "mine")
    assert sessions_with_refs() == {"other"}
    assert not mine.index.exists() and other.index.exists()
    # The other session's snapshot is whole.
    (kept,) = other.kept()
    assert _git_store(other, "cat-file", "-t", kept.before).stdout.strip() == "tree"


def test_the_event_loop_can_end_while_a_snapshot_and_a_gc_start(tmp_path: Path) -> None:
    """The editor quits just as a turn begins: the event loop ends with a snapshot and
    a gc starting. asyncio's own subprocesses hung Python 3.11's asyncio.run there
    (a cancelled start waits for an exit nobody reports); the process must end."""
    script = f"""
import asyncio, faulthandler
from pathlib import Path
from synapse_lsp.checkpoints import Checkpoints
faulthandler.dump_traceback_later(30, exit=True)
async def main():
    folder = Path({str(tmp_path)!r}) / "w"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    keeper = Checkpoints(folder, folder.parent / "home", "s", folder.parent / "records")
    keeper.begin_turn(1, 0, "p")
    await keeper.settle()
    keeper.store.background_gc()
    keeper.begin_turn(2, 0, "q")
asyncio.run(main())
print("ended")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "ended", done.stderr[-2000:]


async def test_only_the_last_checkpoints_are_kept_with_their_refs(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_records, "MAX_CHECKPOINTS", 2)
    (workdir / ".gitignore").write_text(".env\n")
    keeper = Checkpoints(workdir, tmp_path / "home", "s1", tmp_path / "records")
    for turn in range(1, 5):
        (workdir / ".env").write_text(f"TOKEN={turn}\n")
        (workdir / "a.txt").write_text(f"{turn}\n")
        keeper.begin_turn(turn, 0, f"turn {turn}")
        await keeper.settle()
        keeper.end_turn()
        await keeper.settle()
    assert [c.turn for c in keeper.kept()] == [3, 4]
    listed = _git_store(keeper, "for-each-ref", "--format=%(refname)", "refs/synapse/s1/")
    names = sorted(ref.rsplit("/", 1)[1] for ref in listed.stdout.split())
    assert names == sorted(
        f"{turn}-{phase}"
        for turn in (3, 4)
        for phase in ("before", "after", "before-ignored", "after-ignored")
    )


async def test_a_turns_edit_inside_a_submodule_is_named_not_restorable(
    make: Callable[..., ChatSession], api: FakeAnthropic, repo: Path
) -> None:
    """Issue 31 item 5: the shadow store keeps a nested repository (a submodule, a
    cloned sub-project) as a link only; a turn's edit inside one is reported under
    notRestorable with the reason, and no git runs there (its config could run code)."""
    sub = repo / "vendor" / "lib"
    sub.mkdir(parents=True)
    (sub / "lib.py").write_text("v = 1\n")
    git(sub, "init", "-q")
    git(sub, "add", "-A")
    git(sub, "-c", "user.email=u@x", "-c", "user.name=u", "commit", "-qm", "lib")
    planted = repo / "fsmonitor-ran"
    git(sub, "config", "core.fsmonitor", f"touch {planted}; false")
    api.add(
        {"commands": ["echo 'v = 2' > vendor/lib/lib.py && echo two > b.txt"]},
        {"text": "ok"},
    )
    session = make()
    await turn(session, "edit the vendored lib")
    await session.checkpoints.settle()
    [checkpoint] = session.checkpoints.kept()
    assert "vendor/lib/" in checkpoint.ignored_changed
    report = await session.rewind(1)
    assert report.restored == ["b.txt"] and (repo / "b.txt").read_text() == "hello\n"
    assert report.not_restorable == ["vendor/lib/"]
    assert "nested repository or submodule" in report.text()
    assert (sub / "lib.py").read_text() == "v = 2\n"  # left as it is, and said so
    assert not planted.exists()  # Synapse ran no git in the nested repository
