"""The `synapse.*` command handlers: typed params in, one call to the core, typed result out.

pygls structures each command's one object argument into the handler's `params`
annotation (protocol.py; a bad argument is InvalidParams naming the field and
never reaches a handler) and serialises the returned result. `handler()`
registers a function in `HANDLERS` and wraps it with what every command shares:
wait for settings and the core modules, `SynapseError` -> RequestFailed, any
other exception -> an error reply (logged) while the server lives on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import typing
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pygls.exceptions import JsonRpcException

from synapse_lsp import __version__
from synapse_lsp.agent.turn_numbers import label
from synapse_lsp.errors import SynapseError
from synapse_lsp.lsp.protocol import (
    COMMANDS,
    INTERNAL_ERROR,
    SESSION_CANCEL,
    SESSION_CHECKPOINTS,
    SESSION_CONTEXT,
    SESSION_DELETE,
    SESSION_LIST,
    SESSION_LOAD,
    SESSION_NEW,
    SESSION_PROMPT,
    SESSION_REWIND,
    SHELL_RESTART,
    SHELL_RUN,
    STATUS,
    TOOLS_REFRESH,
    TOOLS_SEARCH,
    ChangedFile,
    CheckpointInfo,
    ContextParts,
    Cost,
    PromptContext,
    SandboxInfo,
    SessionCancelParams,
    SessionCancelResult,
    SessionCheckpointsParams,
    SessionCheckpointsResult,
    SessionContextParams,
    SessionContextResult,
    SessionDeleteParams,
    SessionDeleteResult,
    SessionListParams,
    SessionListResult,
    SessionLoadParams,
    SessionLoadResult,
    SessionNewParams,
    SessionNewResult,
    SessionPromptParams,
    SessionPromptResult,
    SessionRewindParams,
    SessionRewindResult,
    ShellRestartParams,
    ShellRestartResult,
    ShellRunParams,
    ShellRunResult,
    StatusParams,
    StatusResult,
    ToolInfo,
    ToolsRefreshParams,
    ToolsRefreshResult,
    ToolsSearchParams,
    ToolsSearchResult,
    WorkspaceStatus,
    request_failed,
)
from synapse_lsp.lsp.sessions import title_of
from synapse_lsp.lsp.wire import from_wire

if TYPE_CHECKING:
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.turn_context import TurnContext
    from synapse_lsp.config import Settings
    from synapse_lsp.lsp.sessions import LiveChats
    from synapse_lsp.lsp.workspace import WorkspaceContext

log = logging.getLogger(__name__)


class Host(Protocol):
    """What the handlers need from the server (the server is one; tests may build others)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def workspaces(self) -> dict[str, WorkspaceContext]: ...

    @property
    def chats(self) -> LiveChats: ...

    def workspace_for(self, uri: str | None, command: str) -> WorkspaceContext: ...

    def work_progress(self, title: str) -> AbstractAsyncContextManager[None]: ...

    def request_id(self) -> Any:
        """The JSON-RPC id of the request being handled."""
        ...

    async def before_command(self) -> None:
        """Wait (bounded) for the first settings and the core modules' warm-up."""
        ...

    async def ask_user(self, message: str, actions: tuple[str, ...]) -> str | None:
        """A question in the editor (window/showMessageRequest); the action picked."""
        ...


Handler = Callable[[Host, Any], Awaitable[Any]]
H = TypeVar("H", bound=Handler)

HANDLERS: dict[str, Handler] = {}
"""Command name -> the wrapped handler the server registers with pygls."""


def handler(name: str) -> Callable[[H], H]:
    """Register `fn` as the handler of command `name` (its params/result must be protocol's)."""

    def register(fn: H) -> H:
        hints = typing.get_type_hints(fn)
        spec = COMMANDS[name]
        assert hints["params"] is spec.params and hints["return"] is spec.result, name

        @functools.wraps(fn)  # pygls reads the signature (and `params`' class) through this
        async def run(ls: Host, params: Any) -> Any:
            await ls.before_command()
            try:
                return await fn(ls, params)
            except SynapseError as exc:
                raise request_failed(f"{name}: {exc.message}", "error") from None
            except (JsonRpcException, asyncio.CancelledError):
                raise
            except Exception as exc:  # a bug or an unexpected state: answer, log, live on
                log.exception("%s failed", name)
                raise JsonRpcException(
                    f"{name}: internal error: {type(exc).__name__}: {exc} "
                    "(details in the server log)",
                    code=INTERNAL_ERROR,
                ) from None

        HANDLERS[name] = run
        return fn

    return register


# ---------------------------------------------------------------- sessions


@handler(SESSION_NEW)
async def session_new(ls: Host, params: SessionNewParams) -> SessionNewResult:
    ws = ls.workspace_for(params.workspace_uri, SESSION_NEW)
    live = await ls.chats.new(ws)
    return SessionNewResult(session_id=live.id, workspace_uri=ws.uri, title=title_of(live))


