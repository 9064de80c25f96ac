"""Skills that grow by themselves (setting `skillEnhance`, `/skill enhance on|off`).

After a chat turn that ended normally with at least `skillEnhanceMinTools` tool calls of
its own (a sub-agent's do not count), the session runs `skill:reinforce` — the command
the model can run itself, so the same `task:skill:enhance` sub-agent and the same kept
versions — in the background, over a summary of the turn's transcript. It never holds
up the next prompt: the next turn runs beside it, and it is not cancelled by one (only
closing the session cancels it; one runs at a time per session). What it changed is
announced in one `Notice` (into the turn running then, else at the start of the next).

Nobody watches a background run, so nothing in it is asked: its sub-agent may read,
list and search (`task:explore`'s read-only rule) and `write`/`edit` files under
`$SYNAPSE_HOME/skills/` only; the `deny` setting and PreToolUse hooks still apply (a
hook's "ask" refuses). Its events are not shown; its usage counts toward the session.

What may write is held to one strict shape, because the gate sees a line before it runs
and an earlier stage could change what a later path means (`cd sub && … | write sk/x`
with `sk` a different link in `sub`): a line that writes is exactly one `write`/`edit`
call, or `<one read-only simple command> | write FILE` (no `cd`, no `;`/`&&`/`||`, no
groups or substitutions). The path is checked twice: by the gate (its real path, against
the shell's directory) and again when the file is written (`SkillFiles`: the real path
then, every directory under the skills folder opened without following links, the file
itself with O_NOFOLLOW), so a link swapped in between cannot redirect the write. The run
has a bash of its own (`cd` in it never moves the session's shell).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp import catalog, cmdline
from synapse_lsp.agent.loop import Loop
from synapse_lsp.agent.readonly import denial
from synapse_lsp.agent.subagents import ExploreGate, _close, _own_shell, run_subagent
from synapse_lsp.background import TaskOwner
from synapse_lsp.commands import CommandOutput, Layer, Step
from synapse_lsp.config import SettingsSource
from synapse_lsp.events import (
    Event,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
    UserMessage,
)
from synapse_lsp.files import FileError, FileGateway, file_lock
from synapse_lsp.policy import hooks

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.router import BashRouter

log = logging.getLogger(__name__)

COMMAND = "skill:reinforce"
SHOWN_CHARS = 2000  # of the prompt and of the final answer, in the summary
SHOWN_COMMANDS = 40
SHOWN_COMMAND_CHARS = 300


# ---------------------------------------------------------------- the transcript


def last_turn(events: Sequence[Event]) -> list[Event]:
    """The events of the last turn in a session's transcript (from its prompt on)."""
    starts = [i for i, e in enumerate(events) if isinstance(e, UserMessage)]
    return list(events[starts[-1] :]) if starts else []


def tool_calls(turn: Sequence[Event]) -> int:
    """The turn's own tool calls (not its sub-agents')."""
    return sum(1 for e in turn if isinstance(e, ToolCallFinished) and e.parent_tool_call_id is None)


