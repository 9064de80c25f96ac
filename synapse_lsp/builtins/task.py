"""`task:<type> --prompt "…" --description "…"`: run a sub-agent and return its final text."""

from __future__ import annotations

from synapse_lsp.builtins.args import ArgError, parse_args
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory

TASK_TYPES: dict[str, str] = {
    "general": "a general sub-agent with every command, for a self-contained piece of work",
    "explore": "a read-only sub-agent that searches and reads the code and reports findings",
    "skill:search": "finds the skills that fit a need and says how to use them",
    "skill:enhance": "reviews a finished task and improves or creates a skill from it",
}


class TaskCommand:
    name = "task"
    summary = "Run a sub-agent of the given type on a prompt; prints its final answer."
    usage = 'task:<type> --prompt "…" --description "…"'

    def help(self) -> str:
        types = "\n".join(f"  task:{name:<14} {text}" for name, text in TASK_TYPES.items())
        return f"""\
{self.usage}
  {self.summary}
  --prompt TEXT        the full instructions for the sub-agent (it sees nothing else)
  --description TEXT   3-6 words shown to the user while it runs
Types:
{types}
  A sub-agent has its own history; only its final text comes back. Sub-agents
  cannot start further task:* commands.
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
            if task_type not in TASK_TYPES:
                known = ", ".join(f"task:{t}" for t in TASK_TYPES)
                raise ArgError(f"unknown task type {task_type!r}; known: {known}")
            args = parse_args(argv[1:], options={"prompt", "description"})
            if args.positional:
                raise ArgError(f"unexpected argument {args.positional[0]!r}; quote --prompt text")
            prompt = args.options.get("prompt", "").strip()
            if not prompt:
                raise ArgError("--prompt is required")
            description = args.options.get("description", "").strip() or prompt[:40]
        except ArgError as exc:
            return CommandOutput.usage_error(f"task:{task_type}" if task_type else "task", str(exc))
        return await ctx.subagent(task_type, prompt, description)
