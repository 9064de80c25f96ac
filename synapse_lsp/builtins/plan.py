"""`plan` (alias `todo`): the session's step list, in Codex's `update_plan` shape.

`{explanation?: string, plan: [{step: string, status: pending|in_progress|completed}]}`
given as one JSON argument or a heredoc, or through the short forms below. The plan
lives in `ctx.state["plan"]` (what the prompt's Zone A shows) and every change is
emitted as a `PlanUpdated` event, which the LSP face turns into an ACP `plan` update.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast

from synapse_lsp import catalog
from synapse_lsp.commands import CommandContext, CommandOutput
from synapse_lsp.events import PlanEntry, PlanUpdated

Status = Literal["pending", "in_progress", "completed"]
STATUSES: tuple[Status, ...] = ("pending", "in_progress", "completed")
_ALLOWED = ", ".join(STATUSES)
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
STATE_KEY = "plan"


class PlanError(ValueError):
    """Wrong usage of `plan`; the message names what is allowed."""


@dataclass(frozen=True)
class PlanState:
    steps: tuple[PlanEntry, ...] = ()
    explanation: str | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "plan": [_item_data(e) for e in self.steps],
            "explanation": self.explanation,
        }

    def unfinished(self) -> tuple[PlanEntry, ...]:
        """The steps not completed (pending or in progress)."""
        return tuple(e for e in self.steps if e.status != "completed")


def _item_data(entry: PlanEntry) -> dict[str, Any]:
    item: dict[str, Any] = {"step": entry.step, "status": entry.status}
    if entry.active_form:
        item["active_form"] = entry.active_form
    return item


@catalog.builtin
class PlanCommand(catalog.Described):
    name = "plan"
    traits = catalog.Traits(
        effect=catalog.Effect.STATE, shape=catalog.Shape.PLAN, prompt_rank=3, aliases=("todo",)
    )
    summary = "Keep a visible step-by-step plan (Codex update_plan shape); alias: todo."
    usage = (
        'plan \'{"explanation": "…", "plan": [{"step": "…", "status": "pending"}]}\''
        " | plan set|add|start|done|clear|show … | plan --step S [--status S] …"
    )

    def help(self) -> str:
        return f"""\
plan [JSON | <<'EOF' JSON EOF | set|add|start|done|clear|show … | --step … ] [--explanation T]
  {self.summary}
  The JSON form replaces the whole plan:
    plan '{{"explanation": "why", "plan": [{{"step": "Read the parser", "status": "completed"}},
                                       {{"step": "Fix quoting", "status": "in_progress"}}]}}'
    (or the same JSON in a heredoc: plan <<'EOF' … EOF). "plan": [] clears the plan.
  Statuses: {_ALLOWED}. At most one step may be in_progress.
  Only the fields explanation and plan (and step, status per item) are accepted.
Short forms (steps are numbered from 1):
  plan set "step one" "step two"   replace the plan; all steps pending
  plan add "another step"          append pending steps
  plan start N                     step N becomes in_progress (the step in progress, if any,
                                   becomes completed)
  plan done [N]                    step N (default: the step in progress) becomes completed
  plan clear                       remove every step
  plan show  (or just: plan)       print the plan
  plan --step "a" --status completed --step "b" --status in_progress --step "c"
                                   replace the plan; a step without --status is pending
  --explanation TEXT               a one-line reason, with any form that changes the plan
The plan is shown to the user and kept for this chat session; update it as you work.
Claude Code's shape sets the same plan: TodoWrite '{{"todos": [...]}}' (TodoWrite --help)."""

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        current = current_plan(ctx.state)
        try:
            updated = _apply(argv, ctx.stdin, current)
        except PlanError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        if updated is None:
            return CommandOutput(render(current), data=current.to_data())
        return store_plan(ctx, updated)


def store_plan(ctx: CommandContext, updated: PlanState) -> CommandOutput:
    """Keep `updated` as the session's plan (the one store of `plan` and `TodoWrite`),
    tell the faces (`PlanUpdated`) and say what it is now."""
    ctx.state[STATE_KEY] = updated.to_data()
    if ctx.emit is not None:
        ctx.emit(PlanUpdated(entries=updated.steps, explanation=updated.explanation))
    return CommandOutput(render(updated, changed=True), data=updated.to_data())


