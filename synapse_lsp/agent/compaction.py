"""Compaction: when the history nears the context window, older turns are summarised.

Compaction works on a history, not on the loop that owns it: `maybe_compact`
takes the messages, the context size the last model call reported, a model
client factory and `CompactionSettings`, and returns a `Compaction` (the new
history, the summary call's usage and a Notice to show) or None. The loop
(`loop.py`) imports this module; this module imports nothing from the loop.

Past `ratio` of the window, everything before the last `keep_turns` turns is
summarised by the model and replaced; if that fails, or there is too little to
summarise, older tool outputs are dropped instead. A turn starts at a user
message with text, so a `tool_use` is never separated from its `tool_result`.
The given list is never changed: the new history is a new list (blocks that
change are copies). The session file keeps the full record. `compact` does the
same on demand (`/compact [focus]`), whatever the context size.

**Offload.** With an `Offload` (a chat session with a store gives one: it writes
`<session folder>/offload/<tool_use_id>.txt`), a compaction also moves large tool
outputs (over `offload_chars`) out of the history into files and leaves a reference
the model can `read` back: in the kept turns, those older than the last turn; in the
summarised part, every large one (the summary lists them). Only at a compaction:
rewriting older turns on an ordinary call would void the prompt cache, and a
compaction rewrites the history anyway. Where outputs would be dropped, an
offloaded one is kept readable instead.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import prompts, stages
from synapse_lsp.agent.history import Message, add_message, blocks, estimate_tokens, text_of
from synapse_lsp.agent.model import StreamDone
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Notice, Usage
from synapse_lsp.policy import hooks

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient

DEFAULT_CONTEXT_WINDOW = 200_000
COMPACT_RATIO = 0.8
KEEP_RECENT_TURNS = 2
DROPPED_OUTPUT = "[output dropped to save context]"
OFFLOAD_CHARS = 2000  # tool outputs longer than this are offloaded at a compaction
OFFLOADED_PREFIX = "[output offloaded to "
SAVED_LISTED = 30  # the summary lists at most this many offloaded outputs (the newest)

Offload = Callable[[str, str], str | None]
"""(tool_use_id, text) -> the path the text was saved to, or None if it could not be."""


@dataclass(frozen=True)
class Saved:
    """A tool output moved to a file."""

    tool_use_id: str
    command: str
    path: str
    lines: int
    chars: int


def offloaded_reference(path: str, lines: int, chars: int) -> str:
    """What replaces an offloaded output in the history."""
    return (
        f"{OFFLOADED_PREFIX}{path}: {lines} lines, {chars} characters; "
        f"read it with: read {shlex.quote(path)}]"
    )


@dataclass(frozen=True)
class CompactionSettings:
    context_window: int = DEFAULT_CONTEXT_WINDOW
    ratio: float = COMPACT_RATIO
    keep_turns: int = KEEP_RECENT_TURNS
    output_limit: int = 4000  # characters of each tool output shown to the summariser
    offload_chars: int = OFFLOAD_CHARS

    @property
    def threshold(self) -> int:
        return int(self.context_window * self.ratio)


@dataclass(frozen=True)
class Compaction:
    """A compacted history and what it cost."""

    messages: list[Message]
    notice: Notice
    usage: Usage  # of the summary call (zero when outputs were only dropped)
    context_tokens: int  # estimated size of the new history
    saved: tuple[Saved, ...] = field(default=())  # outputs offloaded to files


async def maybe_compact(
    messages: list[Message],
    *,
    context_tokens: int,
    model: Callable[[], ModelClient],
    settings: CompactionSettings | None = None,
    offload: Offload | None = None,
) -> Compaction | None:
    """The compacted history if the last call (`context_tokens`) came close to the context
    window, else None (also when nothing could be made smaller)."""
    cfg = settings or CompactionSettings()
    if max(context_tokens, 0) < cfg.threshold:
        return None
    if (scope := hooks.current()) is not None:  # the turn's PreCompact hooks, first
        fields = {"trigger": "auto", "custom_instructions": ""}
        await scope.hooks.event(scope, "PreCompact", "auto", fields)
    return await compact(messages, model=model, settings=cfg, offload=offload)


async def compact(
    messages: list[Message],
    *,
    model: Callable[[], ModelClient],
    settings: CompactionSettings | None = None,
    offload: Offload | None = None,
    focus: str | None = None,
) -> Compaction | None:
    """Summarise everything before the last `keep_turns` turns (`focus`: what the summary
    should keep most of); with too few turns, or when the summary fails, offload (or
    drop) older tool outputs instead. None when nothing could be made smaller."""
    cfg = settings or CompactionSettings()
    boundary = turn_boundary(messages, cfg.keep_turns)
    if boundary <= 0:
        upto = len(messages) - 2
        dropped, saved = _without_tool_outputs(messages, upto, offload, cfg.offload_chars)
        if dropped is None:
            return None
        what = "moved the output of older commands to files" if saved else "dropped the output"
        return Compaction(
            dropped,
            Notice(f"Context nearly full: {what}." if focus is None else f"Compacted: {what}."),
            Usage(),
            estimate_tokens(dropped),
            saved,
        )
    older, kept = messages[:boundary], messages[boundary:]
    try:
        summary, usage = await summarise(older, model, cfg.output_limit, focus)
    except ModelError as exc:
        dropped, saved = _without_tool_outputs(messages, boundary, offload, cfg.offload_chars)
        if dropped is None:
            return None
        return Compaction(
            dropped,
            Notice(
                f"Could not summarise older turns ({exc.message}); "
                + ("moved" if saved else "dropped")
                + " their command output "
                + ("to files" if saved else "instead")
                + ".",
                "warning",
            ),
            Usage(),
            estimate_tokens(dropped),
            saved,
        )
    saved_older = _offload_all(older, offload, cfg.offload_chars)
    new = summarised_history(summary, kept, saved_older)
    last_turn = turn_boundary(new, 1)
    kept_saved: tuple[Saved, ...] = ()
    if offload is not None and last_turn > 2:
        offloaded, kept_saved = _offloaded(new, last_turn, offload, cfg.offload_chars)
        new = offloaded
    saved = (*saved_older, *kept_saved)
    moved = f" {len(saved)} large command outputs were moved to files." if saved else ""
    return Compaction(
        new,
        Notice(
            f"Compacted the conversation: {len(older)} earlier messages were summarised "
            f"(the session file keeps the full record).{moved}"
        ),
        usage,
        estimate_tokens(new),
        saved,
    )


def summarised_history(
    summary: str, kept: list[Message], saved: tuple[Saved, ...] = ()
) -> list[Message]:
    """The new history: the summary as a user message (with the outputs saved to files,
    if any), an acknowledgement, the kept turns."""
    listing = ""
    if saved:
        shown = saved[-SAVED_LISTED:]
        rows = "\n".join(f"- `{_short(s.command)}`: {s.path} ({s.lines} lines)" for s in shown)
        more = f" (the newest {len(shown)} of {len(saved)})" if len(shown) < len(saved) else ""
        listing = (
            f"\n\nOutputs of earlier commands, saved to files{more}; read one back with "
            f"`read PATH`:\n{rows}"
        )
    new: list[Message] = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "<conversation_summary>\nThe earlier part of this "
                    f"conversation, summarised:\n\n{summary.strip()}{listing}\n"
                    "</conversation_summary>",
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
    return new


def turn_boundary(messages: list[Message], keep_turns: int = KEEP_RECENT_TURNS) -> int:
    """Index of the first message to keep: the start of the `keep_turns`-th last turn
    (a user message with text, so no tool_use is ever separated from its result)."""
    starts = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user"
        and any(b.get("type") == "text" for b in blocks(m["content"]))
        and not any(b.get("type") == "tool_result" for b in blocks(m["content"]))
    ]
    if len(starts) <= keep_turns:
        return 0
    return starts[-keep_turns]


def _without_tool_outputs(
    messages: list[Message],
    upto: int,
    offload: Offload | None = None,
    offload_chars: int = OFFLOAD_CHARS,
) -> tuple[list[Message] | None, tuple[Saved, ...]]:
    """A copy of `messages` whose tool outputs before `upto` are gone from the history:
    offloaded to files when they are large and an `offload` is given, else dropped.
    (None, ()) if nothing changed."""
    saved: tuple[Saved, ...] = ()
    current = messages
    if offload is not None:
        current, saved = _offloaded(messages, upto, offload, offload_chars)
    out: list[Message] = []
    changed = bool(saved)
    for index, message in enumerate(current):
        content = blocks(message["content"])
        if index < upto and any(_droppable(b) for b in content):
            content = [{**b, "content": DROPPED_OUTPUT} if _droppable(b) else b for b in content]
            changed = True
            out.append({**message, "content": content})
        else:
            out.append(message)
    return (out if changed else None), saved


def _droppable(block: dict[str, Any]) -> bool:
    if block.get("type") != "tool_result":
        return False
    body = block.get("content")
    return body != DROPPED_OUTPUT and not _is_reference(body)


def _is_reference(body: Any) -> bool:
    return isinstance(body, str) and body.startswith(OFFLOADED_PREFIX)


def _output_text(block: dict[str, Any]) -> str | None:
    """A tool_result's text, or None when it holds more than text (an image)."""
    body = block.get("content", "")
    if isinstance(body, str):
        return body
    if isinstance(body, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in body
    ):
        return text_of(body)
    return None


