"""An MCP server's resources and prompts as commands, beside its tools:

    mcp:<server>:resources                 list resources and resource templates
    mcp:<server>:resource <uri>            read one (a template filled in by hand)
    mcp:<server>:prompt [<name> [args…]]   list prompts, or print one's messages

A tool of the server with one of these names keeps its name (the tool wins; these
commands are then not offered). Prompt arguments are strings: positional in the
server's order, or `name=value`, or `--name value`. The same prompts are slash
commands in every face (`/mcp:<server>:<prompt> args`, `ExtensionRegistry.render_prompt`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory, PromptInfo
from synapse_lsp.extensions.mcp2bash import McpToolCommand
from synapse_lsp.extensions.mcp_results import format_contents, prompt_text

if TYPE_CHECKING:
    from synapse_lsp.extensions.mcp_client import McpServer
    from synapse_lsp.extensions.mcp_session import PromptSpec


def of_server(server: McpServer) -> dict[str, McpCommand]:
    """The resource and prompt commands a ready server offers (none for a server that
    lists none); a tool of the same name replaces one (the registry adds tools after)."""
    out: dict[str, McpCommand] = {}
    if server.resources:
        for cmd in (McpResourcesCommand(server), McpResourceCommand(server)):
            out[cmd.name] = cmd
    if server.prompts:
        prompt = McpPromptCommand(server)
        out[prompt.name] = prompt
    return out


class PromptArgError(ValueError):
    """Arguments that do not fit a prompt; the message says how."""


def prompt_arguments(spec: PromptSpec, args: list[str]) -> dict[str, str]:
    """`args` (positional, `name=value` or `--name value`) as the prompt's arguments."""
    names = [a[0] for a in spec.arguments]
    out: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        if arg.startswith("--") and arg[2:] in names and i + 1 < len(args):
            out[arg[2:]] = args[i + 1]
            i += 2
            continue
        if eq and key.lstrip("-") in names:
            out[key.lstrip("-")] = value
        else:
            positional.append(arg)
        i += 1
    free = [n for n in names if n not in out]
    if len(positional) > len(free):
        # More words than arguments: the last argument takes the rest (a code snippet).
        if not free:
            raise PromptArgError(f"{spec.name} takes {len(names)} argument(s): {' '.join(names)}")
        positional = [*positional[: len(free) - 1], " ".join(positional[len(free) - 1 :])]
    out.update(zip(free, positional, strict=False))
    missing = [n for n, required, _ in spec.arguments if required and n not in out]
    if missing:
        raise PromptArgError(f"missing required argument(s): {', '.join(missing)}")
    return out


def prompt_info(server: str, spec: PromptSpec) -> PromptInfo:
    args = tuple((name, required) for name, required, _ in spec.arguments)
    return PromptInfo(f"mcp:{server}:{spec.name}", spec.description, args)


def _timeout(server: McpServer, ctx: CommandContext) -> float:
    return server.config.timeout or ctx.settings.command_timeout


def _failed(exc: Exception) -> CommandOutput:
    from synapse_lsp.extensions.mcp_client import McpCallError

    timeout = isinstance(exc, McpCallError) and exc.kind == "timeout"
    return CommandOutput(
        stderr=f"{exc}\n",
        exit_code=124 if timeout else 1,
        category=FailureCategory.TIMEOUT if timeout else FailureCategory.EXECUTION_ERROR,
    )


