"""The permission gate's questions in the editor (`question.Question`).

A client that offers `capabilities.experimental.synapse.requestPermission: true` gets
the question as data, `synapse/requestPermission` (RequestPermissionParams: the tool
call it is about by id, the line, its steps, the reason, the options with ids and
kinds) and answers with an option id; any other client gets the same question as prose,
`window/showMessageRequest`, and answers with a title (docs/protocol.md, Permissions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from lsprotocol import types

from synapse_lsp.lsp.names import REQUEST_PERMISSION
from synapse_lsp.lsp.wire import from_wire, to_wire
from synapse_lsp.question import Asker, Question

if TYPE_CHECKING:  # the protocol's classes load after `initialize` (names.py)
    from synapse_lsp.lsp.protocol import RequestPermissionParams


class _Server(Protocol):
    """What asking needs of the server (pygls' `LanguageServer` and `ask_user`)."""

    @property
    def client_capabilities(self) -> types.ClientCapabilities: ...

    @property
    def protocol(self) -> Any: ...

    async def ask_user(self, message: str, actions: tuple[str, ...]) -> str | None: ...


def offers_requests(capabilities: types.ClientCapabilities | None) -> bool:
    """The client takes `synapse/requestPermission` (it says so in `initialize`)."""
    experimental = capabilities.experimental if capabilities is not None else None
    ours = experimental.get("synapse") if isinstance(experimental, dict) else None
    return isinstance(ours, dict) and ours.get("requestPermission") is True


def params(question: Question) -> RequestPermissionParams:
    """The question on the wire: every field as data, the buttons in order."""
    from synapse_lsp.lsp.protocol import PermissionOption, RequestPermissionParams

    return RequestPermissionParams(
        tool_call_id=question.tool_call_id,
        command=question.command,
        cwd=question.cwd,
        steps=list(question.steps),
        reason=question.reason,
        options=[
            PermissionOption(option_id=o.id, title=o.title, kind=o.kind) for o in question.shown
        ],
        message=question.message,
    )


def asker(server: _Server) -> Asker:
    """The gate's `question.Asker` for the editor behind `server`."""

    async def ask(question: Question) -> str | None:
        try:
            typed = offers_requests(server.client_capabilities)
        except Exception:  # not initialized: no capabilities to read
            typed = False
        if not typed:
            return await server.ask_user(question.message, question.actions)
        from synapse_lsp.lsp.protocol import RequestPermissionResult

        result = await server.protocol.send_request_async(
            REQUEST_PERMISSION, to_wire(params(question))
        )
        if hasattr(result, "_asdict"):  # pygls gives an unknown method's result as a namedtuple
            result = result._asdict()
        chosen = from_wire(result if result is not None else {}, RequestPermissionResult)
        # only a button that was offered answers (an unknown id is a dismissal)
        return next((o.title for o in question.shown if o.id == chosen.option_id), None)

    return ask