def _commands(messages: list[Message]) -> dict[str, str]:
    return {
        str(b.get("id")): str((b.get("input") or {}).get("command", ""))
        for m in messages
        if m["role"] == "assistant"
        for b in blocks(m["content"])
        if b.get("type") == "tool_use"
    }


def _offloaded(
    messages: list[Message], upto: int, offload: Offload, offload_chars: int
) -> tuple[list[Message], tuple[Saved, ...]]:
    """A copy of `messages` whose tool outputs before `upto` longer than `offload_chars`
    are saved by `offload` and replaced by a reference (an output it could not save
    stays)."""
    commands = _commands(messages)
    out: list[Message] = []
    saved: list[Saved] = []
    for index, message in enumerate(messages):
        if index >= upto or message["role"] != "user":
            out.append(message)
            continue
        content: list[dict[str, Any]] = []
        changed = False
        for block in blocks(message["content"]):
            text = _output_text(block) if block.get("type") == "tool_result" else None
            if text is not None and len(text) > offload_chars and not _is_reference(text):
                item = _save(block, text, commands, offload)
                if item is not None:
                    saved.append(item)
                    block = {
                        **block,
                        "content": offloaded_reference(item.path, item.lines, item.chars),
                    }
                    changed = True
            content.append(block)
        out.append({**message, "content": content} if changed else message)
    return out, tuple(saved)


