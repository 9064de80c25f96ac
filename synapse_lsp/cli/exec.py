"""`synapse exec CMD…`: the agent's tool layer without a model.

Runs each command line through one router and one shell session, in order,
printing exactly what the model would see, and exits with the last exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from synapse_lsp.config import Settings

if TYPE_CHECKING:
    from synapse_lsp.extensions.registry import ExtensionRegistry
    from synapse_lsp.router import BashRouter


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse exec",
        description="Run command lines through the Synapse router and one persistent shell "
        "session, printing what the model would see for each.",
        epilog="Example: synapse exec 'cd sub' 'export X=1' 'pwd; echo $X'",
    )
    parser.add_argument("--cwd", type=Path, default=None, help="starting directory (default: .)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="per-command timeout in seconds (default 120)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per command instead of text"
    )
    parser.add_argument("commands", nargs="+", metavar="CMD", help="command lines, run in order")
    return parser


async def run(commands: list[str], cwd: Path, settings: Settings, as_json: bool) -> int:
    import json

    from synapse_lsp.router import BashRouter
    from synapse_lsp.shell import ShellSession

    shell = ShellSession(cwd, settings)
    await shell.start()
    exit_code = 0
    registry = None
    try:
        router = BashRouter(shell, settings)
        registry = await _add_extensions(router, settings, cwd)
        for index, command in enumerate(commands):
            result = await router.route(command)
            exit_code = result.exit_code
            if as_json:
                record = {
                    "command": command,
                    "layer": result.layer.value,
                    "exitCode": result.exit_code,
                    "isError": result.is_error,
                    "category": result.category.value if result.category else None,
                    "stdout": result.stdout,
                    "stderr": result.stderr,
                    "text": result.text,
                    "durationMs": round(result.duration * 1000, 3),
                }
                print(json.dumps(record, ensure_ascii=False))
            else:
                if len(commands) > 1:
                    print(f"$ {command}" if index == 0 else f"\n$ {command}")
                sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
            sys.stdout.flush()
    finally:
        if registry is not None:
            await registry.close()
        await shell.close()
    return exit_code


async def _add_extensions(router: BashRouter, settings: Settings, cwd: Path) -> ExtensionRegistry:
    """mcp:*/skill:* commands and command:search/skill:* built-ins (no watcher: one-shot).

    It also serves the wrappers' socket unless another Synapse process already does."""
    from synapse_lsp.extensions.registry import ExtensionRegistry

    registry = ExtensionRegistry(settings, cwd, watch=False)
    await registry.start()
    router.extensions = registry
    for command in registry.builtins():
        router.register(command)
    return registry


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    if args.timeout is not None:
        if args.timeout <= 0:
            print("synapse exec: --timeout must be a positive number of seconds", file=sys.stderr)
            return 2
        settings, _ = settings.with_overrides({"commandTimeout": args.timeout})
    cwd = (args.cwd or Path.cwd()).resolve()
    if not cwd.is_dir():
        print(f"synapse exec: --cwd {cwd}: not a directory", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args.commands, cwd, settings, args.json))
    except KeyboardInterrupt:
        return 130