def summary(turn: Sequence[Event]) -> str:
    """What the skill sub-agent is told of the turn (it sees nothing else)."""
    prompt = next((e.text for e in turn if isinstance(e, UserMessage)), "")
    commands: dict[str, str] = {}
    ended: dict[str, str] = {}
    answer: list[str] = []
    for event in turn:
        if getattr(event, "parent_tool_call_id", None) is not None:
            continue
        if isinstance(event, ToolCallStarted):
            commands[event.tool_call_id] = event.command
            answer = []  # the answer is the text after the last call
        elif isinstance(event, ToolCallFinished):
            ended[event.tool_call_id] = (
                f"exit {event.exit_code}" if event.exit_code is not None else event.status
            )
        elif isinstance(event, TextDelta):
            answer.append(event.text)
    rows = [
        f"{n}. {_short(cmd, SHOWN_COMMAND_CHARS)}  -> {ended.get(call, 'not finished')}"
        for n, (call, cmd) in enumerate(commands.items(), 1)
    ]
    if len(rows) > SHOWN_COMMANDS:
        rows = [*rows[:SHOWN_COMMANDS], f"… and {len(rows) - SHOWN_COMMANDS} more"]
    return "\n".join(
        [
            "A chat turn just ended; Synapse started this review by itself (setting skillEnhance).",
            "The user asked:",
            _short(prompt.strip(), SHOWN_CHARS),
            "The agent ran, in order (each with how it ended):",
            *rows,
            "Its final answer:",
            _short("".join(answer).strip() or "(none)", SHOWN_CHARS),
            "If this shows a procedure worth reusing, improve the skill that fits or create "
            "one; if not, change nothing and say so.",
        ]
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# ---------------------------------------------------------------- what may run


class SkillEnhanceGate(ExploreGate):
    """A background enhancement's gate: `task:explore`'s read-only rule, plus `write` and
    `edit` of files under the skills folder; the `deny` setting and PreToolUse hooks on
    top. Never asks."""

    def __init__(self, settings: SettingsSource, skills: Path, known: hooks.Hooks | None) -> None:
        super().__init__(None, "skill:enhance")
        self._settings = settings
        self._skills = os.path.realpath(skills)
        self._hooks = known

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None:
        settings = self._settings()
        refusal = (
            "not run: a background skill enhancement may only read, list and search, and "
            f"write or edit files under {self._skills}/ (nothing is asked; nobody is watching)"
        )
        planned = list(steps) or [Step(command, layer)]
        for step in planned:
            if _writes(step):
                if settings.sandbox == "read-only" or not _one_writer(command, planned):
                    return (
                        f"{refusal}; a line that writes must be exactly one `write`/`edit` "
                        "call, or `<one read-only command> | write FILE` (no cd, ;, &&, "
                        "groups or substitutions)"
                    )
                target = _target(step.text, cwd)
                if target is None or not _under(target, self._skills):
                    return refusal
            elif self._deny(step.text, step.layer) is not None:
                return refusal
        line = command.strip()
        parts = [line, *cmdline.simple_commands(line)]
        for pattern in settings.deny:
            if any(fnmatch.fnmatchcase(part, pattern) for part in parts):
                return f"denied by the `deny` setting (pattern {pattern!r})"
        scope = hooks.current()
        if self._hooks is not None and scope is not None:
            verdict = await self._hooks.pre_tool_use(scope, line, cwd)
            if verdict.decision == "deny":
                return verdict.reason
            if verdict.decision == "ask":
                return f"denied: {verdict.reason}; a background run cannot ask"
        return None


def _writes(step: Step) -> bool:
    """A built-in step that writes files (`catalog.Effect.WRITE`)."""
    found = catalog.traits_of(cmdline.first_word(step.text))
    return step.layer is Layer.AGENT and found is not None and found.effect is catalog.Effect.WRITE


def _one_writer(command: str, steps: Sequence[Step]) -> bool:
    """Whether a line that writes has the one shape allowed: a single `write`/`edit` call
    (the whole line), or `<one read-only simple command> | write FILE`, so that nothing
    before the write can change the directory (or the links) its path is read in."""
    line = command.strip()
    if len(steps) == 1:
        return steps[0].text.strip() == line
    if len(steps) != 2 or steps[0].layer is not Layer.NATIVE or not _writes(steps[1]):
        return False
    parts = cmdline.split_all(line)
    if len(parts) != 2 or parts[0][1] != "|":
        return False
    source, sink = parts[0][0].strip(), parts[1][0].strip()
    if steps[0].text.strip() != source or steps[1].text.strip() != sink:
        return False
    takes_pipe = catalog.traits_of(cmdline.first_word(sink))
    if (
        takes_pipe is None
        or not takes_pipe.pipe_sink
        or cmdline.simple_commands(source) != [source]
    ):
        return False  # a group, a substitution, a second command
    if cmdline.first_word(source) in ("cd", "pushd", "popd"):
        return False
    return denial(source) is None


def _under(path: str, root: str) -> bool:
    return path != root and os.path.commonpath([path, root]) == root


def _target(text: str, cwd: Path) -> str | None:
    """The real path a `write`/`edit` step changes (`… | write FILE` too), else None."""
    heredoc = cmdline.extract_heredoc(text)
    argv = cmdline.split_argv(heredoc[0] if heredoc is not None else text)
    found = catalog.invocation(argv, heredoc[1] if heredoc is not None else None)
    if found is None or len(found.writes) != 1:
        return None
    return os.path.realpath(cwd / Path(found.writes[0]).expanduser())


class SkillFiles:
    """A background enhancement's file gateway: reads pass through; a change is made
    only to a file whose real path, resolved when it is made, is under the skills
    folder, on disk, through directories opened one by one without following links
    (from the skills folder down) and with the file itself opened O_NOFOLLOW. The gate
    checked the path before the line ran; this checks it again as it is written."""

    def __init__(self, inner: FileGateway, skills: Path) -> None:
        self.inner = inner
        self._skills = skills

    def _place(self, path: Path) -> tuple[str, tuple[str, ...]]:
        """(the skills folder's real path, the parts of `path` under it), or FileError."""
        root = os.path.realpath(self._skills)
        real = os.path.realpath(path)
        if not _under(real, root):
            raise FileError(
                f"{path}: not under {root}/ (its real path is {real}); a background skill "
                "enhancement writes only there; nothing changed"
            )
        return root, Path(real).relative_to(root).parts

    async def document_text(self, path: Path) -> str | None:
        root = os.path.realpath(self._skills)
        if _under(os.path.realpath(path), root):
            return None  # skills are changed on disk (below), so read from there
        return await self.inner.document_text(path)

    async def write(self, path: Path, text: str) -> None:
        try:
            await self._write(path, text)
        except OSError as exc:
            raise FileError(f"{path}: {exc.strerror or exc}; nothing changed") from None

    async def apply_change(self, path: Path, before: str, after: str) -> None:
        try:
            await self._apply(path, before, after)
        except OSError as exc:
            raise FileError(f"{path}: {exc.strerror or exc}; nothing changed") from None

    async def _write(self, path: Path, text: str) -> None:
        root, parts = self._place(path)
        folder = await asyncio.to_thread(_open_folder, root, parts[:-1], path)
        try:
            async with file_lock(Path(root, *parts)):
                await asyncio.to_thread(_replace, folder, parts[-1], text, path)
        finally:
            os.close(folder)

    async def _apply(self, path: Path, before: str, after: str) -> None:
        root, parts = self._place(path)
        folder = await asyncio.to_thread(_open_folder, root, parts[:-1], path)
        try:
            async with file_lock(Path(root, *parts)):
                current = await asyncio.to_thread(_read, folder, parts[-1], path)
                if current != before:
                    raise FileError(
                        f"{path}: changed on disk since it was read; nothing changed: read it "
                        "again and redo the edit"
                    )
                await asyncio.to_thread(_replace, folder, parts[-1], after, path)
        finally:
            os.close(folder)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_folder(root: str, parts: Sequence[str], path: Path) -> int:
    """An fd of the folder `root/parts…`, made where missing, no part followed if a link."""
    Path(root).mkdir(parents=True, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise FileError(
                    f"{path}: {part!r} is a link or not a directory; nothing changed"
                ) from exc
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def _read(folder: int, name: str, path: Path) -> str:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except OSError as exc:
        raise FileError(f"{path}: a link or unreadable ({exc.strerror}); nothing changed") from None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FileError(f"{path}: not valid UTF-8") from None


def _replace(folder: int, name: str, text: str, path: Path) -> None:
    """Write `name` in `folder` anew (a temporary file renamed over it): never through a
    link, keeping an existing file's permission bits."""
    try:
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise FileError(f"{path}: a link, directory or special file; nothing changed")
    temp = f".{name[:100]}.{secrets.token_hex(6)}.synapse-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666, dir_fd=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            if old is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
            os.fsync(fh.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise


# ---------------------------------------------------------------- the run


@dataclass(frozen=True)
class Job:
    """What a background enhancement needs of its session."""

    router: BashRouter  # the session's (with `skill:reinforce` registered)
    settings: SettingsSource
    model: Callable[[], ModelClient]
    system: list[dict[str, Any]]  # task:skill:enhance's system prompt
    context_window: int
    scope: hooks.HookScope | None  # hooks run as for the session, warnings to `notify`
    notify: Callable[[Notice], None]  # the one-line announcement
    account: Callable[[dict[str, Usage]], None]  # its usage, per model


class BackgroundSkills:
    """A session's background enhancement: at most one at a time, owned, cancelled by
    `aclose()` (the session's close)."""

    def __init__(self, name: str) -> None:
        self._tasks = TaskOwner(name)
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, job: Job, turn: Sequence[Event]) -> bool:
        """Start one over `turn`; False when one is still running (this turn is skipped)."""
        if self.running:
            log.info("skill enhancement still running; this turn is not reviewed")
            return False
        if COMMAND not in job.router.builtins:
            log.info("skill enhancement: %s is not available (no extension registry)", COMMAND)
            return False
        self._task = self._tasks.spawn(_enhance(job, summary(turn)), "skill-enhance")
        return True

    async def aclose(self) -> None:
        await self._tasks.aclose()


async def _enhance(job: Job, text: str) -> None:
    hooks.enter(job.scope)  # this task's own: the turn that started it is over
    skills = job.settings().skills_dir
    gate = SkillEnhanceGate(job.settings, skills, job.scope.hooks if job.scope else None)
    files = SkillFiles(job.router.files, skills)
    holder = Loop(  # the sub-agent's parent: its usage, its permission lock
        router=job.router.derive(permission=gate, files=files, state={}),
        settings=job.settings,
        model=job.model,
        system=lambda: job.system,
        context_window=job.context_window,
    )
    # A bash of its own (in the session shell's directory): nothing this run does in a
    # shell moves the one the session's next turn uses.
    shell = _own_shell(holder)
    starting = asyncio.ensure_future(shell.start())
    holder.router = holder.router.derive(shell=shell)
    try:
        await _run(job, text, holder)
    finally:
        await _close(shell, starting)


async def _run(job: Job, text: str, holder: Loop) -> None:

    async def subagent(task_type: str, prompt: str, description: str) -> CommandOutput:
        return await run_subagent(
            holder,
            _drop,
            task_type=task_type,
            prompt=prompt,
            description=description,
            model=job.model,
            system=job.system,
        )

    router = holder.router.derive(subagent=subagent, permission=None, state={})
    try:
        routed = await router.route(f"{COMMAND} {cmdline.quote(text)}")
    finally:
        job.account(holder.model_usage)
    if routed.exit_code != 0:
        first = (routed.stderr or routed.stdout).strip().splitlines()[:1]
        job.notify(
            Notice(
                "Background skill enhancement failed: " + (first[0] if first else "no output"),
                "warning",
            )
        )
        return
    changed = [(str(n), int(v)) for n, v in routed.data.get("changed", [])]
    created = [str(n) for n in routed.data.get("created", [])]
    log.info("skill enhancement: %s", routed.stdout.strip()[:2000])
    parts = [f"`{n}` updated (version {v} kept; undo: skill:rollback {n})" for n, v in changed]
    parts += [f"`{n}` created (undo: skill:delete {n})" for n in created]
    if parts:
        job.notify(Notice("Skills improved in the background: " + "; ".join(parts) + "."))


def _drop(event: Event) -> None:
    return None
