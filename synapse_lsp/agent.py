"""The agent loop: user text -> streamed model output -> Bash tool calls -> ... -> answer.

One core, two faces: the REPL and the LSP server both consume `ChatSession.run_turn`'s
event stream (events.py). A turn runs in a worker task that feeds a queue, so
events from inside a tool call (live output, plan updates, a sub-agent's whole
stream) reach the consumer while the call is still running, and `cancel()` can
interrupt any await: the model stream is closed, the running command is
interrupted (cancelling the task awaiting `router.route` interrupts it), and the
history is repaired so every `tool_use` has a `tool_result`.

Sub-agents (`task:<type>`): the session gives its router a `subagent` runner; a
child loop gets its own history, a type-specific system prompt, a router derived
with `in_subagent=True` (so `task:*` is refused inside it) and emits its events
tagged with the `task:*` tool call's id. Its final text is the tool result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from synapse_lsp import prompts
from synapse_lsp.commands import CommandOutput, FailureCategory, Layer
from synapse_lsp.errors import ModelError, SessionBusyError
from synapse_lsp.events import (
    Event,
    Notice,
    TextDelta,
    ThinkingDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    Usage,
    UsageUpdated,
    UserMessage,
)
from synapse_lsp.model import StreamDone, StreamRetry, StreamText, StreamThinking

if TYPE_CHECKING:
    from synapse_lsp.config import Settings
    from synapse_lsp.model import ModelClient
    from synapse_lsp.router import BashRouter
    from synapse_lsp.sessions import SessionStore

log = logging.getLogger(__name__)

Message = dict[str, Any]
Emit = Callable[[Event], None]

DEFAULT_CONTEXT_WINDOW = 200_000
COMPACT_RATIO = 0.8
KEEP_RECENT_TURNS = 2
MAX_SELECTION_CHARS = 20_000
CANCELLED_RESULT = (
    "[Cancelled] The user cancelled this command while it ran; it was interrupted. "
    "Do not retry it unless the user asks."
)
NOT_RUN_RESULT = "[Cancelled] Not run: the user cancelled the turn before this command started."
INTERRUPTED_RESULT = (
    "[Interrupted] Synapse stopped before this command finished; no result was recorded."
)
_EVENT_CLASSES = (
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolOutput,
    ToolCallFinished,
    UsageUpdated,
    Notice,
)


@dataclass(frozen=True)
class Selection:
    uri: str
    text: str
    # LSP range, 0-based, as the editor sent it
    start_line: int
    start_character: int
    end_line: int
    end_character: int


@dataclass(frozen=True)
class TurnContext:
    """What the editor knows, given to the model alongside the user's text."""

    active_file: str | None = None
    selection: Selection | None = None
    open_files: tuple[str, ...] = field(default_factory=tuple)


# ------------------------------------------------------------------ history


def _tool_result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": text,
        "is_error": is_error,
    }


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def add_message(messages: list[Message], message: Message) -> None:
    """Append, merging into the previous message when the roles repeat (a failed turn
    leaves the user's text last; the next prompt joins it instead of breaking alternation)."""
    if messages and messages[-1]["role"] == message["role"]:
        last = messages[-1]
        last["content"] = _blocks(last["content"]) + _blocks(message["content"])
    else:
        messages.append({"role": message["role"], "content": _blocks(message["content"])})


def repair_history(messages: Iterable[Message]) -> list[Message]:
    """Merged roles, and a tool_result for every tool_use (a crash may have left none)."""
    out: list[Message] = []
    for message in messages:
        add_message(out, json.loads(json.dumps(message)))
    fixed: list[Message] = []
    for index, message in enumerate(out):
        fixed.append(message)
        if message["role"] != "assistant":
            continue
        ids = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        following = out[index + 1] if index + 1 < len(out) else None
        answered = set()
        if following is not None and following["role"] == "user":
            answered = {
                b.get("tool_use_id") for b in following["content"] if b.get("type") == "tool_result"
            }
        missing = [_tool_result(i, INTERRUPTED_RESULT, True) for i in ids if i not in answered]
        if not missing:
            continue
        if following is not None and following["role"] == "user":
            following["content"] = missing + following["content"]
        else:
            fixed.append({"role": "user", "content": missing})
    return fixed


