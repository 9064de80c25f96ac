"""One turn numbering, everywhere (issue 31, item 7).

Turn N is the N-th prompt of the conversation that reached the model: the REPL's
`You (N)>` names the turn the next prompt starts, and `/checkpoints`, `/rewind N`,
the editors' pickers and ACP's `/checkpoints` use the same numbers, because a turn's
checkpoint takes its number from the session (`ChatSession.turns`), which counts the
user's prompts in the session's replay, stored with it (so `/resume` goes on where
the session was). What counts:

- a prompt a UserPromptSubmit hook blocked, or one refused because another process
  writes the session, is not a turn (nothing of it is kept);
- a sub-agent's turns (`task:*`), a Stop hook that has the agent go on, and a
  compaction (automatic, or `/compact`) are part of the turn they happen in: no
  number of their own, and no renumbering;
- a cancelled or failed turn counts (its prompt is in the conversation);
- `/rewind N` that ends the conversation before turn N makes the next prompt turn N
  again; with `--keep-chat` (or when the conversation cannot be cut) the rewound
  turns stay in it and keep their numbers, and the next prompt follows them.

Labels are the user's own words, on one line: the note the REPL adds about the
user's own `!` commands is not part of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from synapse_lsp.events import Event, UserMessage

# How the REPL's note about the user's own `!` commands begins (cli/bang.py): appended
# to a prompt after a blank line, never part of the user's words.
BANG_NOTE_HEAD = "[Before this message the user ran these commands themselves"
LABEL_WIDTH = 60


def count_turns(events: Iterable[Event]) -> int:
    """The turns of a conversation: its user prompts (a sub-agent's are not)."""
    return sum(1 for e in events if isinstance(e, UserMessage) and e.parent_tool_call_id is None)


def words(prompt: str) -> str:
    """The user's own words of a prompt (without the `!` commands note)."""
    if prompt.startswith(BANG_NOTE_HEAD):
        return ""
    return prompt.split("\n\n" + BANG_NOTE_HEAD, 1)[0]


def label(prompt: str, width: int = LABEL_WIDTH) -> str:
    """A turn's label: the user's words on one line, cut at `width` characters."""
    line = " ".join(words(prompt).split())
    return line if len(line) <= width else line[: width - 1] + "\u2026"
