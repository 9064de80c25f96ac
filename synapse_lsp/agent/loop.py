"""The per-turn loop: user content -> streamed model output -> Bash tool calls -> ... -> answer.

`Loop` owns one conversation's history (a chat session's, or a sub-agent's) and
runs a turn over it, reporting everything through `emit`. Every `tool_use` in a
message is answered with a `tool_result`, in call order; the calls run in order,
except that adjacent `task:*` calls run concurrently (at most `maxParallelTasks`
at once, the rest queue; their permission questions are asked one at a time). On
cancel the partial answer is kept and the unanswered calls get "[Cancelled]"
results, so the history always stays valid for the next call.

Hooks (hooks.py): a turn's `HookScope` makes PostToolUse hooks run after each call
that ran (their messages join its result), and a hook's `continue: false` ends the turn
after the calls of that step.

Guards: `maxTurns` model calls per turn; the breaker (`maxToolFailures` failing
calls in a row: the model is told in the last result, the user by a Notice, and the
model gets one more call to report, with no more commands run); and, for a chat
session's own loop, one reminder when the turn ends with plan steps not completed
(`todoReminder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp import catalog
from synapse_lsp.agent import prompts, stages
from synapse_lsp.agent.compaction import (
    DEFAULT_CONTEXT_WINDOW,
    CompactionSettings,
    Offload,
    maybe_compact,
)
from synapse_lsp.agent.history import (
    CANCELLED_RESULT,
    NOT_RUN_RESULT,
    Message,
    add_message,
    text_of,
    tool_result,
    with_cache_breakpoint,
)
from synapse_lsp.agent.model import StreamDone, StreamRetry, StreamText, StreamThinking
from synapse_lsp.agent.pricing import add_spend
from synapse_lsp.agent.tool_names import unknown_tool_result
from synapse_lsp.builtins.plan import current_plan
from synapse_lsp.cmdline import first_word
from synapse_lsp.commands import FailureCategory, Layer, OutsideEnv, Step
from synapse_lsp.config import as_source
from synapse_lsp.errors import ModelError
from synapse_lsp.events import (
    NOTICE_MAX_TURNS,
    NOTICE_TODO_REMINDER,
    NOTICE_TOOL_FAILURES,
    RUNNING_TOOL_CALL,
    Event,
    Notice,
    PlanUpdated,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    Usage,
    UsageUpdated,
)
from synapse_lsp.policy import hooks

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.config import Settings, SettingsSource
    from synapse_lsp.router import BashRouter

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]

# Events a command may raise through `ctx.emit` that pass on to the consumer.
_EVENT_CLASSES = (
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolOutput,
    ToolCallFinished,
    UsageUpdated,
    Notice,
    PlanUpdated,
)

BREAKER_NOT_RUN = (
    "Not run: {count} tool calls in a row failed before this one, so Synapse stopped "
    "running commands for this turn (setting maxToolFailures)."
)


def breaker_note(count: int) -> str:
    return (
        f"\n[Synapse] {count} tool calls in a row have failed (the limit, setting "
        "maxToolFailures). No more commands run this turn. Do not call tools now: tell the "
        "user in a few lines what you tried, what failed and what you need from them."
    )


def reminder_text(unfinished: list[str]) -> str:
    listed = "\n".join(f"- {step}" for step in unfinished)
    return (
        "<system-reminder>Your plan still has steps not completed:\n"
        f"{listed}\nIf work remains, continue with it now. If a step is done or no longer "
        "needed, update the plan (plan / TodoWrite) so it matches, then give your final "
        "answer. This reminder is sent once.</system-reminder>"
    )


def is_task_call(block: dict[str, Any]) -> bool:
    """A `Bash` call whose line starts a sub-agent (`task:*`; it does not restart the
    shell)."""
    if block.get("name") != "Bash":
        return False
    tool_input = block.get("input") or {}
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str) or tool_input.get("restart"):
        return False
    found = catalog.traits_of(first_word(command.strip()))
    return found is not None and found.starts_agent


def call_groups(tool_uses: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The calls in order, adjacent `task:*` calls grouped (a group runs concurrently)."""
    groups: list[list[dict[str, Any]]] = []
    for block in tool_uses:
        if groups and is_task_call(block) and is_task_call(groups[-1][-1]):
            groups[-1].append(block)
        else:
            groups.append([block])
    return groups