def _with_cache_breakpoint(messages: list[Message]) -> list[Message]:
    """A shallow copy whose last block carries cache_control (incremental prompt caching)."""
    if not messages:
        return messages
    last = messages[-1]
    content = _blocks(last["content"])
    for i in range(len(content) - 1, -1, -1):
        if content[i].get("type") in ("text", "tool_result", "tool_use", "image"):
            content = [
                *content[:i],
                {**content[i], "cache_control": prompts.CACHE},
                *content[i + 1 :],
            ]
            return [*messages[:-1], {"role": last["role"], "content": content}]
    return messages


def _uri_to_path(uri: str) -> str:
    if uri.startswith("file://"):
        return unquote(urlparse(uri).path)
    return uri


def context_text(context: TurnContext) -> str | None:
    """The editor context as the model sees it, or None when there is nothing to say."""
    lines: list[str] = []
    if context.active_file:
        lines.append(f"Active file: {_uri_to_path(context.active_file)}")
    if context.open_files:
        lines.append("Open files: " + ", ".join(_uri_to_path(f) for f in context.open_files))
    sel = context.selection
    if sel is not None and sel.text:
        text = sel.text
        if len(text) > MAX_SELECTION_CHARS:
            text = text[:MAX_SELECTION_CHARS] + "\n[... selection cut ...]"
        lines.append(
            f"Selected text in {_uri_to_path(sel.uri)} (lines {sel.start_line + 1}-"
            f"{sel.end_line + 1}):\n```\n{text}\n```"
        )
    if not lines:
        return None
    return prompts.editor_context_text("\n".join(lines))


def estimate_tokens(messages: list[Message]) -> int:
    return len(json.dumps(messages)) // 4


