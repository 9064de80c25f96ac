"""Editor feedback at the LSP boundary: `synapse/diagnostics` from the client and the
user's own `didChange`s of files the agent edited, handed to each chat session's
`agent.feedback.EditorFeedback` (which notes them to the model once).

The user's changes are seen here rather than sent by the client: the server already
syncs every open document and knows when its own edits are in flight (a tool call is
running), so any client that syncs documents gets them without code of its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from synapse_lsp.agent.editor_notes import Problem
from synapse_lsp.files import FileError, read_disk_text, uri_to_path
from synapse_lsp.lsp.names import DIAGNOSTICS_NOTIFICATION
from synapse_lsp.lsp.wire import ArgumentError, from_wire

if TYPE_CHECKING:
    from pathlib import Path

    from pygls.workspace import Workspace

    from synapse_lsp.agent.editor_notes import EditorFeedback
    from synapse_lsp.lsp.editor_files import EditorFiles
    from synapse_lsp.lsp.sessions import LiveChats

log = logging.getLogger(__name__)

_SEVERITY = {
    lsp.DiagnosticSeverity.Error: "error",
    lsp.DiagnosticSeverity.Warning: "warning",
    lsp.DiagnosticSeverity.Information: "information",
    lsp.DiagnosticSeverity.Hint: "hint",
}


def problems(diagnostics: Iterable[lsp.Diagnostic]) -> list[Problem]:
    """LSP diagnostics as the agent keeps them (no severity: an error, as editors show it)."""
    return [
        Problem(
            line=d.range.start.line,
            severity=_SEVERITY.get(d.severity, "error") if d.severity is not None else "error",
            message=d.message,
            source=d.source,
            code=str(d.code) if d.code is not None else None,
        )
        for d in diagnostics
    ]


def _feedbacks(chats: LiveChats, session_id: str | None) -> list[tuple[str, EditorFeedback]]:
    if session_id is not None:
        live = chats.live.get(session_id)
        if live is None:
            log.warning("%s: unknown sessionId %r, ignored", DIAGNOSTICS_NOTIFICATION, session_id)
            return []
        return [(session_id, live.chat.feedback)]
    return [(sid, live.chat.feedback) for sid, live in chats.live.items()]


def diagnostics_reported(chats: LiveChats, raw: Any) -> None:
    """`synapse/diagnostics`: a malformed one is logged and dropped (a notification has
    no reply, and it must never take the server down)."""
    from synapse_lsp.lsp.protocol import DiagnosticsParams

    try:
        params = from_wire(raw, DiagnosticsParams)
    except (ArgumentError, TypeError, ValueError) as exc:
        log.warning("%s: %s; ignored", DIAGNOSTICS_NOTIFICATION, exc)
        return
    path = uri_to_path(params.uri)
    if path is None:
        log.debug("%s: %s is not a file, ignored", DIAGNOSTICS_NOTIFICATION, params.uri)
        return
    now = problems(params.diagnostics)
    before = problems(params.before) if params.before is not None else None
    for sid, feedback in _feedbacks(chats, params.session_id):
        if not feedback.touches(path):
            continue
        fresh = feedback.diagnostics(path, now, before)
        log.info(
            "editor feedback: %d new problem(s) in %s for session %s (%d reported)",
            fresh,
            path,
            sid,
            len(now),
        )


def document_changed(
    chats: LiveChats,
    workspace: Workspace,
    files: EditorFiles,
    params: lsp.DidChangeTextDocumentParams | lsp.DidSaveTextDocumentParams,
) -> None:
    """A `didChange` or `didSave`: during a turn, the user's own change is noted for
    rewinds (`hand_edit`); a `didChange` of a file the agent edited is also the user's
    change noted to the model (ignored by a session while one of its tool calls runs:
    then it is the agent's own edit or command)."""
    uri = params.text_document.uri
    path = uri_to_path(uri) if chats.live else None
    if path is None:
        return
    saved = isinstance(params, lsp.DidSaveTextDocumentParams)
    hand_edit(chats, workspace, files, uri, path, saved=saved)
    if saved:
        return
    watching = [(sid, f) for sid, f in _feedbacks(chats, None) if f.touches(path)]
    if not watching:
        return
    text = workspace.get_text_document(uri).source
    for sid, feedback in watching:
        if feedback.user_changed(path, text):
            log.info("editor feedback: the user changed %s (session %s)", path, sid)


def hand_edit(
    chats: LiveChats,
    workspace: Workspace,
    files: EditorFiles,
    uri: str,
    path: Path,
    *,
    saved: bool,
) -> None:
    """A buffer's text changed (or was saved) while a turn runs: unless it is the
    agent's own edit (echoed by the editor, or saved for it) or a change to what is on
    disk (a reload), it is the user's, and a rewind of the turn asks before putting
    that file back (`agent/hand_edits.py`)."""
    guards = [g for live in chats.live.values() if (g := live.chat.checkpoints.guard).watching]
    if not guards:
        return
    from synapse_lsp.lsp.editor_files import agent_wrote

    text = workspace.get_text_document(uri).source
    if agent_wrote(files, path, text):
        return
    with contextlib.suppress(FileError, OSError):
        if not saved and read_disk_text(path).rstrip("\r\n") == text.rstrip("\r\n"):
            return  # the buffer took the disk's text (a reload): not typed by the user
    for guard in guards:
        guard.editor_changed(path)