def current_plan(state: dict[str, Any]) -> PlanState:
    """The plan kept in a session's state (empty if none); trusts only valid entries."""
    raw = state.get(STATE_KEY)
    if not isinstance(raw, dict):
        return PlanState()
    items = raw.get("plan")
    forms = (
        [i.get("active_form") if isinstance(i, dict) else None for i in items]
        if isinstance(items, list)
        else []
    )
    stripped = dict(raw)
    if isinstance(items, list):
        stripped["plan"] = [
            {k: v for k, v in i.items() if k != "active_form"} if isinstance(i, dict) else i
            for i in items
        ]
    try:
        plan = parse_update(stripped)
    except PlanError:
        return PlanState()
    steps = tuple(
        PlanEntry(e.step, e.status, form if isinstance(form, str) and form else None)
        for e, form in zip(plan.steps, forms, strict=True)
    )
    return PlanState(steps, plan.explanation)


def render(plan: PlanState, *, changed: bool = False) -> str:
    if not plan.steps:
        if changed:
            return "Plan cleared.\n"
        return 'No plan yet. Set one with: plan set "first step" "second step"\n'
    done = sum(1 for e in plan.steps if e.status == "completed")
    active = sum(1 for e in plan.steps if e.status == "in_progress")
    head = "Plan updated" if changed else "Plan"
    lines = [f"{head}: {done} of {len(plan.steps)} completed, {active} in progress."]
    if plan.explanation:
        lines.append(f"Why: {plan.explanation}")
    lines += [f"{_MARKS[e.status]} {i}. {e.step}" for i, e in enumerate(plan.steps, start=1)]
    return "\n".join(lines) + "\n"


def parse_update(value: Any) -> PlanState:
    """Validate Codex's `UpdatePlanArgs` (a decoded JSON object)."""
    if not isinstance(value, dict):
        raise PlanError('expected a JSON object like {"plan": [{"step": "…", "status": "…"}]}')
    unknown = sorted(set(value) - {"explanation", "plan"})
    if unknown:
        raise PlanError(f"unknown field {unknown[0]!r} (allowed: explanation, plan)")
    if "plan" not in value:
        raise PlanError('missing field "plan" (a list of {"step", "status"} objects)')
    explanation = value.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise PlanError('"explanation" must be a string')
    items = value["plan"]
    if not isinstance(items, list):
        raise PlanError('"plan" must be a list of {"step": "…", "status": "…"} objects')
    steps = tuple(_entry(item, number) for number, item in enumerate(items, start=1))
    _check_one_in_progress(steps)
    return PlanState(steps, explanation or None)


def _entry(item: Any, number: int) -> PlanEntry:
    if not isinstance(item, dict):
        raise PlanError(f'plan item {number} must be an object {{"step": "…", "status": "…"}}')
    unknown = sorted(set(item) - {"step", "status"})
    if unknown:
        raise PlanError(f"plan item {number}: unknown field {unknown[0]!r} (allowed: step, status)")
    step = item.get("step")
    if not isinstance(step, str) or not step.strip():
        raise PlanError(f'plan item {number}: "step" must be a non-empty string')
    return PlanEntry(step.strip(), _status(item.get("status"), number))


def _status(value: Any, number: int) -> Status:
    if value not in STATUSES:
        shown = "missing" if value is None else repr(value)
        raise PlanError(f"step {number}: status {shown} is not one of: {_ALLOWED}")
    return cast(Status, value)


def _check_one_in_progress(steps: tuple[PlanEntry, ...]) -> None:
    active = [str(i) for i, e in enumerate(steps, start=1) if e.status == "in_progress"]
    if len(active) > 1:
        raise PlanError(
            f"at most one step may be in_progress; steps {', '.join(active)} are. "
            "Mark finished steps completed and later ones pending."
        )