@handler(SESSION_LIST)
async def session_list(ls: Host, params: SessionListParams) -> SessionListResult:
    uri = params.workspace_uri
    ws = ls.workspace_for(uri, SESSION_LIST) if uri is not None else None
    return SessionListResult(sessions=ls.chats.list(ws))


@handler(SESSION_LOAD)
async def session_load(ls: Host, params: SessionLoadParams) -> SessionLoadResult:
    live = await ls.chats.load(params.session_id, params.workspace_uri, SESSION_LOAD)
    return SessionLoadResult(
        session_id=live.id, title=title_of(live), workspace_uri=live.face.workspace.uri
    )


@handler(SESSION_DELETE)
async def session_delete(ls: Host, params: SessionDeleteParams) -> SessionDeleteResult:
    await ls.chats.delete(params.session_id, SESSION_DELETE)
    return SessionDeleteResult(deleted=True)


@handler(SESSION_PROMPT)
async def session_prompt(ls: Host, params: SessionPromptParams) -> SessionPromptResult:
    finished = await ls.chats.prompt(
        params.session_id,
        params.text,
        turn_context(params.context),
        request_id=ls.request_id(),
        command=SESSION_PROMPT,
    )
    from synapse_lsp.lsp.updates import token_usage

    live = ls.chats.live.get(params.session_id)  # None if deleted meanwhile
    return SessionPromptResult(
        stop_reason=finished.stop_reason,
        usage=token_usage(finished.usage),
        error=finished.error,
        session_usage=token_usage(live.chat.usage) if live is not None else None,
        cost=cost_of(live.chat) if live is not None else None,
    )


_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}
PICKER_LABEL = 200  # characters of a checkpoint's label (the pickers cut it further)


@handler(SESSION_CHECKPOINTS)
async def session_checkpoints(
    ls: Host, params: SessionCheckpointsParams
) -> SessionCheckpointsResult:
    chat = ls.chats.get(params.session_id, SESSION_CHECKPOINTS).chat
    infos = [
        CheckpointInfo(
            turn=cp.turn,
            prompt=label(cp.prompt, PICKER_LABEL),  # the user's own words, one line
            started_at=cp.started_at,
            finished=cp.after is not None,
            changed=[
                ChangedFile(path=path, status=_STATUS.get(status[:1], "modified"))  # type: ignore[arg-type]
                for status, path in cp.changed
            ],
            ignored_changed=list(cp.ignored_changed),
            not_kept=list(cp.skipped),
        )
        for cp in chat.checkpoints.kept()
    ]
    result = SessionCheckpointsResult(checkpoints=infos)
    if chat.checkpoints.disabled is not None:
        result.disabled = chat.checkpoints.disabled
    return result


@handler(SESSION_REWIND)
async def session_rewind(ls: Host, params: SessionRewindParams) -> SessionRewindResult:
    from synapse_lsp.errors import SessionBusyError

    live = ls.chats.get(params.session_id, SESSION_REWIND)
    chat = live.chat

    async def decide(path: str) -> bool:
        if params.on_conflict != "ask":
            return params.on_conflict == "overwrite"
        answer = await ls.ask_user(
            f"Rewind: {path} was changed by you or another program (not only by the "
            "agent) during or after the turn. Put back the version from before the turn "
            "anyway?",
            ("Restore it", "Keep current"),
        )
        return answer == "Restore it"

    try:
        if live.running:  # a turn being prepared counts as running too
            raise SessionBusyError("A turn is running: rewind after it ends (or cancel it).")
        report = await chat.rewind(params.turn, truncate=params.truncate, decide=decide)
    except SessionBusyError as exc:
        raise request_failed(exc.message, "session_busy") from None
    return SessionRewindResult(
        restored=report.restored,
        deleted=report.deleted,
        skipped=report.skipped,
        overwritten=report.overwritten,
        not_restorable=report.not_restorable,
        repository_changed=report.repository_changed,
        truncated=report.truncated,
        problems=report.problems,
        text=report.text(),
    )


@handler(SESSION_CONTEXT)
async def session_context(ls: Host, params: SessionContextParams) -> SessionContextResult:
    from synapse_lsp.lsp.updates import token_usage

    chat = ls.chats.get(params.session_id, SESSION_CONTEXT).chat
    report = await chat.context_report()
    return SessionContextResult(
        model=report.model,
        context_window=report.window,
        total=report.total,
        parts=ContextParts(
            system=report.system,
            tools=report.tools,
            history=report.history,
            tool_outputs=report.tool_outputs,
        ),
        source=report.source,
        note=report.note,
        last_turn_usage=token_usage(chat.turn_cost().usage),
        session_usage=token_usage(chat.usage),
        cost=cost_of(chat),
    )


