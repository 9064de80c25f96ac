"""A chat session's background skill enhancement (skill_enhance.py): whether a finished
turn starts one, and the job it runs with.

`ChatSession` owns one `SessionSkills`. After a turn's last event (turn_runner.py) it
starts an enhancement when the turn calls for it: the turn ended normally with enough
tool calls, enhancement is on (`/skill enhance on|off` for the session, else the
`skillEnhance` setting), the session is writable, skills can be written and a model
key is there. The job runs with the session's router, model and hooks; its notices
reach the user through the session's turns and its usage is the session's. At most one
runs at a time; the session's close ends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from synapse_lsp.agent.loop import Loop
from synapse_lsp.agent.pricing import Spend
from synapse_lsp.agent.session_hooks import SessionHooks
from synapse_lsp.agent.session_model import SessionModel
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.skill_enhance import BackgroundSkills, Job, last_turn, tool_calls
from synapse_lsp.agent.turn_runner import TurnRunner
from synapse_lsp.errors import ModelError
from synapse_lsp.events import TurnFinished

if TYPE_CHECKING:
    from synapse_lsp.config import Settings, SettingsSource
    from synapse_lsp.router import BashRouter


class SkillHost(Protocol):
    """What the enhancement uses of `session.ChatSession` (which owns it)."""

    id: str
    router: BashRouter
    settings_source: SettingsSource
    skill_enhance: bool | None
    records: SessionRecords
    _loop: Loop
    _model: SessionModel
    _session_hooks: SessionHooks
    _runner: TurnRunner

    @property
    def settings(self) -> Settings: ...

    @property
    def read_only(self) -> bool: ...

    def _account(self, spend: Spend) -> None: ...


class SessionSkills:
    """A session's background skill enhancement: when it starts, and its run."""

    def __init__(self, host: SkillHost) -> None:
        self._host = host
        self._background = BackgroundSkills(f"session-{host.id}")

    @property
    def on(self) -> bool:
        """Whether a finished turn may start a background skill enhancement."""
        host = self._host
        return host.settings.skill_enhance if host.skill_enhance is None else host.skill_enhance

    @property
    def running(self) -> bool:
        """A background skill enhancement is running."""
        return self._background.running

    def after_turn(self, finished: TurnFinished) -> None:
        """Start the background skill enhancement when this turn calls for it: it ended
        normally with enough tool calls, a model key is there, skills can be written."""
        host = self._host
        settings = host.settings
        if finished.stop_reason != "end_turn" or not self.on or host.read_only:
            return
        if settings.sandbox == "read-only":
            return
        turn = last_turn(host.records.transcript)
        if tool_calls(turn) < settings.skill_enhance_min_tools:
            return
        try:
            host._model.client()
        except ModelError:
            return
        job = Job(
            router=host.router,
            settings=host.settings_source,
            model=host._model.client,
            system=host._model.system("skill:enhance"),
            context_window=host._loop.context_window,
            scope=host._session_hooks.scope(host._runner.notify),
            notify=host._runner.notify,
            account=host._account,
        )
        self._background.start(job, turn)

    async def aclose(self) -> None:
        """End a background enhancement still running (the session's close)."""
        await self._background.aclose()