def _apply(argv: list[str], stdin: str | None, current: PlanState) -> PlanState | None:
    """The new plan, or None when nothing changes (`plan`, `plan show`)."""
    if not argv and stdin is not None and stdin.strip():
        return _from_json(stdin, "the heredoc")
    if not argv or argv == ["show"]:
        return None
    if argv[0].lstrip().startswith(("{", "[")):
        if len(argv) > 1:
            raise PlanError(
                "the JSON must be one quoted argument: plan '{\"plan\": [...]}' "
                "(or a heredoc: plan <<'EOF' … EOF)"
            )
        return _from_json(argv[0], "the argument")
    args, explanation = _take_explanation(argv)
    if args and args[0] == "--step":
        steps = _flag_form(args)
        return _checked(steps, explanation)
    if not args:
        raise PlanError("--explanation needs a plan change with it (e.g. plan set …)")
    verb, rest = args[0], args[1:]
    keep = explanation if explanation is not None else current.explanation
    if verb == "set":
        if not rest:
            raise PlanError("set needs at least one step (use `plan clear` to empty the plan)")
        return _checked(tuple(PlanEntry(_text(s), "pending") for s in rest), keep)
    if verb == "add":
        if not rest:
            raise PlanError("add needs at least one step")
        added = tuple(PlanEntry(_text(s), "pending") for s in rest)
        return _checked(current.steps + added, keep)
    if verb == "clear":
        _no_more(verb, rest)
        return PlanState((), explanation)
    if verb == "start":
        index = _step_number(rest, current, verb)
        steps = tuple(
            PlanEntry(e.step, "in_progress", e.active_form)
            if i == index
            else PlanEntry(e.step, "completed", e.active_form)
            if e.status == "in_progress"
            else e
            for i, e in enumerate(current.steps)
        )
        return _checked(steps, keep)
    if verb == "done":
        if rest:
            index = _step_number(rest, current, verb)
        else:
            active = [i for i, e in enumerate(current.steps) if e.status == "in_progress"]
            if not active:
                raise PlanError("no step is in progress; say which: plan done N")
            index = active[0]
        steps = tuple(
            PlanEntry(e.step, "completed", e.active_form) if i == index else e
            for i, e in enumerate(current.steps)
        )
        return _checked(steps, keep)
    if verb.startswith("-"):
        raise PlanError(f"unknown option {verb} (known: --step, --status, --explanation)")
    raise PlanError(
        f"unknown subcommand {verb!r} (known: set, add, start, done, clear, show; "
        "or one JSON argument)"
    )


def _from_json(text: str, where: str) -> PlanState:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_update(value)


def _take_explanation(argv: list[str]) -> tuple[list[str], str | None]:
    out: list[str] = []
    explanation: str | None = None
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--explanation":
            if i + 1 >= len(argv):
                raise PlanError("--explanation needs a value")
            explanation = argv[i + 1]
            i += 2
            continue
        if word.startswith("--explanation="):
            explanation = word.partition("=")[2]
        else:
            out.append(word)
        i += 1
    return out, (explanation.strip() or None) if explanation is not None else None


def _flag_form(args: list[str]) -> tuple[PlanEntry, ...]:
    steps: list[PlanEntry] = []
    i = 0
    while i < len(args):
        word, value = args[i], args[i + 1] if i + 1 < len(args) else None
        name = word.partition("=")[0]
        if "=" in word and name in ("--step", "--status"):
            value = word.partition("=")[2]
            i -= 1
        if name == "--step":
            if value is None:
                raise PlanError("--step needs a value")
            steps.append(PlanEntry(_text(value), "pending"))
        elif name == "--status":
            if value is None:
                raise PlanError(f"--status needs a value ({_ALLOWED})")
            if not steps:
                raise PlanError("--status must follow the --step it belongs to")
            steps[-1] = PlanEntry(steps[-1].step, _status(value, len(steps)))
        elif word.startswith("-"):
            raise PlanError(f"unknown option {word} (known: --step, --status, --explanation)")
        else:
            raise PlanError(f"unexpected word {word!r}: each step needs --step before it")
        i += 2
    return tuple(steps)


def _checked(steps: tuple[PlanEntry, ...], explanation: str | None) -> PlanState:
    _check_one_in_progress(steps)
    return PlanState(steps, explanation)


def _text(step: str) -> str:
    if not step.strip():
        raise PlanError("a step must not be empty")
    return step.strip()


def _step_number(rest: list[str], current: PlanState, verb: str) -> int:
    if len(rest) != 1:
        raise PlanError(f"{verb} takes one step number, e.g. plan {verb} 2")
    try:
        number = int(rest[0])
    except ValueError:
        raise PlanError(f"{verb}: {rest[0]!r} is not a step number") from None
    if not 1 <= number <= len(current.steps):
        size = len(current.steps)
        has = f"has {size} step{'s' if size != 1 else ''}" if size else "is empty"
        raise PlanError(f"{verb}: there is no step {number} (the plan {has})")
    return number - 1


def _no_more(verb: str, rest: list[str]) -> None:
    if rest:
        raise PlanError(f"{verb} takes no arguments")