def cost_of(chat: ChatSession) -> Cost:
    """The last turn's and the session's cost (the pricing table, `pricing` over it)."""
    turn, session = chat.turn_cost(), chat.session_cost()
    return Cost(
        currency=session.currency,
        turn=turn.amount,
        session=session.amount,
        unpriced=sorted({*turn.unpriced, *session.unpriced}),
    )


@handler(SESSION_CANCEL)
async def session_cancel(ls: Host, params: SessionCancelParams) -> SessionCancelResult:
    return SessionCancelResult(cancelled=ls.chats.cancel(params.session_id, SESSION_CANCEL))


def turn_context(context: PromptContext | None) -> TurnContext | None:
    """The editor's context as the agent takes it (positions as the editor sent them)."""
    if context is None:
        return None
    from synapse_lsp.agent.turn_context import Selection, TurnContext

    sel = context.selection
    selection = (
        Selection(
            uri=sel.uri,
            text=sel.text,
            start_line=sel.range.start.line,
            start_character=sel.range.start.character,
            end_line=sel.range.end.line,
            end_character=sel.range.end.character,
        )
        if sel is not None
        else None
    )
    return TurnContext(
        active_file=context.active_file,
        selection=selection,
        open_files=tuple(context.open_files),
    )


# ------------------------------------------------------------------- shell


@handler(SHELL_RUN)
async def shell_run(ls: Host, params: ShellRunParams) -> ShellRunResult:
    if params.session_id is not None:
        # The REPL's `!` for editors: the chat session's own shell (its cwd and env),
        # through its router (built-ins, `mcp:`/`skill:`, `task:`), its gate asking.
        live = ls.chats.get(params.session_id, SHELL_RUN)
        router = live.chat.router
        if "mcp:" in params.command:
            await live.face.workspace.registry_ready()
        if params.timeout is not None:
            source, limit = router.settings_source, params.timeout
            router = router.derive(settings=lambda: replace(source(), command_timeout=limit))
        result = await router.route(params.command)
    else:
        ws = ls.workspace_for(params.workspace_uri, SHELL_RUN)
        result = await ws.run(params.command, timeout=params.timeout)
    return ShellRunResult(
        exit_code=result.exit_code,
        stdout=result.stdout,
        stderr=result.stderr,
        is_error=result.is_error,
        layer=str(result.layer),
        category=str(result.category) if result.category is not None else None,
        text=None if result.text == result.stdout else result.text,
    )


@handler(SHELL_RESTART)
async def shell_restart(ls: Host, params: ShellRestartParams) -> ShellRestartResult:
    if params.session_id is not None:
        await ls.chats.get(params.session_id, SHELL_RESTART).face.shell.restart()
    else:
        await ls.workspace_for(params.workspace_uri, SHELL_RESTART).restart_shell()
    return ShellRestartResult(restarted=True)


# ------------------------------------------------------------------- tools


@handler(TOOLS_SEARCH)
async def tools_search(ls: Host, params: ToolsSearchParams) -> ToolsSearchResult:
    ws = ls.workspace_for(params.workspace_uri, TOOLS_SEARCH)
    await ws.registry_ready()
    matches = ws.search(params.query, params.type)
    return ToolsSearchResult(tools=[from_wire(match.as_dict(), ToolInfo) for match in matches])


@handler(TOOLS_REFRESH)
async def tools_refresh(ls: Host, params: ToolsRefreshParams) -> ToolsRefreshResult:
    ws = ls.workspace_for(params.workspace_uri, TOOLS_REFRESH)
    async with ls.work_progress(f"Synapse: refreshing {params.what} tools"):
        counts = await ws.refresh_tools(params.what)
    return ToolsRefreshResult(tools=int(counts["tools"]), errors=list(counts["errors"]))


@handler(STATUS)
async def status(ls: Host, params: StatusParams) -> StatusResult:
    from synapse_lsp import sandbox

    settings = ls.settings
    confined = await asyncio.to_thread(sandbox.status, settings)  # probes bwrap once
    return StatusResult(
        sandbox=SandboxInfo(
            mode=confined.mode,
            network=confined.network,
            sandboxed=confined.sandboxed,
            description=confined.describe(),
            reason=confined.reason,
        ),
        version=__version__,
        model=settings.model,
        max_tokens=settings.max_tokens,
        thinking_budget=settings.thinking_budget,
        api_key=bool(os.environ.get(settings.api_key_env)),
        workspaces=[
            WorkspaceStatus(
                uri=ws.uri,
                sessions=len(ws.sessions),
                busy_sessions=sum(1 for s in ws.sessions.values() if s.busy),
                tools=ws.tool_count(),
                trusted=ws.trusted,
            )
            for ws in ls.workspaces.values()
        ],
    )
