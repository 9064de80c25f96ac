"""The per-turn loop: user content -> streamed model output -> Bash tool calls -> ... -> answer.

`Loop` owns one conversation's history (a chat session's, or a sub-agent's) and
runs a turn over it, reporting everything through `emit`. Every `tool_use` in a
message is routed in order and answered with a `tool_result`; on cancel the
partial answer is kept and the unanswered calls get "[Cancelled]" results, so
the history always stays valid for the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import prompts
from synapse_lsp.agent.compaction import (
    DEFAULT_CONTEXT_WINDOW,
    CompactionSettings,
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
from synapse_lsp.agent.tool_names import unknown_tool_result
from synapse_lsp.commands import FailureCategory
from synapse_lsp.config import as_source
from synapse_lsp.errors import ModelError
from synapse_lsp.events import (
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

    async def run(self, user_content: list[dict[str, Any]], emit: Emit) -> LoopResult:
        self.turn_usage = Usage()
        self.add({"role": "user", "content": user_content})
        final_text = ""
        for _ in range(self.settings.max_turns):
            await self._compact(emit)
            done = await self._call_model(emit)
            text = text_of(done.content)
            if text.strip():
                final_text = text
            if done.content:
                self.add({"role": "assistant", "content": done.content})
            tool_uses = [b for b in done.content if b.get("type") == "tool_use"]
            if tool_uses:
                results = await self._run_tools(tool_uses, emit, cut=done.stop_reason)
                self.add({"role": "user", "content": results})
                if done.stop_reason == "refusal":
                    emit(self.tag(Notice("The model declined to continue (refusal).", "warning")))
                    return self._result("refusal", final_text)
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
            return self._result("end_turn", final_text)
        emit(
            self.tag(
                Notice(
                    f"Stopped after {self.settings.max_turns} model calls in one turn (the "
                    "turn limit, setting maxTurns). Say 'continue' to go on.",
                    "warning",
                )
            )
        )
        return self._result("max_turns", final_text)

    async def _compact(self, emit: Emit) -> None:
        """Compact the history when the last call came close to the context window."""
        compacted = await maybe_compact(
            self.messages,
            context_tokens=self.last_context_tokens,
            model=self.model,
            settings=CompactionSettings(context_window=self.context_window),
        )
        if compacted is None:
            return
        self.messages = compacted.messages
        self.last_context_tokens = compacted.context_tokens
        self.turn_usage = self.turn_usage + compacted.usage
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
        stream = model.stream(
            system=self._system(),
            messages=with_cache_breakpoint(self.messages),
            tools=[prompts.bash_tool()],
        )
        try:
            async with contextlib.aclosing(stream):
                async for item in stream:
                    if isinstance(item, StreamText):
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
        results: list[dict[str, Any]] = []
        try:
            for block in tool_uses:
                results.append(await self._run_one(block, emit, cut))
        except asyncio.CancelledError:
            answered = {r["tool_use_id"] for r in results}
            for block in tool_uses:
                if block["id"] in answered:
                    continue
                running = block["id"] == self.current_tool_call_id
                text = CANCELLED_RESULT if running else NOT_RUN_RESULT
                results.append(tool_result(block["id"], text, True))
                if running:
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
        return results

    async def _run_one(self, block: dict[str, Any], emit: Emit, cut: str) -> dict[str, Any]:
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
            return tool_result(tool_id, problem, True)
        assert isinstance(command, str)
        restart = bool(tool_input.get("restart", False))
        emit(ToolCallStarted(tool_id, command, restart, parent))
        self.current_tool_call_id = tool_id

        def on_output(stream: str, chunk: str) -> None:
            emit(ToolOutput(tool_id, "stderr" if stream == "stderr" else "stdout", chunk, parent))

        def on_event(event: Any) -> None:
            if isinstance(event, _EVENT_CLASSES):
                emit(self.tag(event))

        try:
            routed = await self.router.route(
                command, restart=restart, on_output=on_output, emit=on_event
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing command must not end the conversation
            log.exception("command %r raised", command)
            text = f"[Error] Synapse could not run this command: {type(exc).__name__}: {exc}"
            emit(ToolCallFinished(tool_id, "failed", None, True, text, None, None, {}, parent))
            return tool_result(tool_id, text, True)
        status = (
            "cancelled"
            if routed.category is FailureCategory.CANCELLED
            else "denied"
            if routed.category is FailureCategory.PERMISSION_DENIED
            else ("failed" if routed.is_error else "completed")
        )
        emit(
            ToolCallFinished(
                tool_id,
                status,  # type: ignore[arg-type]
                routed.exit_code,
                routed.is_error,
                routed.text,
                routed.layer.value,
                routed.category.value if routed.category else None,
                routed.data,
                parent,
            )
        )
        return {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": routed.text,
            "is_error": routed.is_error,
        }
