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
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp import cmdline, hooks
from synapse_lsp.agent.loop import Loop
from synapse_lsp.agent.subagents import ExploreGate, run_subagent
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
from synapse_lsp.tasks import TaskOwner

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
        for step in steps or [Step(command, layer)]:
            if step.layer is Layer.AGENT and cmdline.first_word(step.text) in ("write", "edit"):
                target = _target(step.text, cwd)
                if settings.sandbox == "read-only" or target is None:
                    return refusal
                if os.path.commonpath([target, self._skills]) != self._skills:
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


def _target(text: str, cwd: Path) -> str | None:
    """The real path a `write`/`edit` step changes (`… | write FILE` too), else None."""
    name, tool_input = hooks.tool_call(text, cwd)
    if name in ("Write", "Edit"):
        return os.path.realpath(str(tool_input["file_path"]))
    argv = cmdline.split_argv(text)
    if argv[0] == "write" and len(argv) == 2 and not argv[1].startswith("-"):
        return os.path.realpath(cwd / Path(argv[1]).expanduser())  # content from a pipe
    return None


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
    holder = Loop(  # the sub-agent's parent: its usage, its permission lock
        router=job.router.derive(permission=gate, state={}),
        settings=job.settings,
        model=job.model,
        system=lambda: job.system,
        context_window=job.context_window,
    )

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

    router = job.router.derive(subagent=subagent, permission=None, state={})
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
