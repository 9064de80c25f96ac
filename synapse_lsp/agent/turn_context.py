"""What the editor knows of a turn, and how the model is told it.

A face gives `ChatSession.run_turn` a `TurnContext` (the active file, a selection, the
open files, resources attached to the prompt); `context_text` turns it into the text
block the model gets before the user's words (selections and attachments cut to a
budget). The session re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synapse_lsp.agent import prompts
from synapse_lsp.files import uri_to_path

MAX_SELECTION_CHARS = 20_000


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
class Attachment:
    """A resource the client attached to the prompt (ACP: an embedded resource, whose
    `text` the model gets, or a resource link, `text` None: the model is told of it)."""

    uri: str
    text: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class TurnContext:
    """What the editor knows, given to the model alongside the user's text."""

    active_file: str | None = None
    selection: Selection | None = None
    open_files: tuple[str, ...] = field(default_factory=tuple)
    attachments: tuple[Attachment, ...] = field(default_factory=tuple)


def _uri_to_path(uri: str) -> str:
    path = uri_to_path(uri, resolve=False)
    return uri if path is None else str(path)


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
    budget = MAX_SELECTION_CHARS * 5  # all attached text together
    for item in context.attachments:
        where = _uri_to_path(item.uri)
        if item.text is None:
            lines.append(f"Referenced: {where}" + (f" ({item.name})" if item.name else ""))
            continue
        text = item.text
        if len(text) > min(budget, MAX_SELECTION_CHARS * 2):
            text = text[: max(0, min(budget, MAX_SELECTION_CHARS * 2))] + "\n[... cut ...]"
        budget -= len(text)
        lines.append(f"Attached {where}:\n```\n{text}\n```")
    if not lines:
        return None
    return prompts.editor_context_text("\n".join(lines))