def _text_of(content: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def _transcript_for_summary(messages: list[Message], limit: int = 4000) -> str:
    parts: list[str] = []
    for message in messages:
        who = "User" if message["role"] == "user" else "Assistant"
        for block in _blocks(message["content"]):
            kind = block.get("type")
            if kind == "text":
                parts.append(f"{who}: {block.get('text', '')}")
            elif kind == "tool_use":
                parts.append(f"Assistant ran: {block.get('input', {}).get('command', '')}")
            elif kind == "tool_result":
                body = block.get("content", "")
                if isinstance(body, list):
                    body = _text_of(body)
                body = str(body)
                if len(body) > limit:
                    body = body[: limit // 2] + "\n[...]\n" + body[-limit // 2 :]
                error = " (error)" if block.get("is_error") else ""
                parts.append(f"Result{error}:\n{body}")
    return "\n\n".join(parts)


# ------------------------------------------------------------- the loop


@dataclass
class LoopResult:
    stop_reason: str
    usage: Usage
    final_text: str = ""
    error: str | None = None
    model_calls: int = 0


class _ExploreGate:
    """task:explore is read-only: only reading, listing and searching may run."""

    READ_ONLY_BUILTINS = frozenset({"read", "command:search", "skill:search", "skill:load"})
    GIT_READ = frozenset({"log", "show", "diff", "status", "grep", "blame", "ls-files", "branch"})
    DANGEROUS = ("-delete", "-exec", "-execdir", "-ok", "-fprint", "-fls")

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def check(self, command: str, layer: Layer, cwd: Path) -> str | None:
        reason = self._deny(command, layer)
        if reason is not None:
            return reason
        if self.inner is not None:
            result: str | None = await self.inner.check(command, layer, cwd)
            return result
        return None

    def _deny(self, command: str, layer: Layer) -> str | None:
        from synapse_lsp import cmdline

        words = command.split()
        first = cmdline.first_word(command)
        refusal = (
            "task:explore is read-only; this command may change things. Report what should "
            "be done instead."
        )
        if layer is Layer.AGENT:
            name = "command:search" if words[:2] == ["tools", "search"] else first
            if name in self.READ_ONLY_BUILTINS or words[:2] in (
                ["skill", "search"],
                ["skill", "load"],
            ):
                return None
            return refusal
        if layer is Layer.EXTENSION:
            return refusal
        if any(w.startswith(self.DANGEROUS) for w in words):
            return refusal
        if first == "git" and len(words) > 1 and words[1] in self.GIT_READ:
            return None if not cmdline.has_redirection(command) else refusal
        try:
            from synapse_lsp.summary import summarize
        except ImportError:  # pragma: no cover - summaries are part of the package
            return refusal
        parsed = summarize(command).parsed
        if parsed and all(p.get("type") in ("read", "list_files", "search") for p in parsed):
            return None
        return refusal


class _Loop:
    """One conversation's history and the model <-> router loop over it."""

    def __init__(
        self,
        *,
        router: BashRouter,
        settings: Settings,
        model: Callable[[], ModelClient],
        system: Callable[[], list[dict[str, Any]]],
        parent_tool_call_id: str | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        on_message: Callable[[Message], None] | None = None,
        on_compaction: Callable[[list[Message]], None] | None = None,
    ) -> None:
        self.router = router
        self.settings = settings
        self._model = model
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

    def _tag(self, event: Event) -> Event:
        if self.parent is not None and getattr(event, "parent_tool_call_id", "") is None:
            return dataclasses.replace(event, parent_tool_call_id=self.parent)  # type: ignore[arg-type]
        return event

    async def run(self, user_content: list[dict[str, Any]], emit: Emit) -> LoopResult:
        self.turn_usage = Usage()
        self.add({"role": "user", "content": user_content})
        final_text = ""
        for _ in range(self.settings.max_turns):
            await self._maybe_compact(emit)
            done = await self._call_model(emit)
            text = _text_of(done.content)
            if text.strip():
                final_text = text
            if done.content:
                self.add({"role": "assistant", "content": done.content})
            tool_uses = [b for b in done.content if b.get("type") == "tool_use"]
            if tool_uses:
                results = await self._run_tools(tool_uses, emit, cut=done.stop_reason)
                self.add({"role": "user", "content": results})
                if done.stop_reason == "refusal":
                    emit(self._tag(Notice("The model declined to continue (refusal).", "warning")))
                    return self._result("refusal", final_text)
                continue
            if done.stop_reason == "max_tokens":
                emit(
                    self._tag(
                        Notice(
                            f"The answer was cut at the output limit ({self.settings.max_tokens} "
                            "tokens). Say 'continue' to let it go on.",
                            "warning",
                        )
                    )
                )
                return self._result("max_tokens", final_text)
            if done.stop_reason == "refusal":
                emit(self._tag(Notice("The model declined to answer (refusal).", "warning")))
                return self._result("refusal", final_text)
            return self._result("end_turn", final_text)
        emit(
            self._tag(
                Notice(
                    f"Stopped after {self.settings.max_turns} model calls in one turn (the "
                    "turn limit, setting maxTurns). Say 'continue' to go on.",
                    "warning",
                )
            )
        )
        return self._result("max_turns", final_text)

    def _result(self, stop_reason: str, final_text: str) -> LoopResult:
        return LoopResult(stop_reason, self.turn_usage, final_text, model_calls=self.model_calls)

    async def _call_model(self, emit: Emit) -> StreamDone:
        model = self._model()
        parts: list[str] = []
        done: StreamDone | None = None
        parent = self.parent
        self.model_calls += 1
        stream = model.stream(
            system=self._system(),
            messages=_with_cache_breakpoint(self.messages),
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
                        parts.clear()
                        emit(
                            Notice(
                                f"Model API: {item.cause}. Retrying in {item.delay:.1f} s "
                                f"(attempt {item.attempt + 1} of {item.max_attempts}).{discard}",
                                "warning",
                                parent,
                            )
                        )
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
                results.append(_tool_result(block["id"], text, True))
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
            problem = f"Unknown tool {block.get('name')!r}: the only tool is Bash."
        elif "_incomplete_json" in tool_input:
            problem = (
                "Not run: your response was cut off (max_tokens) before this command was "
                "complete. Send it again, shorter (e.g. write big files in parts)."
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
            return _tool_result(tool_id, problem, True)
        assert isinstance(command, str)
        restart = bool(tool_input.get("restart", False))
        emit(ToolCallStarted(tool_id, command, restart, parent))
        self.current_tool_call_id = tool_id

        def on_output(stream: str, chunk: str) -> None:
            emit(ToolOutput(tool_id, "stderr" if stream == "stderr" else "stdout", chunk, parent))

        def on_event(event: Any) -> None:
            if isinstance(event, _EVENT_CLASSES) or type(event).__name__ == "PlanUpdated":
                emit(self._tag(event))

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
            return _tool_result(tool_id, text, True)
        status = (
            "cancelled"
            if routed.category is FailureCategory.CANCELLED
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

    # -------------------------------------------------------------- compaction

    async def _maybe_compact(self, emit: Emit) -> None:
        threshold = int(self.context_window * COMPACT_RATIO)
        if max(self.last_context_tokens, 0) < threshold:
            return
        boundary = self._boundary()
        if boundary <= 0:
            if self._drop_tool_outputs(len(self.messages) - 2):
                emit(
                    self._tag(Notice("Context nearly full: dropped the output of older commands."))
                )
            return
        older, kept = self.messages[:boundary], self.messages[boundary:]
        try:
            summary = await self._summarise(older)
        except ModelError as exc:
            if self._drop_tool_outputs(boundary):
                emit(
                    self._tag(
                        Notice(
                            f"Could not summarise older turns ({exc.message}); dropped their "
                            "command output instead.",
                            "warning",
                        )
                    )
                )
            return
        new: list[Message] = [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<conversation_summary>\nThe earlier part of this "
                        f"conversation, summarised:\n\n{summary.strip()}\n</conversation_summary>",
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Understood. I'll continue from there."}],
            },
        ]
        for message in kept:
            add_message(new, message)
        self.messages = new
        self.last_context_tokens = estimate_tokens(new)
        if self.on_compaction is not None:
            self.on_compaction(new)
        emit(
            self._tag(
                Notice(
                    f"Compacted the conversation: {len(older)} earlier messages were summarised "
                    "(the session file keeps the full record)."
                )
            )
        )

    def _boundary(self) -> int:
        """Index of the first message to keep: the start of the KEEP_RECENT_TURNS-th last turn
        (a user message with text, so no tool_use is ever separated from its result)."""
        starts = [
            i
            for i, m in enumerate(self.messages)
            if m["role"] == "user"
            and any(b.get("type") == "text" for b in _blocks(m["content"]))
            and not any(b.get("type") == "tool_result" for b in _blocks(m["content"]))
        ]
        if len(starts) <= KEEP_RECENT_TURNS:
            return 0
        return starts[-KEEP_RECENT_TURNS]

    def _drop_tool_outputs(self, upto: int) -> bool:
        changed = False
        for message in self.messages[: max(upto, 0)]:
            for block in _blocks(message["content"]):
                if block.get("type") == "tool_result" and block.get("content") not in (
                    "[output dropped to save context]",
                ):
                    block["content"] = "[output dropped to save context]"
                    changed = True
        if changed:
            self.last_context_tokens = estimate_tokens(self.messages)
            if self.on_compaction is not None:
                self.on_compaction(self.messages)
        return changed

    async def _summarise(self, older: list[Message]) -> str:
        model = self._model()
        text = ""
        request = [{"role": "user", "content": _transcript_for_summary(older)}]
        stream = model.stream(system=prompts.compaction_instructions(), messages=request)
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, StreamDone):
                    text = _text_of(item.content)
                    self.turn_usage = self.turn_usage + item.usage
        if not text.strip():
            raise ModelError("the summary came back empty")
        return text


# ------------------------------------------------------------- the session


class _TurnIterator:
    """The stream of one turn. Closing it (or leaving the `async for`) cancels the turn."""

    def __init__(self, gen: AsyncIterator[Event], release: Callable[[], None]) -> None:
        self._gen = gen
        self._release = release
        self._started = False

    def __aiter__(self) -> _TurnIterator:
        return self

    async def __anext__(self) -> Event:
        self._started = True
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        if not self._started:
            self._release()
        closer = getattr(self._gen, "aclose", None)
        if closer is not None:
            await closer()


class _Recorder:
    """Stores a turn's events for replay, coalescing text and output chunks."""

    MAX_OUTPUT = 64 * 1024

    def __init__(self, sink: Callable[[Event], None]) -> None:
        self._sink = sink
        self._pending: Event | None = None

    def add(self, event: Event) -> None:
        pending = self._pending
        if pending is not None:
            if (
                type(event) is type(pending)
                and isinstance(event, TextDelta | ThinkingDelta)
                and isinstance(pending, TextDelta | ThinkingDelta)
                and event.parent_tool_call_id == pending.parent_tool_call_id
            ):
                self._pending = dataclasses.replace(pending, text=pending.text + event.text)
                return
            if (
                isinstance(event, ToolOutput)
                and isinstance(pending, ToolOutput)
                and (event.tool_call_id, event.stream) == (pending.tool_call_id, pending.stream)
            ):
                if len(pending.chunk) < self.MAX_OUTPUT:
                    self._pending = dataclasses.replace(pending, chunk=pending.chunk + event.chunk)
                return
            self.flush()
        if isinstance(event, TextDelta | ThinkingDelta | ToolOutput):
            self._pending = event
        else:
            self._sink(event)

    def flush(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._sink(pending)


class ChatSession:
    """One conversation. One turn at a time; `run_turn` while busy raises SessionBusyError."""

    def __init__(
        self,
        router: BashRouter,
        settings: Settings,
        *,
        model: ModelClient | None = None,
        store: SessionStore | None = None,
        session_id: str | None = None,
        workspace_root: Path | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
    ) -> None:
        from synapse_lsp.sessions import DEFAULT_TITLE, new_session_id

        self.id = session_id or new_session_id()
        self.settings = settings
        self.store = store
        self.workspace_root = workspace_root
        self.title = DEFAULT_TITLE
        self.usage = Usage()
        self._model = model
        self._persisted = store is not None and store.exists(self.id)
        self._busy = False
        self._worker: asyncio.Task[None] | None = None
        self._emit: Emit = _drop
        self._transcript: list[Event] = []
        self._system_cache: list[dict[str, Any]] | None = None
        self._cwd = router.shell.cwd
        self.router = router.derive(subagent=self._run_subagent, in_subagent=False)
        self._loop = _Loop(
            router=self.router,
            settings=settings,
            model=self._ensure_model,
            system=self._system,
            context_window=context_window,
            on_message=self._store_message,
            on_compaction=self._store_compaction,
        )

    # ------------------------------------------------------------ public API

    @classmethod
    def resume(
        cls,
        store: SessionStore,
        session_id: str,
        router: BashRouter,
        settings: Settings,
        *,
        model: ModelClient | None = None,
        workspace_root: Path | None = None,
    ) -> ChatSession:
        """A stored session made live again (SessionNotFoundError if there is none)."""
        stored = store.load(session_id)
        root = workspace_root
        if root is None and stored.info.workspace:
            root = Path(stored.info.workspace)
        session = cls(
            router,
            settings,
            model=model,
            store=store,
            session_id=session_id,
            workspace_root=root,
        )
        session.title = stored.info.title
        session._loop.messages = repair_history(stored.messages)
        session._loop.last_context_tokens = estimate_tokens(session._loop.messages)
        session._transcript = list(stored.events)
        for event in stored.events:
            if isinstance(event, TurnFinished):
                session.usage = session.usage + event.usage
        return session

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def messages(self) -> list[Message]:
        """The model's view of the history (API message dicts)."""
        return self._loop.messages

    def transcript(self) -> list[Event]:
        """Stored events for replay (text coalesced), user prompts as UserMessage."""
        return list(self._transcript)

    def run_turn(self, text: str, context: TurnContext | None = None) -> AsyncIterator[Event]:
        """Stream the turn's events; the last one is always a TurnFinished."""
        if self._busy:
            raise SessionBusyError(
                "This chat session is already running a turn: wait for it to finish or cancel it."
            )
        self._busy = True
        return _TurnIterator(self._turn(text, context), self._release)

    def cancel(self) -> None:
        """Stop the running turn: interrupt the command, close the stream; the
        iterator ends with TurnFinished(stop_reason="cancelled")."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    async def close(self) -> None:
        self.cancel()
        if self._worker is not None:
            with contextlib.suppress(BaseException):
                await self._worker
        if self.store is not None:
            self.store.close(self.id)

    # -------------------------------------------------------------- the turn

    def _release(self) -> None:
        self._busy = False

    async def _turn(self, text: str, context: TurnContext | None) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        recorder = _Recorder(self._record)

        def emit(event: Event) -> None:
            recorder.add(event)
            queue.put_nowait(event)

        worker = asyncio.create_task(self._work(text, context, emit, recorder, queue))
        self._worker = worker
        try:
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            if not worker.done():
                worker.cancel()
            with contextlib.suppress(BaseException):
                await worker
            self._worker = None
            self._emit = _drop
            self._busy = False

    async def _work(
        self,
        text: str,
        context: TurnContext | None,
        emit: Emit,
        recorder: _Recorder,
        queue: asyncio.Queue[Event | None],
    ) -> None:
        self._emit = emit
        finished: TurnFinished
        try:
            self._begin(text)
            content: list[dict[str, Any]] = []
            extra = context_text(context) if context is not None else None
            if extra:
                content.append({"type": "text", "text": extra})
            content.append({"type": "text", "text": text})
            try:
                self._ensure_model()
            except ModelError as exc:
                self._loop.add({"role": "user", "content": content})
                finished = TurnFinished("error", Usage(), exc.message)
            else:
                try:
                    result = await self._loop.run(content, emit)
                    finished = TurnFinished(result.stop_reason, result.usage)  # type: ignore[arg-type]
                except ModelError as exc:
                    emit(Notice(exc.message, "warning"))
                    finished = TurnFinished("error", self._loop.turn_usage, exc.message)
        except asyncio.CancelledError:
            finished = TurnFinished("cancelled", self._loop.turn_usage)
        except Exception as exc:  # a bug must end the turn visibly, never hang the face
            log.exception("turn failed")
            finished = TurnFinished(
                "error", self._loop.turn_usage, f"internal error: {type(exc).__name__}: {exc}"
            )
        self.usage = self.usage + finished.usage
        recorder.flush()
        recorder.add(finished)
        queue.put_nowait(finished)
        queue.put_nowait(None)

    def _begin(self, text: str) -> None:
        from synapse_lsp.sessions import DEFAULT_TITLE

        if self.title == DEFAULT_TITLE:
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            if first:
                self.title = first if len(first) <= 60 else first[:59] + "\u2026"
                if self.store is not None and self._persisted:
                    self.store.set_title(self.id, self.title)
        if self.store is not None and not self._persisted:
            workspace = str(self.workspace_root or self._cwd)
            self.store.create(self.id, self.title, workspace)
            self._persisted = True
        self._record(UserMessage(text))

    def _record(self, event: Event) -> None:
        self._transcript.append(event)
        if self.store is not None and self._persisted:
            try:
                self.store.append_event(self.id, event)
            except OSError as exc:  # a full disk must not end the conversation
                log.warning("cannot store event: %s", exc)

    def _store_message(self, message: Message) -> None:
        if self.store is not None and self._persisted:
            try:
                self.store.append_message(self.id, message)
            except OSError as exc:
                log.warning("cannot store message: %s", exc)

    def _store_compaction(self, messages: list[Message]) -> None:
        if self.store is not None and self._persisted:
            try:
                self.store.append_compaction(self.id, messages)
            except OSError as exc:
                log.warning("cannot store compaction: %s", exc)

    def _ensure_model(self) -> ModelClient:
        if self._model is None:
            from synapse_lsp.model import ModelClient

            self._model = ModelClient.from_settings(self.settings)
        return self._model

    def _system(self, task_type: str | None = None) -> list[dict[str, Any]]:
        if task_type is not None:
            return prompts.system_blocks(
                self.router.builtins.values(),
                cwd=self._cwd,
                workspace_root=self.workspace_root,
                task_type=task_type,
            )
        if self._system_cache is None:
            self._system_cache = prompts.system_blocks(
                self.router.builtins.values(), cwd=self._cwd, workspace_root=self.workspace_root
            )
        return self._system_cache

    # ------------------------------------------------------------ sub-agents

    async def _run_subagent(self, task_type: str, prompt: str, description: str) -> CommandOutput:
        parent_id = self._loop.current_tool_call_id
        parent_emit = self._emit
        try:
            self._ensure_model()
        except ModelError as exc:
            return CommandOutput(
                stderr=f"task:{task_type}: {exc.message}\n",
                exit_code=1,
                category=FailureCategory.DEPENDENCY_MISSING,
            )
        changes: dict[str, Any] = {"in_subagent": True}
        if task_type == "explore":
            changes["permission"] = _ExploreGate(self.router.permission)
        child_router = self.router.derive(**changes)
        system = self._system(task_type)
        child = _Loop(
            router=child_router,
            settings=self.settings,
            model=self._ensure_model,
            system=lambda: system,
            parent_tool_call_id=parent_id,
            context_window=self._loop.context_window,
        )
        child_emit: Emit = parent_emit

        try:
            result = await child.run([{"type": "text", "text": prompt}], child_emit)
        except ModelError as exc:
            self._loop.turn_usage = self._loop.turn_usage + child.turn_usage
            return CommandOutput(
                stderr=f"task:{task_type} ({description}) failed: {exc.message}\n",
                exit_code=1,
                category=FailureCategory.EXECUTION_ERROR,
            )
        self._loop.turn_usage = self._loop.turn_usage + result.usage
        data = {
            "subagent": {
                "type": task_type,
                "description": description,
                "stop_reason": result.stop_reason,
                "model_calls": result.model_calls,
            }
        }
        final = result.final_text.strip() or "(the sub-agent finished without a final message)"
        if result.stop_reason == "end_turn":
            return CommandOutput(stdout=final + "\n", data=data)
        return CommandOutput(
            stdout=final + "\n",
            stderr=f"task:{task_type} stopped early ({result.stop_reason}); "
            "its last text is above.\n",
            exit_code=1,
            category=FailureCategory.EXECUTION_ERROR,
            data=data,
        )


def _drop(event: Event) -> None:
    return None
