"""An MCP server's elicitation (`question.Elicitation`) asked in the editor.

Every LSP client shows `window/showMessageRequest`, so that is what is asked: a form
with no fields is one question (Accept / Decline); a form whose fields all have choices
(a string enum, a boolean) is one question per field, its buttons the choices (an
optional field adds "Skip"). A field typed freely (text, a number) has no such question:
the form is declined, saying so. Dismissing a question cancels the form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synapse_lsp.question import ElicitAnswer, Elicitation, ElicitField

if TYPE_CHECKING:
    from synapse_lsp.agent.session_mcp import Elicitor

ACCEPT, DECLINE, SKIP = "Accept", "Decline", "Skip"
FREE_TEXT = (
    "the editor can ask only questions with buttons: {names} must be typed "
    "(answer it in `synapse chat` or an ACP client)"
)


def buttons(f: ElicitField) -> tuple[tuple[str, Any], ...]:
    """(title, value) of the field's answers; () for a field typed freely."""
    if f.choices:
        titles = f.choice_titles if len(f.choice_titles) == len(f.choices) else f.choices
        return tuple(zip(titles, f.choices, strict=True))
    if f.kind == "boolean":
        return (("Yes", True), ("No", False))
    return ()


def elicitor(server: Any) -> Elicitor:
    """The session's `SessionMcp.elicitor` asking through `server.ask_user`."""

    async def ask(request: Elicitation) -> ElicitAnswer:
        head = f"{request.server} asks: {request.message}"
        if not request.fields:
            chosen = await server.ask_user(head, (ACCEPT, DECLINE))
            if chosen is None:
                return ElicitAnswer("cancel", reason="the question was dismissed")
            return ElicitAnswer("accept" if chosen == ACCEPT else "decline")
        typed = [f.title or f.name for f in request.fields if not buttons(f)]
        if typed:
            return ElicitAnswer("decline", reason=FREE_TEXT.format(names=", ".join(typed)))
        content: dict[str, Any] = {}
        for f in request.fields:
            answers = dict(buttons(f))
            titles = tuple(answers) + (() if f.required else (SKIP,))
            chosen = await server.ask_user(f"{head}\n{f.title or f.name}?", titles)
            if chosen is None:
                return ElicitAnswer("cancel", reason="the question was dismissed")
            if chosen in answers:
                content[f.name] = answers[chosen]
        return ElicitAnswer("accept", content)

    return ask
