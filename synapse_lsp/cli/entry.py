"""The `synapse` command: a thin dispatcher; each subcommand lives in its own module.

Subcommand modules are imported only when chosen, so `synapse lsp` does not pay
for the model SDK and `synapse exec` does not pay for pygls.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, one-line help). Each module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "exec": ("synapse_lsp.cli.exec", "run command lines through the router and one shell session"),
    "chat": ("synapse_lsp.cli.chat", "interactive chat with the agent (or one-shot with -p)"),
    "lsp": ("synapse_lsp.lsp.server", "start the language server on stdio"),
    "trust": ("synapse_lsp.cli.trust", "trust a folder: load its own mcp_servers.json"),
    "tools": ("synapse_lsp.cli.tools", "search and refresh extension commands (mcp:*, skill:*)"),
    "parse-command": (
        "synapse_lsp.summaries.parse_command",
        "print the summary of a command line as JSON",
    ),
    "fake-api": (
        "synapse_lsp.agent.fakeapi",
        "serve a scripted fake Anthropic Messages API on loopback",
    ),
}


def usage() -> str:
    lines = ["usage: synapse <command> [args...]", "", "commands:"]
    lines += [f"  {name:<14} {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Run `synapse <command> --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        from synapse_lsp import __version__

        print(f"synapse {__version__}")
        return 0
    entry = SUBCOMMANDS.get(args[0])
    if entry is None:
        print(f"synapse: unknown command {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(entry[0])
    result: int = module.main(args[1:])
    return result


if __name__ == "__main__":
    sys.exit(main())
