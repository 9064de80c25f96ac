"""A chat session as an MCP server's host (`commands.McpHost`), and MCP prompts as the
faces' slash commands.

While one of its tools runs, an MCP server may ask the session to sample the model or to
ask the user (extensions/mcp_session.py routes the request to the calling command's
`ctx.mcp_host`, the session's `SessionMcp`):

- **sampling** is a permission question (`AskingGate.approve`: Allow once or Deny; no
  question under the `auto` policy; `--yes` answers Allow once; denied, saying why, where
  nobody can be asked: `chat -p`, `exec`). Approved, it runs on the session's own model
  (one plain request: the server's system prompt and messages, no tools) and its usage
  is the session's.
- **elicitation** goes to the face's `elicitor` (the REPL asks each field on the
  terminal, the editor and ACP client ask what their protocol can); none (`chat -p`,
  `exec`): declined, saying there is nobody to ask.

`/mcp:<server>:<prompt> args` is a prompt line in every face: the one turn driver
(agent/turns.py) expands it with the registry (`commands.PromptLookup`) before the turn
starts, and a `PromptError` ends the turn with its message, nothing sent to the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from synapse_lsp.commands import PromptError, PromptInfo, PromptLookup
from synapse_lsp.errors import ModelError
from synapse_lsp.events import Usage
from synapse_lsp.question import ElicitAnswer, Elicitation, SamplingReply, SamplingRequest

if TYPE_CHECKING:
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.config import Settings

log = logging.getLogger(__name__)

Elicitor = Callable[[Elicitation], Awaitable[ElicitAnswer]]

NOBODY = (
    "nobody to ask: this run answers no questions (synapse chat -p, synapse exec); "
    "use the REPL, an editor or an ACP client"
)
NO_GATE = "nobody can approve it (this session has no permission gate)"
PROMPT_PREFIX = "/mcp:"
_STOPS = {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}


class SessionMcp:
    """One chat session's `commands.McpHost` (module docstring). `elicitor` is the face's
    way of asking the user, set by the face (None: elicitation is declined)."""

    def __init__(
        self,
        gate: object,
        model: Callable[[], ModelClient],
        settings: Callable[[], Settings],
        account: Callable[[dict[str, Usage]], None] | None = None,
    ) -> None:
        self._gate = gate
        self._model = model
        self._settings = settings
        self._account = account
        self.elicitor: Elicitor | None = None
        # Awaited before a prompt line is expanded (`chat -p` starts its tools then).
        self.ready: Callable[[], Awaitable[None]] | None = None

    @classmethod
    def of(cls, session: Any, gate: object) -> SessionMcp:
        """The host of a `ChatSession` (its model, its usage) asking through `gate`."""
        return cls(
            gate,
            session._ensure_model,
            session.settings_source,
            session._account,
        )

    async def sample(self, request: SamplingRequest) -> SamplingReply | str:
        approve = getattr(self._gate, "approve", None)
        if approve is None:
            return NO_GATE
        preview = request.preview()
        message = (
            f"The MCP server {request.server} asks to use the model "
            f"(up to {request.max_tokens} tokens):\n  {preview}"
        )
        what = f"mcp:{request.server} sampling: {preview[:160]}"
        refused: str | None = await approve(what, message, "an MCP server asks to use the model")
        if refused is not None:
            return refused
        try:
            client = self._model()
        except ModelError as exc:
            return f"no model to sample: {exc.message}"
        try:
            return await self._run(client, request)
        except ModelError as exc:
            return f"the model call failed: {exc.message}"
        except Exception as exc:  # noqa: BLE001 - the server gets the reason, the turn goes on
            log.warning("sampling for %s failed", request.server, exc_info=True)
            return f"the model call failed: {exc}"

    async def _run(self, client: ModelClient, request: SamplingRequest) -> SamplingReply:
        from synapse_lsp.agent.model import StreamDone

        messages = [{"role": m.role, "content": m.text or "(empty)"} for m in request.messages]
        # With thinking on, the answer's budget comes on top of the thinking budget.
        limit = request.max_tokens + (client.thinking_budget or 0)
        done: StreamDone | None = None
        stream = client.stream(system=request.system or "", messages=messages, max_tokens=limit)
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, StreamDone):
                    done = item
        if done is None:  # pragma: no cover - stream() ends with StreamDone or raises
            raise ModelError("the model's answer did not finish")
        model = done.model or client.model
        if self._account is not None:
            self._account({model: done.usage})
        text = "".join(b.get("text", "") for b in done.content if b.get("type") == "text")
        return SamplingReply(text, model, _STOPS.get(done.stop_reason, "endTurn"))

    async def elicit(self, request: Elicitation) -> ElicitAnswer:
        elicitor = self.elicitor
        if elicitor is None:
            return ElicitAnswer("decline", reason=NOBODY)
        wait = self._settings().permission_timeout
        try:
            async with asyncio.timeout(wait):
                return await elicitor(request)
        except TimeoutError:
            return ElicitAnswer("cancel", reason=f"nobody answered within {wait:g} s")
        except Exception as exc:  # noqa: BLE001 - the face could not ask
            log.warning("elicitation for %s could not be asked", request.server, exc_info=True)
            return ElicitAnswer("cancel", reason=f"the question could not be asked ({exc})")


class OwnModel:
    """The model for a face with no chat session (`synapse exec`): built from the
    settings on first use (ModelError when it cannot be), closed by `aclose()`."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self._client: ModelClient | None = None

    def __call__(self) -> ModelClient:
        if self._client is None:
            from synapse_lsp.agent.model import ModelClient

            self._client = ModelClient.from_settings(self._settings())
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


# ------------------------------------------------------------- prompts as slash commands


def lookup(router: Any) -> PromptLookup | None:
    """The router's extension registry when it serves prompts, else None."""
    found = getattr(router, "extensions", None)
    return found if isinstance(found, PromptLookup) else None


def is_prompt_line(text: str) -> bool:
    """`/mcp:<server>:<prompt> ...`: a line the turn driver expands."""
    return text.lstrip().startswith(PROMPT_PREFIX)


def prompts(router: Any) -> list[PromptInfo]:
    """The MCP prompts offered as slash commands now ([] without a registry)."""
    found = lookup(router)
    if found is None:
        return []
    try:
        return sorted(found.prompts(), key=lambda p: p.name)
    except Exception:  # noqa: BLE001 - a listing never fails a face
        log.debug("listing MCP prompts failed", exc_info=True)
        return []


def listing(router: Any) -> str:
    """The prompts for `/help`: one `usage  description` line each ("" when none)."""
    found = prompts(router)
    if not found:
        return ""
    width = max(len(p.usage) for p in found)
    rows = [f"  {p.usage:<{width}}  {p.description}".rstrip() for p in found]
    return "MCP prompts (sent as your message):\n" + "\n".join(rows)


async def expand(router: Any, text: str) -> str:
    """The text a `/mcp:<server>:<prompt> args` line stands for; any other text as it
    is. PromptError says why it cannot be (shown to the user, no turn)."""
    if not is_prompt_line(text):
        return text
    import shlex

    word, _, rest = text.strip().partition(" ")
    found = lookup(router)
    if found is None:
        raise PromptError(f"{word}: MCP prompts are not available here (no extension registry)")
    ready = getattr(getattr(router, "mcp_host", None), "ready", None)
    if ready is not None:
        await ready()
    try:
        args = shlex.split(rest)
    except ValueError as exc:
        raise PromptError(f"{word}: cannot read the arguments ({exc})") from None
    return await found.render_prompt(word[1:], args)
