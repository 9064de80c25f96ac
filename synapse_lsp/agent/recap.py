"""What `/resume` shows of a session (issue 31, item 7): the turn count (the numbers
`turn_numbers.py` describes), the last exchange, and what was used so far."""

from __future__ import annotations

from typing import TYPE_CHECKING

from synapse_lsp.agent.pricing import cost_line
from synapse_lsp.agent.turn_numbers import count_turns, label
from synapse_lsp.events import Notice, TextDelta, ToolCallStarted, TurnFinished, UserMessage

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession

RECAP_WIDTH = 160


def recap(session: ChatSession) -> str:
    """What `/resume` shows: the turn count, the last exchange, what was used."""
    events = session.transcript()
    turns = count_turns(events)
    if turns == 0:
        return "No turns yet: your next prompt is turn 1."
    last = max(i for i, e in enumerate(events) if isinstance(e, UserMessage))
    prompt = events[last]
    assert isinstance(prompt, UserMessage)
    answer = "".join(
        e.text for e in events[last:] if isinstance(e, TextDelta) and e.parent_tool_call_id is None
    )
    commands = sum(
        1 for e in events if isinstance(e, ToolCallStarted) and e.parent_tool_call_id is None
    )
    ended = next((e for e in reversed(events) if isinstance(e, TurnFinished)), None)
    later = [e.message for e in events[last:] if isinstance(e, Notice) and e.level == "warning"]
    lines = [
        f"{turns} turn{'s' if turns != 1 else ''} so far; your next prompt is turn {turns + 1}.",
        f"Last exchange (turn {turns}):",
        f"  You: {label(prompt.text, RECAP_WIDTH)}",
    ]
    said = label(answer.strip().split("\n\n")[-1], RECAP_WIDTH) if answer.strip() else ""
    if said:
        lines.append(f"  Synapse: {said}")
    if ended is not None and ended.stop_reason != "end_turn":
        lines.append(f"  (that turn ended: {ended.stop_reason})")
    lines.extend(f"  Note: {label(m, RECAP_WIDTH)}" for m in later[-2:])
    used = cost_line("So far", session.session_cost())
    lines.append(f"{used}; {commands} command{'s' if commands != 1 else ''} run.")
    return "\n".join(lines)
