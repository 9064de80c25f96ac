"""A chat session's hooks (policy/hooks.py): who the session is to them, and the hooks
its turns run — SessionStart and UserPromptSubmit before a prompt, Stop after it.

`ChatSession` owns one `SessionHooks`. The hooks are the folder's, as its permission
gate carries them; a turn makes `scope` its current `HookScope` (turn_runner.py), and
the session's background work gets one too. SessionStart runs once, before the first
prompt the session gets here (`source`: "startup", or "resume" for a resumed one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import stages
from synapse_lsp.agent.loop import Emit, Loop, LoopResult
from synapse_lsp.agent.session_records import SessionRecords
from synapse_lsp.agent.turn_checkpoints import TurnCheckpoints
from synapse_lsp.events import Notice
from synapse_lsp.policy import hook_env
from synapse_lsp.policy.hooks import Hooks, HookScope, context_block
from synapse_lsp.policy.hooks import current as hook_scope

if TYPE_CHECKING:
    from synapse_lsp.router import BashRouter

log = logging.getLogger(__name__)
# How many times one turn's Stop hooks may send the agent on (a Ralph-style loop).
MAX_STOP_CONTINUATIONS = 8


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
            started = await self._session_start(scope)
            if started:
                blocks.append(context_block("SessionStart", started))
        verdict = await scope.hooks.user_prompt_submit(scope, text)
        if verdict.context:
            blocks.append(context_block("UserPromptSubmit", verdict.context))
        return verdict.blocked, blocks

    async def _session_start(self, scope: HookScope) -> list[str]:
        """SessionStart hooks, with a `$CLAUDE_ENV_FILE` whose exports the session shell
        then runs (policy/hook_env.py)."""
        with hook_env.env_file() as path:
            context = await scope.hooks.session_start(scope, self.source, str(path))
            commands, problems = hook_env.exports(path, self._loop.settings)
        for problem in problems:
            scope.notify(Notice(problem, "warning"))
        if commands:
            shell = self._router().shell
            result = await shell.run("\n".join(commands))
            if result.exit_code != 0:
                said = (result.stderr or result.stdout).strip()[:300]
                scope.notify(Notice(f"$CLAUDE_ENV_FILE exports failed: {said}", "warning"))
        return context

    async def pre_compact(self, focus: str, notify: Callable[[Notice], None]) -> None:
        """PreCompact hooks before `/compact` (`trigger` manual; the loop's own
        compaction runs them with `auto`: compaction.py)."""
        scope = self.scope(notify)
        if scope is not None:
            fields = {"trigger": "manual", "custom_instructions": focus}
            await scope.hooks.event(scope, "PreCompact", "manual", fields)

    async def end(self) -> None:
        """SessionEnd hooks as the session closes (`reason` "other"), when its
        SessionStart ran; their warnings go to the log."""
        scope = self.scope(lambda notice: log.warning("%s", notice.message))
        if self.started and scope is not None:
            self.started = False  # once (close may come twice)
            await scope.hooks.event(scope, "SessionEnd", "other", {"reason": "other"})

    async def stop(self, result: LoopResult, emit: Emit) -> LoopResult:
        """Stop hooks, when the turn ended normally (not by a hook's `continue: false`
        nor by the tool-failure breaker): while one blocks, the agent goes on with its
        reason, asked again with `stop_hook_active`, at most MAX_STOP_CONTINUATIONS
        times a turn."""
        await stages.at("stop_hooks")  # a cancel from here on: no Stop hook runs
        scope = hook_scope()
        if scope is None or not self._stops(result, scope) or not scope.hooks.has("Stop"):
            return result
        for continued in range(MAX_STOP_CONTINUATIONS + 1):
            await self._checkpoints.agent_acts()  # the Stop hooks' changes are the agent's
            reason = await scope.hooks.stop(scope, continued > 0)
            if reason is None:
                return result
            if continued == MAX_STOP_CONTINUATIONS:
                emit(
                    Notice(
                        "A Stop hook asked again to go on: not followed "
                        f"({MAX_STOP_CONTINUATIONS} continuations a turn at most).",
                        "warning",
                    )
                )
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
            if not self._stops(more, scope):
                return result
        return result

    def _stops(self, result: LoopResult, scope: HookScope) -> bool:
        """The loop ended on its own: not cut, not halted by a hook, not the breaker."""
        return result.stop_reason == "end_turn" and scope.halt is None and not self._loop.tripped
