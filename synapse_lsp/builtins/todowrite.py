"""`TodoWrite '<json>'`: Claude Code's todo list shape, kept as the session's one plan.

`{"todos": [{"content": "Run the tests", "activeForm": "Running the tests",
"status": "pending"|"in_progress"|"completed"}]}` — at most `MAX_TODOS` items, at most
one in progress. It replaces the whole plan `plan` keeps (`ctx.state["plan"]`): the
same store, the same `PlanUpdated` event, so every face shows one list whichever
command the model used. `content` becomes the step; `activeForm` is kept with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from synapse_lsp import catalog
from synapse_lsp.builtins.plan import STATUSES, PlanState, Status, render, store_plan
from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput
from synapse_lsp.events import PlanEntry

MAX_TODOS = 20
_FIELDS = ("content", "activeForm", "status")
_ALLOWED = ", ".join(STATUSES)


class TodoError(ValueError):
    """Wrong usage of TodoWrite; the message says what is allowed."""


@catalog.builtin
class TodoWriteCommand(catalog.Described):
    name = "TodoWrite"
    traits = catalog.Traits(
        effect=catalog.Effect.STATE,
        shape=catalog.Shape.PLAN,
        claude_tool="TodoWrite",
        example=(
            'Bash(command="TodoWrite \'{\\"todos\\": [{\\"content\\": \\"first step\\", '
            '\\"activeForm\\": \\"Doing the first step\\", \\"status\\": \\"pending\\"}]}\'")'
        ),
    )
    summary = "Set the plan in Claude Code's TodoWrite shape (the same plan as `plan`)."
    usage = 'TodoWrite \'{"todos": [{"content": "…", "activeForm": "…", "status": "pending"}]}\''

    @staticmethod
    def from_tool_input(args: Mapping[str, Any]) -> str | None:
        """The same input as a `TodoWrite` command: its shape is accepted as it is (the
        command validates it and says what is wrong)."""
        if not isinstance(args.get("todos"), list):
            return None
        return f"TodoWrite {quote(json.dumps({'todos': args['todos']}, ensure_ascii=False))}"

    def help(self) -> str:
        return f"""\
{self.usage}
  {self.summary}
  Replaces the whole plan (the JSON as one quoted argument, or in a heredoc):
    TodoWrite '{{"todos": [{{"content": "Run the tests", "activeForm": "Running the tests",
                           "status": "in_progress"}}]}}'
  Each item: content (the step), activeForm (what is being done, shown while it is
  in progress), status ({_ALLOWED}). At most {MAX_TODOS} items; at most one in_progress.
  "todos": [] clears the plan. `TodoWrite` alone prints it."""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        from synapse_lsp.builtins.plan import current_plan

        if not argv and (ctx.stdin is None or not ctx.stdin.strip()):
            current = current_plan(ctx.state)
            return CommandOutput(render(current), data=current.to_data())
        try:
            if len(argv) > 1:
                raise TodoError(
                    "the JSON must be one quoted argument: TodoWrite '{\"todos\": [...]}' "
                    "(or a heredoc: TodoWrite <<'EOF' … EOF)"
                )
            text = argv[0] if argv else str(ctx.stdin)
            plan = parse_todos(text)
        except TodoError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        return store_plan(ctx, plan)


def parse_todos(text: str) -> PlanState:
    """Validate Claude Code's TodoWrite input (JSON text) into a plan."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TodoError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(value, dict) or "todos" not in value:
        raise TodoError('expected a JSON object {"todos": [{"content", "activeForm", "status"}]}')
    unknown = sorted(set(value) - {"todos"})
    if unknown:
        raise TodoError(f"unknown field {unknown[0]!r} (allowed: todos)")
    items = value["todos"]
    if not isinstance(items, list):
        raise TodoError('"todos" must be a list of {"content", "activeForm", "status"} objects')
    if len(items) > MAX_TODOS:
        raise TodoError(
            f"{len(items)} todos; at most {MAX_TODOS}. Merge small steps or keep only "
            "the next ones."
        )
    entries = tuple(_entry(item, n) for n, item in enumerate(items, start=1))
    active = [str(n) for n, e in enumerate(entries, start=1) if e.status == "in_progress"]
    if len(active) > 1:
        raise TodoError(
            f"at most one todo may be in_progress; todos {', '.join(active)} are. "
            "Mark finished ones completed and later ones pending."
        )
    return PlanState(entries)


def _entry(item: Any, number: int) -> PlanEntry:
    if not isinstance(item, dict):
        raise TodoError(f'todo {number} must be an object {{"content", "activeForm", "status"}}')
    unknown = sorted(set(item) - {*_FIELDS, "id", "priority"})
    if unknown:
        raise TodoError(
            f"todo {number}: unknown field {unknown[0]!r} (allowed: {', '.join(_FIELDS)})"
        )
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise TodoError(f'todo {number}: "content" must be a non-empty string')
    form = item.get("activeForm")
    if form is not None and not isinstance(form, str):
        raise TodoError(f'todo {number}: "activeForm" must be a string')
    status = item.get("status")
    if status not in STATUSES:
        shown = "missing" if status is None else repr(status)
        raise TodoError(f"todo {number}: status {shown} is not one of: {_ALLOWED}")
    return PlanEntry(content.strip(), cast(Status, status), (form or "").strip() or None)
