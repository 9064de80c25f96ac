"""A real MCP server for the tests: every argument shape, every result shape.

Run over stdio (default) or streamable HTTP:
    python demo_server.py [--http PORT] [--name NAME] [--startup-delay SECONDS] [--wait-for FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time
from typing import Any, Literal

import mcp_types
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# A 1x1 transparent PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build(name: str) -> MCPServer:
    app = MCPServer(name)

    @app.tool()
    def echo(text: str) -> str:
        """Echo the text back unchanged."""
        return text

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool()
    def configure(
        name: str,
        count: int,
        ratio: float = 0.5,
        verbose: bool = False,
        tags: list[str] | None = None,
        options: dict[str, Any] | None = None,
        mode: Literal["fast", "safe"] = "fast",
    ) -> dict[str, Any]:
        """Echo every argument back as a structured result.

        Exercises string, integer, number, boolean, array, object and enum parameters.
        """
        return {
            "name": name,
            "count": count,
            "ratio": ratio,
            "verbose": verbose,
            "tags": tags,
            "options": options,
            "mode": mode,
        }

    @app.tool()
    def picture() -> Image:
        """Return a 1x1 PNG image."""
        return Image(data=PNG_1X1, format="png")

    @app.tool()
    def fail(message: str) -> str:
        """Always fails with the given message (an isError result)."""
        raise ToolError(message)

    @app.tool()
    def document() -> list[mcp_types.EmbeddedResource]:
        """Return an embedded binary resource."""
        blob = base64.b64encode(b"x" * 2048).decode()
        contents = mcp_types.BlobResourceContents(
            uri="file:///tmp/data.bin", mime_type="application/octet-stream", blob=blob
        )
        return [mcp_types.EmbeddedResource(type="resource", resource=contents)]

    @app.tool()
    async def slow(seconds: float) -> str:
        """Sleep for the given number of seconds, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @app.tool()
    def crash() -> str:
        """Kill the server process at once (to test reconnects)."""
        sys.stderr.flush()
        os._exit(3)

    @app.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @app.tool()
    def secret() -> str:
        """A tool that the tests disable in config."""
        return "should not be reachable"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--name", default="demo")
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--wait-for", default=None, help="start serving once this file exists")
    args = parser.parse_args()
    if args.startup_delay:
        time.sleep(args.startup_delay)
    while args.wait_for and not os.path.exists(args.wait_for):  # noqa: PTH110
        time.sleep(0.02)
    app = build(args.name)
    if args.http is not None:
        app.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        app.run()


if __name__ == "__main__":
    main()
