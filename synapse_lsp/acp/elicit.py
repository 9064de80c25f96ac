"""An MCP server's elicitation (`question.Elicitation`) asked through the ACP client.

A form with fields goes as ACP's `elicitation/create` (form mode, tied to the session and
the running tool call) to a client that declares `elicitation.form` in `initialize`; a
client without it declines such a form, saying why (ACP has no other form request). A
question with no fields is a plain confirmation: `session/request_permission` with
Accept / Decline, which every client answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synapse_lsp.events import RUNNING_TOOL_CALL
from synapse_lsp.question import ElicitAnswer, Elicitation, ElicitField

if TYPE_CHECKING:
    from acp.interfaces import Client

    from synapse_lsp.agent.session_mcp import Elicitor

NO_FORMS = "this ACP client cannot show forms (it does not declare elicitation.form)"


def form_schema(request: Elicitation) -> dict[str, Any]:
    """The form as ACP's `requestedSchema` (JSON Schema of flat primitives)."""
    properties: dict[str, Any] = {}
    for f in request.fields:
        prop: dict[str, Any] = {"type": f.kind}
        if f.title:
            prop["title"] = f.title
        if f.description:
            prop["description"] = f.description
        if f.choices:
            prop["enum"] = list(f.choices)
        if f.default is not None:
            prop["default"] = f.default
        properties[f.name] = prop
    required = [f.name for f in request.fields if f.required]
    return {"type": "object", "properties": properties, "required": required or None}


def offers_forms(capabilities: Any) -> bool:
    elicitation = getattr(capabilities, "elicitation", None)
    return getattr(elicitation, "form", None) is not None


def elicitor(conn: Client, session_id: str, capabilities: Any) -> Elicitor:
    """The session's `SessionMcp.elicitor` for this client (module docstring)."""

    async def ask(request: Elicitation) -> ElicitAnswer:
        call_id = RUNNING_TOOL_CALL.get()
        if not request.fields:
            return await _confirm(conn, session_id, call_id, request)
        if not offers_forms(capabilities):
            return ElicitAnswer("decline", reason=NO_FORMS)
        from acp.schema import ElicitationFormSessionMode, ElicitationSchema

        mode = ElicitationFormSessionMode(
            session_id=session_id,
            tool_call_id=call_id,
            requested_schema=ElicitationSchema.model_validate(form_schema(request)),
        )
        response = await conn.create_elicitation(
            message=f"{request.server} asks: {request.message}", mode=mode
        )
        if response.action == "accept":
            return ElicitAnswer("accept", _typed(request.fields, response.content or {}))
        return ElicitAnswer("cancel" if response.action == "cancel" else "decline")

    return ask


def _typed(fields: tuple[ElicitField, ...], content: dict[str, Any]) -> dict[str, Any]:
    """The client's values with numbers as the form's kinds (a JSON 3.0 for an integer)."""
    out = dict(content)
    for f in fields:
        value = out.get(f.name)
        if f.kind == "integer" and isinstance(value, float) and value.is_integer():
            out[f.name] = int(value)
    return out


async def _confirm(
    conn: Client, session_id: str, call_id: str | None, request: Elicitation
) -> ElicitAnswer:
    from acp.schema import (
        AllowedOutcome,
        ContentToolCallContent,
        PermissionOption,
        TextContentBlock,
        ToolCallUpdate,
    )

    text = f"The MCP server {request.server} asks:\n{request.message}"
    response = await conn.request_permission(
        session_id=session_id,
        tool_call=ToolCallUpdate(
            tool_call_id=call_id or f"mcp-{request.server}-question",
            title=f"{request.server} asks: {request.message}"[:200],
            status="pending",
            content=[
                ContentToolCallContent(
                    type="content", content=TextContentBlock(type="text", text=text)
                )
            ],
        ),
        options=[
            PermissionOption(option_id="accept", name="Accept", kind="allow_once"),
            PermissionOption(option_id="decline", name="Decline", kind="reject_once"),
        ],
    )
    outcome = response.outcome
    if isinstance(outcome, AllowedOutcome):
        return ElicitAnswer("accept" if outcome.option_id == "accept" else "decline")
    return ElicitAnswer("cancel", reason="the question was dismissed")
