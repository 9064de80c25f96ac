"""The agent loop: user text -> streamed model output -> Bash tool calls -> ... -> answer.

CONTRACT STUB (filled by the agent-loop work). Faces depend only on what is here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from synapse_lsp.events import Event


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


class ChatSession:
    """One conversation. One turn at a time; `run_turn` while busy raises SessionBusyError."""

    id: str

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def run_turn(self, text: str, context: TurnContext | None = None) -> AsyncIterator[Event]:
        """Stream the turn's events; the last one is always a TurnFinished."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the running turn: interrupt the command, close the stream; the
        iterator ends with TurnFinished(stop_reason="cancelled")."""
        raise NotImplementedError
