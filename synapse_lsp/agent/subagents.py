"""Sub-agents (`task:<type>`): a child loop with its own history and shell, run as one
tool call.

The child gets a type-specific system prompt, the parent's model client (or a copy
naming another model, `--model`), **its own shell** — a fresh bash started in the
parent shell's current directory, with the same writable roots and sandbox, closed
when the sub-agent ends (before issue 19 sub-agents shared the parent's shell, so
concurrent ones would have queued on it and changed each other's cwd) — its own plan
state, and a router derived with `in_subagent=True` (so `task:*` is refused inside
it); `task:explore` also gets a read-only permission gate, and a Claude Code sub-agent
type (claude_agents.py) the gate its `tools` call for (`Access`). Its permission questions
go through the parent loop's `ask_lock` (`loop.SerialGate`): parallel sub-agents ask one
at a time. Its events go to the parent's consumer tagged with the `task:*` call's id
(`RUNNING_TOOL_CALL`), its usage counts toward the parent's turn, and its final text
is the tool result.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from synapse_lsp import catalog
from synapse_lsp.agent.loop import Emit, Loop, SerialGate
from synapse_lsp.agent.readonly import denial
from synapse_lsp.commands import CommandOutput, FailureCategory, Layer, Step
from synapse_lsp.errors import ModelError
from synapse_lsp.events import RUNNING_TOOL_CALL
from synapse_lsp.policy import hooks

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.shell import ShellSession

log = logging.getLogger(__name__)


async def run_subagent(
    parent: Loop,
    emit: Emit,
    *,
    task_type: str,
    prompt: str,
    description: str,
    model: Callable[[], ModelClient],
    system: list[dict[str, Any]],
    max_turns: int | None = None,
    model_name: str | None = None,
) -> CommandOutput:
    """Run `prompt` in a child of `parent`, nested under the `task:*` call running in
    this task (`RUNNING_TOOL_CALL`)."""
    shell = _own_shell(parent)
    # bash starts while the sub-agent's first model call runs (its first command waits
    # for it: `run` takes the shell's lock); a bash that cannot start fails that command.
    starting = asyncio.ensure_future(shell.start())
    gate: Any = parent.router.permission
    if gate is not None:
        gate = SerialGate(gate, parent.ask_lock)
    access = Access() if task_type in READ_ONLY_TASKS else _access(parent, task_type)
    if access is not None:
        gate = ExploreGate(gate, task_type, access)
    child = Loop(
        router=parent.router.derive(shell=shell, permission=gate, in_subagent=True, state={}),
        settings=parent.settings_source,
        model=model,
        system=lambda: system,
        parent_tool_call_id=RUNNING_TOOL_CALL.get() or parent.current_tool_call_id,
        context_window=parent.context_window,
        max_turns=max_turns,
    )
    child.model_usage = parent.model_usage  # priced per model with the parent's turn
    try:
        result = await child.run([{"type": "text", "text": prompt}], emit)
    except ModelError as exc:
        parent.turn_usage = parent.turn_usage + child.turn_usage
        return CommandOutput(
            stderr=f"task:{task_type} ({description}) failed: {exc.message}\n",
            exit_code=1,
            category=FailureCategory.EXECUTION_ERROR,
        )
    except asyncio.CancelledError:
        parent.turn_usage = parent.turn_usage + child.turn_usage
        raise
    finally:
        await _close(shell, starting)
    parent.turn_usage = parent.turn_usage + result.usage
    data = {
        "subagent": {
            "type": task_type,
            "description": description,
            "stop_reason": result.stop_reason,
            "model_calls": result.model_calls,
            "model": model_name,
            "max_turns": child.turn_limit,
        }
    }
    final = result.final_text.strip() or "(the sub-agent finished without a final message)"
    if result.stop_reason == "end_turn":
        return CommandOutput(stdout=final + "\n", data=data)
    return CommandOutput(
        stdout=final + "\n",
        stderr=f"task:{task_type} stopped early ({result.stop_reason}); its last text is above.\n",
        exit_code=1,
        category=FailureCategory.EXECUTION_ERROR,
        data=data,
    )


async def run_task(
    parent: Loop,
    emit: Emit,
    ensure_model: Callable[[], ModelClient],
    system: Callable[[str], list[dict[str, Any]]],
    task_type: str,
    prompt: str,
    description: str,
    *,
    model: str | None = None,
    max_turns: int | None = None,
) -> CommandOutput:
    """A chat session's `task:<type>` (its router's `subagent`): `run_subagent` with the
    session's model client (`ensure_model`; a copy naming `model` for `--model`) and
    the type's system prompt (`system`); without a model client, the reason why."""
    try:
        client = ensure_model()
    except ModelError as exc:
        return CommandOutput(
            stderr=f"task:{task_type}: {exc.message}\n",
            exit_code=1,
            category=FailureCategory.DEPENDENCY_MISSING,
        )
    factory: Callable[[], ModelClient] = ensure_model
    if model is not None and model != client.model:
        variant = _with_model(client, model)
        factory = lambda: variant  # noqa: E731
    output = await run_subagent(
        parent,
        emit,
        task_type=task_type,
        prompt=prompt,
        description=description,
        model=factory,
        system=system(task_type),
        max_turns=max_turns,
        model_name=model or client.model,
    )
    scope = hooks.current()  # the turn's: SubagentStop hooks run once it has finished
    if scope is not None:
        await scope.hooks.event(
            scope, "SubagentStop", None, {"stop_hook_active": False, "agent_type": task_type}
        )
    return output


