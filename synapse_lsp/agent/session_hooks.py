"""A chat session's hooks (policy/hooks.py): who the session is to them, and the hooks
its turns run — SessionStart and UserPromptSubmit before a prompt, Stop after it.

`ChatSession` owns one `SessionHooks`. The hooks are the folder's, as its permission
gate carries them; a turn makes `scope` its current `HookScope` (turn_runner.py), and
the session's background work gets one too. SessionStart runs once, before the first
prompt the session gets here (`source`: "startup", or "resume" for a resumed one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import stages
from synapse_lsp.agent.loop import Emit, Loop, LoopResult
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.events import Notice
from synapse_lsp.policy.hooks import Hooks, HookScope, context_block
from synapse_lsp.policy.hooks import current as hook_scope

if TYPE_CHECKING:
    from synapse_lsp.router import BashRouter


class SessionHooks:
    """The hooks of one session's turns, and the state they keep across turns."""

    def __init__(
        self,
        hooks: Callable[[], Hooks | None],
        records: SessionRecords,
        router: Callable[[], BashRouter],
        loop: Loop,
        checkpoints: TurnCheckpoints,
    ) -> None:
        self._hooks = hooks
        self._records = records
        self._router = router
        self._loop = loop
        self._checkpoints = checkpoints
        self.source = "startup"  # SessionStart's `source` ("resume" when resumed)
        self.started = False

    def scope(self, notify: Callable[[Notice], None]) -> HookScope | None:
        """Who this session is to its hooks; None when it has none."""
        hooks = self._hooks()
        if hooks is None:
            return None
        return HookScope(
            hooks,
            self._records.id,
            self._records.path(),
            lambda: self._router().shell.cwd,
            notify,
            view=lambda: self._router().shell.view,
        )

    async def prompt(self, text: str) -> tuple[str | None, list[dict[str, Any]]]:
        """SessionStart (before the session's first prompt here) and UserPromptSubmit:
        why the prompt is blocked (None: it is not), and the context blocks for the model."""
        scope = hook_scope()
        if scope is None:
            return None, []
        blocks: list[dict[str, Any]] = []
        if not self.started:
            self.started = True
            started = await scope.hooks.session_start(scope, self.source)
            if started:
                blocks.append(context_block("SessionStart", started))
        verdict = await scope.hooks.user_prompt_submit(scope, text)
        if verdict.context:
            blocks.append(context_block("UserPromptSubmit", verdict.context))
        return verdict.blocked, blocks

    async def stop(self, result: LoopResult, emit: Emit) -> LoopResult:
        """Stop hooks, when the turn ended normally: one may have the agent go on, once
        per turn (asked again with `stop_hook_active`, a second block is not followed)."""
        await stages.at("stop_hooks")  # a cancel from here on: no Stop hook runs
        scope = hook_scope()
        if scope is None or result.stop_reason != "end_turn" or scope.halt is not None:
            return result
        if scope.hooks._has("Stop"):  # the Stop hooks' changes are the agent's (hand_edits)
            await self._checkpoints.agent_acts()
        reason = await scope.hooks.stop(scope, False)
        if reason is None:
            return result
        emit(Notice(f"A Stop hook has the agent go on: {reason.splitlines()[0][:200]}"))
        feedback = [{"type": "text", "text": f"Stop hook feedback:\n{reason}"}]
        more = await self._loop.run(feedback, emit)
        result = LoopResult(
            more.stop_reason,
            result.usage + more.usage,
            more.final_text or result.final_text,
            model_calls=result.model_calls + more.model_calls,
        )
        again = more.stop_reason == "end_turn" and scope.halt is None
        if again:
            await self._checkpoints.agent_acts()
        if again and await scope.hooks.stop(scope, True) is not None:
            emit(Notice("A Stop hook asked again to go on: not followed (once a turn).", "warning"))
        return result
