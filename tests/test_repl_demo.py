"""The offline demo model (`synapse chat` without a key) after Ctrl-C (issue 14, item 5)."""

from __future__ import annotations

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic, demo_script
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.events import TextDelta, ToolCallStarted, TurnFinished
from synapse_lsp.router import BashRouter


async def _turn(
    session: ChatSession, text: str, *, cancel_at_text: bool = False
) -> tuple[str, list[str], str]:
    said: list[str] = []
    commands: list[str] = []
    reason = ""
    async for event in session.run_turn(text):
        if isinstance(event, TextDelta):
            said.append(event.text)
            if cancel_at_text:
                session.cancel()
        elif isinstance(event, ToolCallStarted):
            commands.append(event.command)
        elif isinstance(event, TurnFinished):
            reason = event.stop_reason
    return "".join(said), commands, reason


async def test_demo_model_continues_in_step_after_a_cancelled_turn(
    router: BashRouter, settings: Settings
) -> None:
    """A turn cancelled mid-answer (before its `ls` ran) must not leave the demo's script a
    step behind: the next prompt gets the first answer again, not "The tool came back
    with…" with no tool run."""
    async with FakeAnthropic(demo_script()) as api:
        model = ModelClient(api_key="demo", base_url=api.base_url, model="synapse-demo")
        session = ChatSession(router, settings, model=model)
        try:
            _, commands, reason = await _turn(session, "first", cancel_at_text=True)
            assert reason == "cancelled" and commands == []
            text, commands, reason = await _turn(session, "second")
            assert reason == "end_turn"
            assert "You said: \u201csecond\u201d" in text
            assert commands == ["ls"]
            assert "The tool came back with" in text  # after its own `ls`, in order
            # and a cancel while the tool runs (after the first answer) likewise
            text, commands, _ = await _turn(session, "third")
            assert text.index("You said") < text.index("The tool came back")
        finally:
            await session.close()
            await model.close()