def _offload_all(
    messages: list[Message], offload: Offload | None, offload_chars: int
) -> tuple[Saved, ...]:
    """Save the large tool outputs of `messages` (a part about to be summarised away)."""
    if offload is None:
        return ()
    commands = _commands(messages)
    saved: list[Saved] = []
    for message in messages:
        if message["role"] != "user":
            continue
        for block in blocks(message["content"]):
            text = _output_text(block) if block.get("type") == "tool_result" else None
            if text is not None and len(text) > offload_chars and not _is_reference(text):
                item = _save(block, text, commands, offload)
                if item is not None:
                    saved.append(item)
    return tuple(saved)


def _save(
    block: dict[str, Any], text: str, commands: dict[str, str], offload: Offload
) -> Saved | None:
    tool_use_id = str(block.get("tool_use_id", ""))
    path = offload(tool_use_id, text)
    if path is None:
        return None
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return Saved(tool_use_id, commands.get(tool_use_id, ""), path, lines, len(text))


def _short(command: str, limit: int = 80) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


async def summarise(
    older: list[Message],
    model: Callable[[], ModelClient],
    output_limit: int = 4000,
    focus: str | None = None,
) -> tuple[str, Usage]:
    """The model's summary of `older` (no tools) and the call's usage; ModelError if it
    failed or came back empty. `focus`: what the user wants the summary to keep."""
    client = model()
    text = ""
    usage = Usage()
    request = [{"role": "user", "content": transcript_for_summary(older, output_limit)}]
    system = prompts.compaction_instructions()
    if focus and focus.strip():
        system += (
            "\n\nThe user asked for this compaction and wants the summary to focus on: "
            f"{focus.strip()}"
        )
    await stages.at("compaction")
    stream = client.stream(system=system, messages=request)
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, StreamDone):
                text = text_of(item.content)
                usage = usage + item.usage
    if not text.strip():
        raise ModelError("the summary came back empty")
    return text, usage


def transcript_for_summary(messages: list[Message], limit: int = 4000) -> str:
    parts: list[str] = []
    for message in messages:
        who = "User" if message["role"] == "user" else "Assistant"
        for block in blocks(message["content"]):
            kind = block.get("type")
            if kind == "text":
                parts.append(f"{who}: {block.get('text', '')}")
            elif kind == "tool_use":
                parts.append(f"Assistant ran: {block.get('input', {}).get('command', '')}")
            elif kind == "tool_result":
                body = block.get("content", "")
                if isinstance(body, list):
                    body = text_of(body)
                body = str(body)
                if len(body) > limit:
                    body = body[: limit // 2] + "\n[...]\n" + body[-limit // 2 :]
                error = " (error)" if block.get("is_error") else ""
                parts.append(f"Result{error}:\n{body}")
    return "\n\n".join(parts)
