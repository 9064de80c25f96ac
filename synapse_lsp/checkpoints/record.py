"""What one turn's checkpoint is: the `Checkpoint` record (its JSON form included)
and `CheckpointError`, the error of everything in this package.

A record names the folder's two trees (before and after the turn) in the shadow
store, the number of history messages and replay events before the turn, and what
the turn changed; `records.py` keeps one file of it per turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synapse_lsp.errors import SynapseError


class CheckpointError(SynapseError):
    """Checkpoints cannot be taken or restored; the message says why."""


@dataclass
class Checkpoint:
    """One turn: the folder before and after it."""

    turn: int
    before: str
    messages: int  # history messages before the turn
    started_at: float
    prompt: str = ""  # the user's words that started the turn (to check a truncation)
    events: int = 0  # replay events before the turn
    after: str | None = None
    changed: list[tuple[str, str]] = field(default_factory=list)  # (status A/M/D, path)
    ignored_changed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # too large to keep
    ignored_before: dict[str, dict[str, Any]] = field(default_factory=dict)
    ignored_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    repo_before: str | None = None
    repo_after: str | None = None
    foreign: list[str] = field(default_factory=list)  # changed in the turn, not by the agent

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "before": self.before,
            "after": self.after,
            "messages": self.messages,
            "startedAt": self.started_at,
            "prompt": self.prompt,
            "events": self.events,
            "changed": [list(c) for c in self.changed],
            "ignoredChanged": self.ignored_changed,
            "skipped": self.skipped,
            "ignoredBefore": self.ignored_before,
            "ignoredAfter": self.ignored_after,
            "repoBefore": self.repo_before,
            "repoAfter": self.repo_after,
            "foreign": self.foreign,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Checkpoint:
        return cls(
            turn=int(raw["turn"]),
            before=str(raw["before"]),
            messages=int(raw.get("messages", 0)),
            started_at=float(raw.get("startedAt", 0.0)),
            prompt=str(raw.get("prompt", "")),
            events=int(raw.get("events", 0)),
            after=raw.get("after"),
            changed=[(str(s), str(p)) for s, p in raw.get("changed", [])],
            ignored_changed=list(raw.get("ignoredChanged", [])),
            skipped=list(raw.get("skipped", [])),
            ignored_before=dict(raw.get("ignoredBefore", {})),
            ignored_after=dict(raw.get("ignoredAfter", {})),
            repo_before=raw.get("repoBefore"),
            repo_after=raw.get("repoAfter"),
            foreign=list(raw.get("foreign", [])),
        )