class McpResourcesCommand:
    """`mcp:<server>:resources`: the server's resources and templates."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.name = f"mcp:{server.name}:resources"
        self.usage = self.name
        self.summary = f"List the resources of MCP server {server.name} (read one with :resource)"

    def help(self) -> str:
        return (
            f"{self.name} - {self.summary}\n\nUsage:\n  {self.usage}\n\n"
            f"Each line: the URI, its name, description and type; a template's URI has\n"
            f"{{placeholders}} to fill in. Read one with mcp:{self.server.name}:resource <uri>.\n"
        )

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        args = argv[1:] if argv and argv[0] == self.name else argv
        if args[:1] in (["-h"], ["--help"]):
            return CommandOutput(self.help())
        if args:
            return CommandOutput.usage_error(self.name, "takes no arguments")
        lines = []
        for r in self.server.resources:
            what = " - ".join(x for x in (r.name, r.description) if x)
            kind = "template" if r.template else (r.mime_type or "")
            lines.append(f"{r.uri}  {what}" + (f" ({kind})" if kind else ""))
        text = "\n".join(lines) if lines else f"(MCP server {self.server.name} lists no resources)"
        return CommandOutput(text + "\n")


class McpResourceCommand:
    """`mcp:<server>:resource <uri>`: one resource's contents."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.name = f"mcp:{server.name}:resource"
        self.usage = f"{self.name} <uri>"
        self.summary = f"Read a resource of MCP server {server.name}"

    def help(self) -> str:
        listed = "\n".join(f"  {r.uri}" for r in self.server.resources[:20]) or "  (none listed)"
        return (
            f"{self.name} - {self.summary}\n\nUsage:\n  {self.usage}\n\n"
            f"Text is printed; a binary resource is saved under $SYNAPSE_HOME/outputs and its\n"
            f"path printed (an image is also shown to the model).\n\nResources:\n{listed}\n"
        )

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        args = argv[1:] if argv and argv[0] == self.name else argv
        if args[:1] in (["-h"], ["--help"]):
            return CommandOutput(self.help())
        if len(args) != 1:
            return CommandOutput.usage_error(self.name, f"expects one URI: {self.usage}")
        from synapse_lsp.extensions.mcp_client import McpCallError

        try:
            result = await self.server.read_resource(args[0], _timeout(self.server, ctx))
        except McpCallError as exc:
            return _failed(exc)
        return format_contents(list(result.contents), ctx.settings)


class McpPromptCommand:
    """`mcp:<server>:prompt [<name> [args…]]`: list prompts, or print one."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.name = f"mcp:{server.name}:prompt"
        self.usage = f"{self.name} [<name> [args…]]"
        self.summary = f"List or get the prompts of MCP server {server.name}"

    def help(self) -> str:
        listed = "\n".join(f"  {line}" for line in _listing(self.server))
        return (
            f"{self.name} - {self.summary}\n\nUsage:\n  {self.usage}\n\n"
            "Arguments are positional in the prompt's order, or name=value, or --name value.\n"
            "In a chat, the user types the same as a slash command: /mcp:<server>:<prompt> args.\n"
            f"\nPrompts:\n{listed or '  (none)'}\n"
        )

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        args = argv[1:] if argv and argv[0] == self.name else argv
        if args[:1] in (["-h"], ["--help"]):
            return CommandOutput(self.help())
        if not args:
            return CommandOutput("\n".join(_listing(self.server) or ["(no prompts)"]) + "\n")
        try:
            text = await render(self.server, args[0], args[1:], _timeout(self.server, ctx))
        except PromptArgError as exc:
            return CommandOutput.usage_error(self.name, str(exc))
        except Exception as exc:  # noqa: BLE001 - McpCallError: told as a failure
            return _failed(exc)
        return CommandOutput(text + "\n")


def _listing(server: McpServer) -> list[str]:
    """One line per prompt: its name, arguments ([optional]) and description."""
    lines = []
    for p in server.prompts:
        words = " ".join(a if required else f"[{a}]" for a, required, _ in p.arguments)
        line = f"{p.name} {words}".rstrip()
        lines.append(line + (f"  - {p.description}" if p.description else ""))
    return lines


async def render(server: McpServer, name: str, args: list[str], timeout: float) -> str:
    """The prompt `name` of `server` with `args`, as text; PromptArgError for an unknown
    prompt or bad arguments, McpCallError when the server fails."""
    spec = next((p for p in server.prompts if p.name == name), None)
    if spec is None:
        known = ", ".join(p.name for p in server.prompts) or "none"
        raise PromptArgError(f"MCP server {server.name} has no prompt {name!r} (it has: {known})")
    result = await server.get_prompt(name, prompt_arguments(spec, args), timeout)
    return prompt_text(list(result.messages))


McpCommand = McpToolCommand | McpResourcesCommand | McpResourceCommand | McpPromptCommand
