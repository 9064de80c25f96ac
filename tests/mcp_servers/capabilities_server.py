"""A real MCP server (stdio) that exercises what a client offers beyond tools: sampling,
elicitation, roots, progress, images and audio, tool annotations, list_changed,
resources (with a template) and prompts. The shapes follow server-everything's.

    python capabilities_server.py [--name NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Annotated, Literal

import mcp_types
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Audio,
    Context,
    Elicit,
    ElicitationResult,
    Image,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from pydantic import BaseModel, Field

# A 1x1 transparent PNG, and a few bytes standing in for a WAV file.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
WAV_BYTES = b"RIFF\x24\x00\x00\x00WAVEfmt "


class Form(BaseModel):
    name: str = Field(title="Your name")
    color: Literal["red", "green"] = Field(title="Color")
    subscribe: bool = Field(default=False, title="Subscribe")
    age: int | None = Field(default=None, title="Age")


class Nothing(BaseModel):
    pass


class Item(BaseModel):
    name: str
    weight: int


def sample_question(question: str) -> Sample:
    return Sample(
        [
            mcp_types.SamplingMessage(
                role="user", content=mcp_types.TextContent(type="text", text=question)
            )
        ],
        max_tokens=200,
        system_prompt="Answer in one short line.",
    )


def form(message: str) -> Elicit[Form]:
    return Elicit(message, Form)


def yes_no(message: str) -> Elicit[Nothing]:
    return Elicit(message, Nothing)


def roots() -> ListRoots:
    return ListRoots()


def build(name: str) -> MCPServer:
    app = MCPServer(name)

    @app.tool()
    def ask_model(
        question: str, answer: Annotated[mcp_types.CreateMessageResult, Resolve(sample_question)]
    ) -> str:
        """Ask the client's model a question (MCP sampling) and return its answer."""
        text = getattr(answer.content, "text", "")
        return f"model {answer.model} said: {text}"

    @app.tool()
    def ask_user(message: str, answer: Annotated[ElicitationResult[Form], Resolve(form)]) -> str:
        """Ask the user to fill a form (MCP elicitation); return what they answered."""
        if isinstance(answer, AcceptedElicitation):
            return "accepted: " + json.dumps(answer.data.model_dump(), sort_keys=True)
        return answer.action

    @app.tool()
    def confirm(
        message: str, answer: Annotated[ElicitationResult[Nothing], Resolve(yes_no)]
    ) -> str:
        """Ask the user a plain yes/no question (elicitation with no fields)."""
        return answer.action

    @app.tool()
    async def slow(steps: int = 3, delay: float = 0.2, ctx: Context | None = None) -> str:
        """Take a while, reporting progress at each step."""
        assert ctx is not None
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
            await asyncio.sleep(delay)
        return f"done after {steps} steps"

    @app.tool()
    def list_roots(found: Annotated[mcp_types.ListRootsResult, Resolve(roots)]) -> str:
        """The client's roots (its workspace folders), one URI per line."""
        return "\n".join(str(r.uri) for r in found.roots) or "(no roots)"

    @app.tool()
    def weigh(items: list[Item]) -> str:
        """Sum the weights of the items (an array of objects)."""
        return f"{len(items)} items weigh {sum(i.weight for i in items)}"

    @app.tool()
    def picture() -> Image:
        """A tiny PNG image."""
        return Image(data=PNG_1X1, format="png")

    @app.tool()
    def sound() -> Audio:
        """A short audio clip."""
        return Audio(data=WAV_BYTES, format="wav")

    @app.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    def look(path: str) -> str:
        """Read-only: describe a path (annotated readOnlyHint)."""
        return f"looked at {path}"

    @app.tool(annotations=mcp_types.ToolAnnotations(destructive_hint=True, read_only_hint=False))
    def wipe(path: str) -> str:
        """Destructive: pretend to delete a path (annotated destructiveHint)."""
        return f"wiped {path}"

    @app.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool `extra` and tell the client its tool list changed."""
        if "extra" not in {t.name for t in await app.list_tools()}:

            def extra() -> str:
                """A tool added at run time."""
                return "extra ran"

            app.add_tool(extra)
        await ctx.notify_tools_changed()
        return "added extra"

    @app.resource(
        "memo://notes", name="notes", description="The team's notes", mime_type="text/plain"
    )
    def notes() -> str:
        return "first note\nsecond note\n"

    @app.resource("memo://logo", name="logo", description="A logo", mime_type="image/png")
    def logo() -> bytes:
        return PNG_1X1

    @app.resource("memo://notes/{note_id}", name="note", description="One note by number")
    def note(note_id: str) -> str:
        return f"note number {note_id}"

    @app.prompt(description="Review a piece of code")
    def review(code: str, style: str = "short") -> str:
        return f"Please review this code ({style} review):\n{code}"

    @app.prompt(description="Say hello")
    def greet() -> str:
        return "Say hello to the team."

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="caps")
    args = parser.parse_args()
    build(args.name).run()


if __name__ == "__main__":
    main()
