"""`task:<type> -p "…" -d "…" [--model M] [--max-turns N]`: run a sub-agent and return
its final text. Adjacent task:* calls of one model response run concurrently
(agent/loop.py); each sub-agent has its own shell (agent/subagents.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from synapse_lsp import catalog
from synapse_lsp.builtins.args import ArgError, parse_args
from synapse_lsp.builtins.tool_input import text
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory

_OPTIONS = frozenset({"prompt", "description", "model", "max-turns"})
_SHORT = {"-p": "--prompt", "-d": "--description"}


class TaskRunner(Protocol):
    """A `SubAgentRunner` that also takes the model and turn limit (ChatSession's does)."""

    def __call__(
        self,
        task_type: str,
        prompt: str,
        description: str,
        *,
        model: str | None = None,
        max_turns: int | None = None,
    ) -> Awaitable[CommandOutput]: ...


@runtime_checkable
class TypedRunner(Protocol):
    """A runner with task types of its own besides `TASK_TYPES` (a chat session's: the
    Claude Code sub-agents, agent/claude_agents.py)."""

    def task_types(self) -> Mapping[str, str]: ...


def known_types(runner: object) -> dict[str, str]:
    """`TASK_TYPES`, then the runner's own (a built-in type's name stays the built-in's)."""
    extra = runner.task_types() if isinstance(runner, TypedRunner) else {}
    return {**TASK_TYPES, **{k: v for k, v in extra.items() if k not in TASK_TYPES}}


def long_options(argv: list[str]) -> list[str]:
    """`-p`/`-d` as `--prompt`/`--description` (only where an option may stand, never
    a value: `--prompt -p` keeps its text)."""
    out: list[str] = []
    value_next = False
    for i, word in enumerate(argv):
        if value_next:
            out.append(word)
            value_next = False
        elif word == "--":
            out.extend(argv[i:])
            break
        elif word in _SHORT:
            out.append(_SHORT[word])
            value_next = True
        else:
            out.append(word)
            value_next = word.startswith("--") and word[2:] in _OPTIONS
    return out


TASK_TYPES: dict[str, str] = {
    "general": "a general sub-agent with every command, for a self-contained piece of work",
    "explore": "a read-only sub-agent that searches and reads the code and reports findings",
    "skill:search": "finds the skills that fit a need and says how to use them",
    "skill:enhance": "reviews a finished task and improves or creates a skill from it",
}


@catalog.builtin
class TaskCommand(catalog.Described):
    name = "task"
    traits = catalog.Traits(
        effect=catalog.Effect.RUN,
        shape=catalog.Shape.TASK,
        claude_tool="Task",
        prompt_rank=4,
        prefixed=True,
        starts_agent=True,
        example="Bash(command=\"task:explore --prompt '…' --description '…'\")",
    )
    summary = "Run a sub-agent of the given type on a prompt; prints its final answer."
    usage = 'task:<type> -p/--prompt "…" -d/--description "…" [--model M] [--max-turns N]'

    @staticmethod
    def invocation(argv: Sequence[str], body: str | None) -> catalog.Invocation | None:
        subtype = argv[0].partition(":")[2] if argv else ""
        words = long_options(list(argv[1:]))
        description = None
        for index, word in enumerate(words):
            if word == "--description" and index + 1 < len(words):
                description = words[index + 1]
        return catalog.Invocation(subtype=subtype or None, description=description)

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        prompt = text(args.get("prompt"))
        if prompt is None:
            return None
        kind = text(args.get("subagent_type")) or "general"
        kind = {"general-purpose": "general", "Explore": "explore"}.get(kind, kind)
        description = text(args.get("description")) or "sub-task"
        return f"task:{kind} --prompt {quote(prompt)} --description {quote(description)}"

    def help(self) -> str:
        types = "\n".join(f"  task:{name:<14} {text}" for name, text in TASK_TYPES.items())
        return f"""\
{self.usage}
  {self.summary}
  -p, --prompt TEXT       the full instructions for the sub-agent (it sees nothing else)
  -d, --description TEXT  3-6 words shown to the user while it runs
  --model NAME            another model for this sub-agent (default: the session's)
  --max-turns N           at most N model calls (default: the setting maxTurns)
Types:
{types}
  A sub-agent has its own history and its own shell (started in the current
  directory); only its final text comes back. Several task:* calls in one response
  run at the same time (results in call order). Sub-agents cannot start task:*.
Example:
  task:explore --prompt "Find where HTTP retries are configured; list the files" \\
      --description "find retry config\""""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        task_type = argv[0].removeprefix("task:") if argv and argv[0].startswith("task:") else ""
        if ctx.in_subagent:
            return CommandOutput(
                stdout="Nested task not run: task:* commands are blocked inside a sub-agent "
                "(no recursion). Continue the work yourself with the other commands and "
                "give your final answer.\n",
                exit_code=0,
                data={"blocked_nested_task": True},
            )
        if ctx.subagent is None:
            return CommandOutput(
                stderr="Task commands require SubAgent executor, and none is configured here.\n",
                exit_code=1,
                category=FailureCategory.DEPENDENCY_MISSING,
            )
        try:
            types = known_types(ctx.subagent)
            if task_type not in types:
                known = ", ".join(f"task:{t}" for t in types)
                raise ArgError(f"unknown task type {task_type!r}; known: {known}")
            args = parse_args(long_options(argv[1:]), options=_OPTIONS)
            if args.positional:
                raise ArgError(f"unexpected argument {args.positional[0]!r}; quote --prompt text")
            prompt = args.options.get("prompt", "").strip()
            if not prompt:
                raise ArgError("--prompt is required")
            description = args.options.get("description", "").strip() or prompt[:40]
            model = args.options.get("model")
            if model is not None and not model.strip():
                raise ArgError("--model needs a model name")
            turns = args.options.get("max-turns")
            max_turns = _positive("max-turns", turns) if turns is not None else None
        except ArgError as exc:
            return CommandOutput.usage_error(f"task:{task_type}" if task_type else "task", str(exc))
        if model is None and max_turns is None:
            return await ctx.subagent(task_type, prompt, description)
        runner = cast(TaskRunner, ctx.subagent)
        return await runner(
            task_type,
            prompt,
            description,
            model=model.strip() if model else None,
            max_turns=max_turns,
        )


def _positive(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ArgError(f"--{name} must be a whole number, got {value!r}") from None
    if number < 1:
        raise ArgError(f"--{name} must be 1 or more, got {number}")
    return number