def _with_model(client: ModelClient, model: str) -> ModelClient:
    """The session's client asking for another model (`task:* --model`): a shallow copy
    sharing its connection pool (built first, so the copy never builds one of its own
    that nobody closes)."""
    client.prepare()
    variant = copy.copy(client)
    variant.model = model
    return variant


def _own_shell(parent: Loop) -> ShellSession:
    """A bash of its own for one sub-agent (not started): in the parent shell's
    directory, with its workspace roots, its /tmp and its extension wrappers (the
    sandbox is the settings', as for every shell)."""
    from synapse_lsp.shell import ShellSession

    home = parent.router.shell
    roots = getattr(home, "roots", None)
    view = getattr(home, "view", None)
    return ShellSession(
        home.cwd,
        parent.settings_source,
        writable=list(roots) if roots else None,
        wrappers=getattr(home, "wrappers", None),
        # The parent's /tmp: one world for the agent and its sub-agents.
        private_tmp=view.private_tmp if view is not None else None,
    )


async def _close(shell: ShellSession, starting: asyncio.Future[None]) -> None:
    """Close a sub-agent's shell (once its start is over), even while its task is
    being cancelled."""

    async def close() -> None:
        with contextlib.suppress(BaseException):
            await starting  # a start still running ends first (close kills what it made)
        await shell.close()

    closing = asyncio.ensure_future(close())
    try:
        await asyncio.shield(closing)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await closing
        raise
    except Exception as exc:
        log.warning("closing a sub-agent's shell: %s", exc)


# Sub-agent types that only look: reading, listing, searching (and extension commands'
# -h/--help, which print a usage page and run nothing).
READ_ONLY_TASKS = frozenset({"explore", "skill:search"})


@dataclass(frozen=True)
class Access:
    """What a restricted sub-agent may run besides reading, listing and searching."""

    edits: bool = False  # the built-ins that write files (`write`, `edit`)
    extensions: frozenset[str] = frozenset()  # these extension commands (`mcp:s:t`)


@runtime_checkable
class RestrictingRunner(Protocol):
    """A task runner some of whose types are restricted (claude_agents.AgentRunner)."""

    def access(self, task_type: str) -> Access | None: ...


def _access(parent: Loop, task_type: str) -> Access | None:
    runner = parent.router.subagent
    return runner.access(task_type) if isinstance(runner, RestrictingRunner) else None


class ExploreGate:
    """task:explore and task:skill:search are read-only: only reading, listing and
    searching may run (the built-ins the catalog calls `read_only_safe`, and `-h`/
    `--help` of an extension command); a restricted Claude Code sub-agent also what its
    `Access` adds."""

    def __init__(self, inner: Any, task_type: str = "explore", access: Access = Access()) -> None:
        self.inner = inner
        self.task_type = task_type
        self.access = access

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None:
        for step in steps or [Step(command, layer)]:
            reason = self._deny(step.text, step.layer)
            if reason is not None:
                return reason
        if self.inner is not None:
            result: str | None = await self.inner.check(command, layer, cwd, steps)
            return result
        return None

    def _deny(self, command: str, layer: Layer) -> str | None:
        from synapse_lsp import cmdline

        words = command.split()
        first = cmdline.first_word(command)
        what = "may only read and edit files" if self.access.edits else "is read-only"
        refusal = (
            f"task:{self.task_type} {what}; this command may change things. Report what "
            "should be done instead."
        )
        if layer is Layer.AGENT:
            builtin = catalog.lookup([first, *words[1:2]])
            traits = catalog.traits(builtin) if builtin is not None else None
            if traits is not None and (
                traits.read_only_safe
                or (self.access.edits and traits.effect is catalog.Effect.WRITE)
            ):
                return None
            return refusal
        if layer is Layer.EXTENSION:
            if words and words[0] in self.access.extensions:
                return None
            # `mcp:a:b --help` prints the usage page; it does not call the tool
            return None if len(words) == 2 and words[1] in ("-h", "--help") else refusal
        # Native commands: the conservative allow-list of `agent/readonly.py` (every
        # simple command of the line), never the summaries, which are for people.
        return None if denial(command) is None else refusal
