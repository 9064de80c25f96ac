"""The ACP agent: `initialize`, sessions (new, load, list, modes), prompt turns, cancel.

Implements the SDK's `acp.Agent` protocol; `server.py` connects it to stdio. Every
session is a live chat (`agent.turns.LiveChat`, the one turn driver) with its
`AcpFace` (session.py) on the one core assembly; its turns' events are mapped to
`session/update`s (updates.py).
Stop reasons: end_turn, max_tokens, max_turns -> max_turn_requests, refusal,
cancelled; an error that ended the turn (the API failing after its retries, a
session another process writes) is a JSON-RPC error on `session/prompt`, and a
missing API key the auth-required error (-32000), so an editor can offer a login.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    AuthenticateResponse,
    AvailableCommandsUpdate,
    ClientCapabilities,
    ContentToolCallContent,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResourceContentBlock,
    SessionInfo,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
    ToolCallUpdate,
)

from synapse_lsp.acp.elicit import elicitor
from synapse_lsp.acp.files import ClientFiles
from synapse_lsp.acp.handshake import AUTH_METHOD_ID, has_api_key, initialize_result
from synapse_lsp.acp.session import (
    AcpChatSettings,
    AcpFace,
    AcpWorkspace,
    mcp_config,
    write_mcp_config,
)
from synapse_lsp.acp.updates import (
    STOP_REASONS,
    AcpUpdate,
    acp_usage,
    available_commands,
    event_update,
    live_output,
    text_block,
    tool_call_finished,
    tool_call_start,
    tool_kind,
)
from synapse_lsp.acp.warm import ready_for_prompt, sdk_ready
from synapse_lsp.agent.turn_context import Attachment, TurnContext
from synapse_lsp.config import SANDBOX_MODES, LiveSettings
from synapse_lsp.errors import SessionBusyError, SynapseError
from synapse_lsp.events import (
    Event,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutput,
    TurnFinished,
    UsageUpdated,
)
from synapse_lsp.files import uri_to_path
from synapse_lsp.question import Question
from synapse_lsp.summaries.tool_calls import tool_call_summary

if TYPE_CHECKING:
    from acp.interfaces import Client

    from synapse_lsp.acp.session import AcpChat
    from synapse_lsp.agent.session import ChatSession
    from synapse_lsp.agent.store import ChatStore

log = logging.getLogger(__name__)

# A question waits this long for its tool call's `tool_call` update to go out first.
ANNOUNCE_WAIT = 5.0
LIVE_OUTPUT_KEPT = 64 * 1024  # of a running command's output, the tail kept to show
MODE_TEXT = {
    "read-only": ("Read only", "The agent reads and runs commands; nothing it runs may write."),
    "workspace-write": (
        "Workspace write",
        "The agent may change files in the workspace; writes elsewhere ask first.",
    ),
    "full-access": ("Full access", "No sandbox: commands run with your permissions."),
}
# Slash commands of the one registry that mean something here (an ACP client makes,
# switches and closes sessions itself; the model is the client's to pick).
ACP_SLASH = (
    "help",
    "sessions",
    "context",
    "compact",
    "cost",
    "checkpoints",
    "rewind",
    "hooks",
    "skill",
)


class SynapseAcpAgent:
    """The `acp.Agent` of `synapse acp`."""

    def __init__(self, settings: LiveSettings | None = None) -> None:
        self.live = settings or LiveSettings()
        self._conn: Client | None = None
        self._client_caps = ClientCapabilities()
        self._store: ChatStore | None = None
        self.sessions: dict[str, AcpChat] = {}
        self._announce: dict[str, AcpChat] = {}  # after the session/new answer is out
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    # ------------------------------------------------------------ connection

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def conn(self) -> Client:
        if self._conn is None:
            raise RequestError.internal_error({"details": "no client connection"})
        return self._conn

    def message_sent(self, message: dict[str, Any]) -> None:
        """A message went out (transport hook): a new session's commands follow its answer."""
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            live = self._announce.pop(result["sessionId"], None)
            if live is not None:
                task = asyncio.get_running_loop().create_task(self._announce_commands(live))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    @property
    def store(self) -> ChatStore:
        root = self.live().synapse_home / "sessions"
        if self._store is None or self._store.root != root:
            from synapse_lsp.agent.store import ChatStore

            self._store = ChatStore(root)
        return self._store

    def has_key(self) -> bool:
        return has_api_key(self.live())

    # ------------------------------------------------------------ initialize

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.accept_client(client_capabilities, client_info)
        return InitializeResponse.model_validate(
            initialize_result(self.live(), has_key=self.has_key())
        )

    def accept_client(
        self, capabilities: ClientCapabilities | None, info: Implementation | None
    ) -> None:
        """What `initialize` told us about the client (also when `server.py` answered it
        before the SDK was imported)."""
        self._client_caps = capabilities or ClientCapabilities()
        if info is not None:
            log.info("client %s %s", info.name, info.version)

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse | None:
        if method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params({"methodId": f"unknown method {method_id!r}"})
        if not self.has_key():
            raise RequestError.auth_required({"details": self._no_key()})
        return AuthenticateResponse()

    def _no_key(self) -> str:
        from synapse_lsp.agent.model import NO_KEY_HELP

        return NO_KEY_HELP.format(env=self.live().api_key_env)

    # -------------------------------------------------------------- sessions

    def _get(self, session_id: str) -> AcpChat:
        live = self.sessions.get(session_id)
        if live is None:
            raise RequestError.invalid_params(
                {"sessionId": f"unknown session {session_id!r} (session/new or session/load)"}
            )
        return live

    def _modes(self, face: AcpFace) -> SessionModeState:
        return SessionModeState(
            current_mode_id=face.settings().sandbox,
            available_modes=[
                SessionMode(id=m, name=MODE_TEXT[m][0], description=MODE_TEXT[m][1])
                for m in SANDBOX_MODES
                if m in MODE_TEXT
            ],
        )

    async def _open(
        self, session_id: str, cwd: str, mcp_servers: list[Any] | None, meta: dict[str, Any]
    ) -> AcpFace:
        """A session's settings, workspace and gateway (its conversation comes after)."""
        root = Path(cwd)
        if not root.is_absolute():
            raise RequestError.invalid_params({"cwd": f"must be an absolute path, not {cwd!r}"})
        if not root.is_dir():
            raise RequestError.invalid_params({"cwd": f"{cwd} is not a directory"})
        layer = meta.get("synapse") if isinstance(meta.get("synapse"), dict) else {}
        folder_settings = self.live.for_folder(root)
        if folder_settings.refusals:  # a misspelt or bad restrictive setting: not run without it
            raise RequestError.invalid_request(
                {
                    "details": "settings refused: " + "; ".join(folder_settings.refusals),
                    "hint": "fix the setting; Synapse does not start a session without a "
                    "restriction you set",
                }
            )
        settings = AcpChatSettings(folder_settings, layer or {})
        for problem in settings.problems:
            log.warning("session %s settings: %s", session_id, problem)
        fs = self._client_caps.fs
        files = ClientFiles(
            self._conn,  # type: ignore[arg-type]
            session_id,
            can_read=bool(fs and fs.read_text_file),
            can_write=bool(fs and fs.write_text_file),
        )
        table, problems = mcp_config(list(mcp_servers or []))
        for problem in problems:
            log.warning("session %s: %s", session_id, problem)
        session_mcp = None
        if table:
            folder = settings().synapse_home / "acp" / session_id
            session_mcp = write_mcp_config(folder, table)
        holder: list[AcpFace] = []

        async def ask(question: Question) -> str | None:
            return await self._ask(holder[0], question)

        workspace = AcpWorkspace(
            root,
            settings,
            files=lambda: files,
            ask=ask,
            session_mcp=session_mcp,
        )
        face = AcpFace(session_id, root, settings, workspace, files)
        holder.append(face)
        try:
            # MCP servers (the client's too) connect in the background: a command line
            # naming one still connecting waits for it (router, bounded), and the first
            # prompt never waits for them.
            await workspace.start()
        except BaseException:
            await workspace.close()
            raise
        return face

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        from synapse_lsp.agent.session import ChatSession
        from synapse_lsp.agent.store import new_session_id
        from synapse_lsp.agent.turns import LiveChat

        session_id = new_session_id()
        face = await self._open(session_id, cwd, mcp_servers, kwargs)
        router = face.workspace.router
        assert router is not None
        try:
            chat = ChatSession(
                router,
                face.settings,
                store=self.store,
                session_id=session_id,
                workspace_root=face.cwd,
            )
            await ready_for_prompt(chat)  # cancelled: nothing left behind
        except BaseException:
            await face.close()
            raise
        live = LiveChat(chat, face)
        chat.mcp.elicitor = elicitor(self.conn, session_id, self._client_caps)
        self.sessions[session_id] = live
        self._announce[session_id] = live
        return NewSessionResponse(session_id=session_id, modes=self._modes(face))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        """Replay a stored (or live) session's history, then answer. The session runs in
        the client's `cwd` (which may differ from where it was stored)."""
        from synapse_lsp.agent.session import ChatSession
        from synapse_lsp.agent.store import SessionNotFoundError
        from synapse_lsp.agent.turns import LiveChat

        live = self.sessions.get(session_id)
        if live is None:
            try:
                stored = self.store.exists(session_id)
            except SessionNotFoundError as exc:  # not an id at all (`../../etc`)
                raise RequestError.invalid_params({"sessionId": exc.message}) from None
            if not stored:
                raise RequestError.invalid_params({"sessionId": f"no session {session_id!r}"})
            face = await self._open(session_id, cwd, mcp_servers, kwargs)
            router = face.workspace.router
            assert router is not None
            try:
                chat = ChatSession.resume(
                    self.store, session_id, router, face.settings, workspace_root=face.cwd
                )
                await ready_for_prompt(chat)
            except SessionNotFoundError:
                await face.close()
                raise RequestError.invalid_params(
                    {"sessionId": f"no session {session_id!r}"}
                ) from None
            except BaseException:
                await face.close()
                raise
            live = LiveChat(chat, face)
            chat.mcp.elicitor = elicitor(self.conn, session_id, self._client_caps)
            self.sessions[session_id] = live
        for event in live.chat.transcript():
            update = self._replayed(live, event)
            if update is not None:
                await self.conn.session_update(session_id, update)
        await self._announce_commands(live)
        return LoadSessionResponse(modes=self._modes(live.face))

    def _replayed(self, live: AcpChat, event: Event) -> AcpUpdate | None:
        skip = isinstance(event, TurnFinished | UsageUpdated | ToolOutput)
        return None if skip else event_update(event, cwd=live.face.cwd)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        rows: dict[str, SessionInfo] = {}
        want = _real(cwd) if cwd else None
        try:
            stored = self.store.list()
        except Exception as exc:
            log.warning("listing sessions: %s", exc)
            stored = []
        for info in stored:
            where = info.workspace or ""
            if where.startswith("file:"):  # stored as a URI by an older face
                where = str(uri_to_path(where, resolve=False) or "")
            if not Path(where).is_absolute() or (want is not None and _real(where) != want):
                continue  # ACP lists a session with its (absolute) folder
            rows[info.id] = SessionInfo(
                session_id=info.id, cwd=where, title=info.title, updated_at=info.updated_at
            )
        for sid, live in self.sessions.items():
            if sid in rows or (want is not None and _real(str(live.face.cwd)) != want):
                continue
            rows[sid] = SessionInfo(session_id=sid, cwd=str(live.face.cwd), title=live.chat.title)
        return ListSessionsResponse(sessions=list(rows.values()))

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse | None:
        live = self._get(session_id)
        if mode_id not in SANDBOX_MODES:
            raise RequestError.invalid_params(
                {"modeId": f"{mode_id!r} is not one of {', '.join(SANDBOX_MODES)}"}
            )
        live.face.settings.update({"sandbox": mode_id})
        await self.conn.session_update(
            session_id,
            CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id),
        )
        return SetSessionModeResponse()

    async def _announce_commands(self, live: AcpChat, again: bool = True) -> None:
        """The slash commands, the session's custom ones (`.claude/commands`) included;
        `again` once its MCP servers are connected, if they brought prompts (a task)."""
        commands = available_commands(ACP_SLASH, live.chat)
        with contextlib.suppress(Exception):
            await self.conn.session_update(
                live.id,
                AvailableCommandsUpdate(
                    session_update="available_commands_update", available_commands=commands
                ),
            )
        if again:
            task = asyncio.get_running_loop().create_task(self._mcp_prompts(live, commands))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _mcp_prompts(self, live: AcpChat, before: list[Any]) -> None:
        with contextlib.suppress(Exception):
            if (registry := await live.face.workspace.registry_ready()) is not None:
                await registry.wait_for_pending(60.0)
        if available_commands(ACP_SLASH, live.chat) != before:
            await self._announce_commands(live, again=False)

    # ---------------------------------------------------------------- prompt

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        live = self._get(session_id)
        if live.busy:
            raise RequestError.invalid_request(
                {"details": f"session {session_id} is already running a turn; cancel it first"}
            )
        text, context = prompt_text(prompt)
        slash = await self._slash(live, text)
        if slash is not None:
            return slash
        if not self.has_key():
            raise RequestError.auth_required({"details": self._no_key()})

        async def render(event: Event) -> None:
            update = self._update(live.face, event)
            if update is not None:
                await self.conn.session_update(live.id, update)
            if isinstance(event, ToolCallStarted):  # a question about it may follow now
                live.face.announced(event.tool_call_id).set()

        try:
            # The model SDK may still be importing (server.py): waited for off the loop.
            finished = await live.run(text, context, render, prepare=sdk_ready)
        except SessionBusyError as exc:
            raise RequestError.invalid_request({"details": exc.message}) from None
        finally:
            live.face.turn_ended()
        await self._send_usage(live)
        reason = STOP_REASONS.get(finished.stop_reason)
        if reason is None:  # "error": the history is left valid by the session
            message = finished.error or "the turn failed"
            if "API key" in message and not self.has_key():
                raise RequestError.auth_required({"details": message})
            raise RequestError(-32603, message, {"stopReason": "error"})
        return PromptResponse(stop_reason=reason, usage=acp_usage(finished.usage))  # type: ignore[arg-type]

    async def _send_usage(self, live: AcpChat) -> None:
        """ACP `usage_update` after a turn: the context in use against the model's window
        and the session's cost (left out when a model used has no price)."""
        from acp.schema import Cost, UsageUpdate

        chat = live.chat
        cost = chat.session_cost()
        update = UsageUpdate(
            session_update="usage_update",
            used=max(chat.context_tokens, 0),
            size=chat.context_window,
            cost=Cost(amount=cost.amount, currency=cost.currency)
            if cost.amount is not None
            else None,
        )
        with contextlib.suppress(Exception):  # a client that cannot take it loses only this
            await self.conn.session_update(live.id, update)

    def _update(self, face: AcpFace, event: Event) -> AcpUpdate | None:
        """The update of one turn event (live output comes paced by the turn driver's
        output throttle: each one re-sends the call's tail)."""
        if isinstance(event, ToolCallStarted):
            face.open_calls[event.tool_call_id] = event.command
            return tool_call_start(event, face.shell_cwd)
        if isinstance(event, ToolOutput):
            so_far = face.output.get(event.tool_call_id, "") + event.chunk
            face.output[event.tool_call_id] = so_far[-LIVE_OUTPUT_KEPT:]
            return live_output(event.tool_call_id, so_far, event.parent_tool_call_id)
        if isinstance(event, ToolCallFinished):
            face.open_calls.pop(event.tool_call_id, None)
            face.output.pop(event.tool_call_id, None)
            face.announcements.pop(event.tool_call_id, None)
            return tool_call_finished(event)
        if isinstance(event, TurnFinished | UsageUpdated):
            return None
        return event_update(event, cwd=face.shell_cwd)

    async def _slash(self, live: AcpChat, text: str) -> PromptResponse | None:
        """`/help`, `/context`, `/rewind 2`...: the slash registry's answer, not a model
        turn (`ACP_SLASH`)."""
        from synapse_lsp.agent.slash import SESSION_COMMANDS

        word = text.strip().split(" ", 1)[0] if text.strip().startswith("/") else ""
        command = SESSION_COMMANDS.get(word) if word else None
        if command is None or command.name not in ACP_SLASH:
            return None
        if live.running and command.name in ("compact", "rewind"):
            raise RequestError.invalid_request(
                {"details": f"a turn is running: /{command.name} after it"}
            )
        try:
            answer = await SESSION_COMMANDS.run(_SlashHost(self, live), text)
        except SynapseError as exc:
            answer = exc.message
        await self.conn.session_update(
            live.id,
            AgentMessageChunk(session_update="agent_message_chunk", content=text_block(answer)),
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.sessions.get(session_id)
        if live is not None:
            live.cancel()

    # ------------------------------------------------------------ permission

    async def _ask(self, live: AcpFace, question: Question) -> str | None:
        """The gate's question as `session/request_permission` about the tool call it
        names (`question.tool_call_id`, sent once that call's `tool_call` update went
        out); its options by their own ids and kinds. The chosen option's title."""
        call_id = question.tool_call_id
        if call_id is None:  # no tool call of a turn runs the line
            live.asked += 1
            call_id = f"permission-{live.asked}"
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ANNOUNCE_WAIT):
                    await live.announced(call_id).wait()
        command = live.open_calls.get(call_id) or question.command
        title, kind, _ = tool_call_summary(command)
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=title,
            kind=tool_kind(kind),  # type: ignore[arg-type]
            status="pending",
            raw_input={"command": command},
            content=[ContentToolCallContent(type="content", content=text_block(question.message))],
        )
        response = await self.conn.request_permission(
            session_id=live.id, tool_call=tool_call, options=permission_options(question)
        )
        outcome = response.outcome
        if isinstance(outcome, AllowedOutcome):
            return question.title_of(outcome.option_id)
        return None

    # --------------------------------------------------------------- closing

    async def close(self) -> None:
        """Dispose every session: turns, shells, MCP children."""
        if self._closing:
            return
        self._closing = True
        sessions = list(self.sessions.values())
        self.sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    def child_pids(self) -> list[int]:
        return [pid for s in self.sessions.values() for pid in s.face.workspace.child_pids()]