class SerialGate:
    """A permission gate whose questions are asked one at a time: concurrent callers
    (parallel `task:*` calls and their sub-agents) wait for the `lock`."""

    def __init__(self, inner: Any, lock: asyncio.Lock) -> None:
        self.inner = inner
        self.lock = lock

    async def check(
        self, command: str, layer: Layer, cwd: Path, steps: Sequence[Step] = ()
    ) -> str | None:
        async with self.lock:
            result: str | None = await self.inner.check(command, layer, cwd, steps)
            return result

    def runs_outside(self, command: str) -> bool:
        method = getattr(self.inner, "runs_outside", None)
        return bool(method(command)) if method is not None else False

    async def escalate(
        self, command: str, cwd: Path, why: str, env: OutsideEnv | None = None
    ) -> bool:
        method = getattr(self.inner, "escalate", None)
        if method is None:
            return False
        async with self.lock:
            return bool(await method(command, cwd, why, env))


@dataclass
class _Outcome:
    result: dict[str, Any]
    status: str  # ToolStatus, or "failed" for a call that could not run


@dataclass
class LoopResult:
    stop_reason: str
    usage: Usage
    final_text: str = ""
    error: str | None = None
    model_calls: int = 0


class Loop:
    """One conversation's history and the model <-> router loop over it."""

    def __init__(
        self,
        *,
        router: BashRouter,
        settings: Settings | SettingsSource,
        model: Callable[[], ModelClient],
        system: Callable[[], list[dict[str, Any]]],
        parent_tool_call_id: str | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        on_message: Callable[[Message], None] | None = None,
        on_compaction: Callable[[list[Message]], None] | None = None,
        max_turns: int | None = None,
        todo_reminder: bool = False,
        notes: Callable[[], str | None] | None = None,
    ) -> None:
        self.router = router
        self.settings_source = as_source(settings)
        self.model = model
        self._system = system
        self.parent = parent_tool_call_id
        self.messages: list[Message] = []
        self.context_window = context_window
        self.on_message = on_message
        self.on_compaction = on_compaction
        self.turn_usage = Usage()
        self.current_tool_call_id: str | None = None
        self.last_context_tokens = 0
        self.model_calls = 0
        self.max_turns = max_turns  # None: the setting maxTurns
        self.todo_reminder = todo_reminder  # a chat session's own loop, not a sub-agent's
        # Pending notes for the model (editor feedback): taken once, at the end of the next
        # tool results or at the start of the next prompt (`_noted`).
        self.notes = notes
        # Permission questions of concurrent calls (and their sub-agents) one at a time.
        self.ask_lock = asyncio.Lock()
        self._failures = 0  # failing tool calls in a row, this turn
        self.tripped = False  # the breaker tripped this turn: no more commands run
        self._reminded: Any = None  # the plan the last reminder was about
        # Usage per model name (pricing.py); the owner resets it per turn, a sub-agent's
        # loop shares its parent's. `offload`: where compaction saves large outputs.
        self.model_usage: dict[str, Usage] = {}
        self.offload: Offload | None = None
        self.before_request: Callable[[], Awaitable[None]] | None = None  # a chat session's

    def add(self, message: Message) -> None:
        add_message(self.messages, message)
        if self.on_message is not None:
            self.on_message(message)

    def tag(self, event: Event) -> Event:
        if self.parent is not None and getattr(event, "parent_tool_call_id", "") is None:
            return dataclasses.replace(event, parent_tool_call_id=self.parent)  # type: ignore[arg-type]
        return event

    @property
    def settings(self) -> Settings:
        """The live settings: a changed `maxTurns` applies from the next model call."""
        return self.settings_source()

    @property
    def turn_limit(self) -> int:
        return self.max_turns if self.max_turns is not None else self.settings.max_turns

    async def run(self, user_content: list[dict[str, Any]], emit: Emit) -> LoopResult:
        self.turn_usage = Usage()
        self._failures = 0
        self.tripped = False
        self.add({"role": "user", "content": self._noted(user_content, first=True)})
        final_text = ""
        reminded = False
        tripped = False  # the breaker: no command runs any more this turn
        limit = self.turn_limit
        for _ in range(limit):
            if self.before_request is not None:  # the agent's commands are done until
                await self.before_request()  # the model answers (agent/hand_edits.py)
            await self._compact(emit)
            done = await self._call_model(emit)
            text = text_of(done.content)
            if text.strip():
                final_text = text
            if done.content:
                self.add({"role": "assistant", "content": done.content})
            tool_uses = [b for b in done.content if b.get("type") == "tool_use"]
            if tool_uses and tripped:
                count = self._failures
                note = BREAKER_NOT_RUN.format(count=count)
                self.add(
                    {
                        "role": "user",
                        "content": [tool_result(b["id"], note, True) for b in tool_uses],
                    }
                )
                return self._result("end_turn", final_text)
            if tool_uses:
                results = await self._run_tools(tool_uses, emit, cut=done.stop_reason)
                self.add({"role": "user", "content": self._noted(results)})
                if (scope := hooks.current()) is not None and scope.halt is not None:
                    if self.parent is None:  # a sub-agent's loop just ends, its parent says so
                        emit(Notice(f"A hook stopped the turn: {scope.halt}", "warning"))
                    return self._result("end_turn", final_text)
                if done.stop_reason == "refusal":
                    emit(self.tag(Notice("The model declined to continue (refusal).", "warning")))
                    return self._result("refusal", final_text)
                if self._breaker_tripped():
                    tripped = True
                    emit(
                        self.tag(
                            Notice(
                                f"{self._failures} tool calls in a row failed: stopped running "
                                "commands for this turn (setting maxToolFailures); the model "
                                "was told to report what went wrong.",
                                "warning",
                                code=NOTICE_TOOL_FAILURES,
                            )
                        )
                    )
                continue
            if done.stop_reason == "max_tokens":
                emit(
                    self.tag(
                        Notice(
                            f"The answer was cut at the output limit ({self.settings.max_tokens} "
                            "tokens). Say 'continue' to let it go on.",
                            "warning",
                        )
                    )
                )
                return self._result("max_tokens", final_text)
            if done.stop_reason == "refusal":
                emit(self.tag(Notice("The model declined to answer (refusal).", "warning")))
                return self._result("refusal", final_text)
            if not reminded and not tripped and self._remind(emit):
                reminded = True
                continue
            return self._result("end_turn", final_text)
        emit(
            self.tag(
                Notice(
                    f"Stopped after {limit} model calls in one turn (the turn limit, "
                    + (
                        "--max-turns of this task"
                        if self.max_turns is not None
                        else "setting maxTurns"
                    )
                    + "). Say 'continue' to go on.",
                    "warning",
                    code=NOTICE_MAX_TURNS,
                )
            )
        )
        return self._result("max_turns", final_text)

    def _noted(self, content: list[dict[str, Any]], *, first: bool = False) -> list[dict[str, Any]]:
        """`content` with the pending note as a text block: before a prompt's text, after
        tool results (the API wants them first)."""
        note = self.notes() if self.notes is not None else None
        if not note:
            return content
        block = {"type": "text", "text": note}
        return [block, *content] if first else [*content, block]

    def _breaker_tripped(self) -> bool:
        return self.tripped

    def _remind(self, emit: Emit) -> bool:
        """Once per turn, when the plan has steps not completed (and this plan was not
        reminded of already): tell the user, add the reminder; True = call the model again."""
        if not self.todo_reminder or not self.settings.todo_reminder:
            return False
        plan = current_plan(self.router.state)
        unfinished = plan.unfinished()
        if not unfinished or plan == self._reminded:
            return False
        self._reminded = plan
        steps = [e.step for e in unfinished]
        emit(
            self.tag(
                Notice(
                    f"The plan has {len(steps)} step{'s' if len(steps) != 1 else ''} not "
                    "completed: reminding the model once (setting todoReminder).",
                    "info",
                    code=NOTICE_TODO_REMINDER,
                )
            )
        )
        self.add({"role": "user", "content": [{"type": "text", "text": reminder_text(steps)}]})
        return True

    async def _compact(self, emit: Emit) -> None:
        """Compact the history when the last call came close to the context window."""
        compacted = await maybe_compact(
            self.messages,
            context_tokens=self.last_context_tokens,
            model=self.model,
            settings=CompactionSettings(context_window=self.context_window),
            offload=self.offload,
        )
        if compacted is None:
            return
        self.messages = compacted.messages
        self.last_context_tokens = compacted.context_tokens
        self.turn_usage = self.turn_usage + compacted.usage
        add_spend(self.model_usage, self.model().model, compacted.usage)
        if self.on_compaction is not None:
            self.on_compaction(self.messages)
        emit(self.tag(compacted.notice))

    def _result(self, stop_reason: str, final_text: str) -> LoopResult:
        return LoopResult(stop_reason, self.turn_usage, final_text, model_calls=self.model_calls)

    async def _call_model(self, emit: Emit) -> StreamDone:
        model = self.model()
        parts: list[str] = []
        done: StreamDone | None = None
        parent = self.parent
        self.model_calls += 1
        await stages.at("request", parent)
        stream = model.stream(
            system=self._system(),
            messages=with_cache_breakpoint(self.messages),
            tools=[prompts.bash_tool()],
        )
        try:
            async with contextlib.aclosing(stream):
                async for item in stream:
                    if isinstance(item, StreamText):
                        if not parts:
                            await stages.at("streaming", parent)
                        parts.append(item.text)
                        emit(TextDelta(item.text, parent))
                        # Let the consumer run now: the SDK parses a buffered burst without
                        # yielding, which would hold deltas back until the burst ends.
                        await asyncio.sleep(0)
                    elif isinstance(item, StreamThinking):
                        emit(ThinkingDelta(item.text, parent))
                        await asyncio.sleep(0)
                    elif isinstance(item, StreamRetry):
                        discard = " The partial answer above is discarded." if parts else ""
                        emit(
                            Notice(
                                f"Model API: {item.cause}. Retrying in {item.delay:.1f} s "
                                f"(attempt {item.attempt + 1} of {item.max_attempts}).{discard}",
                                "warning",
                                parent,
                                discards_text=bool(parts),
                            )
                        )
                        parts.clear()
                    elif isinstance(item, StreamDone):
                        done = item
                        await stages.at("response", parent)
        except asyncio.CancelledError:
            partial = "".join(parts).rstrip()
            if partial:
                self.add(
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": partial + "\n\n[interrupted by the user]"}
                        ],
                    }
                )
            raise
        if done is None:  # pragma: no cover - stream() always ends with StreamDone or raises
            raise ModelError("The model stream ended without a message.")
        self.turn_usage = self.turn_usage + done.usage
        add_spend(self.model_usage, model.model, done.usage)
        u = done.usage
        self.last_context_tokens = (
            u.input_tokens
            + u.cache_creation_input_tokens
            + u.cache_read_input_tokens
            + u.output_tokens
        )
        emit(UsageUpdated(self.turn_usage, parent))
        return done

    async def _run_tools(
        self, tool_uses: list[dict[str, Any]], emit: Emit, cut: str
    ) -> list[dict[str, Any]]:
        done: dict[str, _Outcome] = {}
        running: set[str] = set()  # started, not finished
        try:
            for group in call_groups(tool_uses):
                if self._breaker_tripped():
                    note = BREAKER_NOT_RUN.format(count=self._failures)
                    for block in group:
                        done[block["id"]] = _Outcome(tool_result(block["id"], note, True), "failed")
                    continue
                if len(group) == 1 or self.settings.max_parallel_tasks <= 1:
                    for block in group:
                        if self._breaker_tripped():
                            note = BREAKER_NOT_RUN.format(count=self._failures)
                            done[block["id"]] = _Outcome(
                                tool_result(block["id"], note, True), "failed"
                            )
                            continue
                        await self._run_one(block, emit, cut, done, running)
                        self._count(done[block["id"]])
                else:
                    await self._run_parallel(group, emit, cut, done, running)
                    for block in group:
                        self._count(done[block["id"]])
        except asyncio.CancelledError:
            results: list[dict[str, Any]] = []
            for block in tool_uses:
                if block["id"] in done:
                    results.append(done[block["id"]].result)
                    continue
                started = block["id"] in running
                text = CANCELLED_RESULT if started else NOT_RUN_RESULT
                results.append(tool_result(block["id"], text, True))
                if started:
                    emit(
                        ToolCallFinished(
                            block["id"],
                            "cancelled",
                            None,
                            True,
                            text,
                            category=FailureCategory.CANCELLED.value,
                            parent_tool_call_id=self.parent,
                        )
                    )
            self.add({"role": "user", "content": results})
            raise
        finally:
            self.current_tool_call_id = None
        return [done[block["id"]].result for block in tool_uses]

    def _count(self, outcome: _Outcome) -> None:
        """The breaker's count: a failing call adds one, any other resets it (a denial or
        a cancel is the user's word, not a failure, and leaves it as it is)."""
        if self.tripped or outcome.status in ("denied", "cancelled"):
            return  # once tripped, the count stays (calls of its group that ran after)
        if not outcome.result.get("is_error"):
            self._failures = 0
            return
        self._failures += 1
        limit = self.settings.max_tool_failures
        if limit > 0 and self._failures >= limit:
            self.tripped = True
            outcome.result["content"] = str(outcome.result["content"]) + breaker_note(
                self._failures
            )

    async def _run_parallel(
        self,
        group: list[dict[str, Any]],
        emit: Emit,
        cut: str,
        done: dict[str, _Outcome],
        running: set[str],
    ) -> None:
        """Run adjacent `task:*` calls concurrently (at most `maxParallelTasks` at once);
        their permission questions go through one lock, so they are asked one at a time.
        Cancelled, every one of them is cancelled and waited for."""
        slots = asyncio.Semaphore(max(1, self.settings.max_parallel_tasks))
        router = self.router
        if router.permission is not None:
            router = router.derive(permission=SerialGate(router.permission, self.ask_lock))

        async def one(block: dict[str, Any]) -> None:
            async with slots:
                await self._run_one(block, emit, cut, done, running, router=router)

        tasks = [asyncio.create_task(one(block)) for block in group]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _run_one(
        self,
        block: dict[str, Any],
        emit: Emit,
        cut: str,
        done: dict[str, _Outcome],
        running: set[str],
        router: BashRouter | None = None,
    ) -> None:
        """Run one call; its result goes into `done` (`running` holds it meanwhile)."""
        tool_id: str = block["id"]
        running.add(tool_id)
        token = RUNNING_TOOL_CALL.set(tool_id)  # sub-agents, hooks and questions read it
        try:
            done[tool_id] = await self._route_one(block, emit, cut, router or self.router)
        finally:
            RUNNING_TOOL_CALL.reset(token)
        running.discard(tool_id)  # a cancelled call stays in `running`: its result says so

    async def _route_one(
        self, block: dict[str, Any], emit: Emit, cut: str, router: BashRouter
    ) -> _Outcome:
        tool_id: str = block["id"]
        parent = self.parent
        tool_input = block.get("input") or {}
        command = tool_input.get("command")
        problem: str | None = None
        if block.get("name") != "Bash":
            problem = unknown_tool_result(block.get("name"), tool_input)
        elif "_incomplete_json" in tool_input and cut == "max_tokens":
            problem = (
                "Not run: your response was cut off (max_tokens) before this command was "
                "complete. Send it again, shorter (e.g. write big files in parts)."
            )
        elif "_incomplete_json" in tool_input:
            raw = str(tool_input["_incomplete_json"])
            shown_raw = raw if len(raw) <= 200 else raw[:200] + "…"
            problem = (
                "Not run: the tool input was malformed JSON (the response was complete, not "
                f'cut off): {shown_raw}\nHint: Call Bash with a JSON object whose "command" '
                'is one string, e.g. Bash(command="ls -la"); escape quotes and newlines '
                "inside it."
            )
        elif not isinstance(command, str) or not command.strip():
            problem = 'Invalid input: Bash needs a non-empty string "command".'
        if problem is not None:
            shown = command if isinstance(command, str) else json.dumps(tool_input)[:200]
            emit(ToolCallStarted(tool_id, shown, False, parent))
            emit(
                ToolCallFinished(
                    tool_id, "failed", None, True, problem, None, "invalid_usage", {}, parent
                )
            )
            return _Outcome(tool_result(tool_id, problem, True), "failed")
        assert isinstance(command, str)
        restart = bool(tool_input.get("restart", False))
        emit(ToolCallStarted(tool_id, command, restart, parent))
        self.current_tool_call_id = tool_id
        cwd = router.shell.cwd  # where the line's paths are (PostToolUse hooks)

        def on_output(stream: str, chunk: str) -> None:
            emit(ToolOutput(tool_id, "stderr" if stream == "stderr" else "stdout", chunk, parent))

        def on_event(event: Any) -> None:
            if isinstance(event, _EVENT_CLASSES):
                emit(self.tag(event))

        try:
            await stages.at("tool_use", parent)
            routed = await router.route(
                command, restart=restart, on_output=on_output, emit=on_event
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing command must not end the conversation
            log.exception("command %r raised", command)
            text = f"[Error] Synapse could not run this command: {type(exc).__name__}: {exc}"
            emit(ToolCallFinished(tool_id, "failed", None, True, text, None, None, {}, parent))
            return _Outcome(tool_result(tool_id, text, True), "failed")
        status = (
            "cancelled"
            if routed.category is FailureCategory.CANCELLED
            else "denied"
            if routed.category is FailureCategory.PERMISSION_DENIED
            else ("failed" if routed.is_error else "completed")
        )
        text = routed.text
        scope = hooks.current()
        if scope is not None and status in ("completed", "failed"):
            response = {
                "stdout": routed.stdout,
                "stderr": routed.stderr,
                "exit_code": routed.exit_code,
                "interrupted": routed.category is FailureCategory.TIMEOUT,
                "is_error": routed.is_error,
            }
            text += await scope.hooks.post_tool_use(scope, command, cwd, response)
        emit(
            ToolCallFinished(
                tool_id,
                status,  # type: ignore[arg-type]
                routed.exit_code,
                routed.is_error,
                text,
                routed.layer.value,
                routed.category.value if routed.category else None,
                routed.data,
                parent,
                routed.diffs,
            )
        )
        return _Outcome(tool_result(tool_id, text, routed.is_error, routed.attachments), status)