class _SlashHost:
    """What the slash commands may do from an ACP client."""

    def __init__(self, agent: SynapseAcpAgent, live: AcpChat) -> None:
        self._agent = agent
        self._live = live

    def chat_session(self) -> ChatSession | None:
        """The session the command was typed in (`/context`, `/rewind`, `/hooks`...)."""
        return self._live.chat

    def list_sessions(self) -> list[tuple[str, str, str]]:
        rows = [(i.id, i.updated_at, i.title) for i in self._agent.store.list()]
        return list(reversed(rows))

    async def new_session(self) -> str:
        raise SynapseError("start a new session from your editor (ACP session/new)")

    async def resume(self, session_id: str) -> str:
        raise SynapseError("load a session from your editor's history (ACP session/load)")

    def request_exit(self) -> None:
        return None


def permission_options(question: Question) -> list[PermissionOption]:
    """The question's options as ACP's, each with its own id and kind (allow_once,
    allow_always, reject_once; reject_always, "Always deny `<prefix>` here", is not a
    button elsewhere but ACP has it: it remembers the deny)."""
    return [PermissionOption(option_id=o.id, name=o.title, kind=o.kind) for o in question.options]


def prompt_text(blocks: list[Any]) -> tuple[str, TurnContext | None]:
    """The user's text (resource links and embedded resources named inline, as `@name`)
    and the context the model gets with it (embedded resources' text, linked resources)."""
    parts: list[str] = []
    attachments: list[Attachment] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"@{block.name or block.uri}")
            attachments.append(Attachment(block.uri, None, block.title or block.name))
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            name = resource.uri.rsplit("/", 1)[-1] or resource.uri
            parts.append(f"@{name}")
            if isinstance(resource, TextResourceContents):
                attachments.append(Attachment(resource.uri, resource.text, None))
            else:
                attachments.append(Attachment(resource.uri, None, "binary, not shown"))
        elif isinstance(block, ImageContentBlock):
            parts.append("[an image, not supported by this agent]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}, not supported by this agent]")
    text = _join(parts)
    context = TurnContext(attachments=tuple(attachments)) if attachments else None
    return text, context


def _join(parts: list[str]) -> str:
    """Concatenate prompt pieces the way an editor split them (`Fix `, link, ` please`),
    with a space where two pieces would otherwise run together."""
    out = ""
    for part in parts:
        if out and part and not out[-1].isspace() and not part[0].isspace():
            out += " "
        out += part
    return out


def _real(path: str) -> str:
    with contextlib.suppress(OSError, ValueError):
        return os.path.realpath(path)
    return path
