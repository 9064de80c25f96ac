"""`synapse exec CMD…`: the agent's tool layer without a model.

Runs each command line through one router and one shell session, in order,
printing exactly what the model would see. Every line runs; the exit status is the
first failing line's exit code (0 when all succeeded), so a script notices a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from synapse_lsp import __version__
from synapse_lsp.cli.asking import add_permission_flags, face_settings, yes_asker
from synapse_lsp.cli.startup import home_line, home_problem, stderr_warnings
from synapse_lsp.config import MIN_TIMEOUT_S, LiveSettings

CANNOT_ASK = "synapse exec cannot ask; run it again with --yes to allow it"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse exec",
        description="Run command lines through the Synapse router and one persistent shell "
        "session, printing what the model would see for each.",
        epilog="Every line runs, in order. Exit status: the exit code of the first line that "
        "failed (0 when every line succeeded; 2 for a usage error). "
        "Example: synapse exec 'cd docs' 'export X=1' 'pwd; echo $X'",
    )
    parser.add_argument("--cwd", type=Path, default=None, help="starting directory (default: .)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="per-command timeout in seconds (default 120)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per command instead of text"
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="trust the folder: load its own mcp_servers.json (else only when remembered "
        "by `synapse trust` or SYNAPSE_TRUST_WORKSPACE=1)",
    )
    add_permission_flags(parser)
    parser.add_argument("commands", nargs="+", metavar="CMD", help="command lines, run in order")
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def command_record(
    command: str,
    layer: str | None,
    exit_code: int | None,
    is_error: bool,
    category: str | None,
    stdout: str,
    stderr: str,
    text: str,
    seconds: float,
) -> dict[str, Any]:
    """One command as `--json` prints it; `chat -p --output-format stream-json`'s
    `tool_result` carries the same keys, so one parser reads both. `text` (what the
    model was given) only when it is not just stdout, as synapse.shell.run sends it."""
    return {
        "command": command,
        "layer": layer,
        "exitCode": exit_code,
        "isError": is_error,
        "category": category,
        "stdout": stdout,
        "stderr": stderr,
        "text": None if text == stdout else text,
        "durationMs": round(seconds * 1000, 3),
    }


async def run(
    commands: list[str],
    cwd: Path,
    settings: LiveSettings,
    as_json: bool,
    trusted: bool = False,
    yes: bool = False,
) -> int:
    import json

    from synapse_lsp.agent.session_mcp import OwnModel, SessionMcp
    from synapse_lsp.core import Workspace

    model = OwnModel(settings)

    # One-shot: no watcher; the registry serves the wrappers' socket unless another
    # Synapse process already does. Nobody to ask: what would be asked is denied,
    # saying so, unless --yes allows it.
    workspace = Workspace(
        cwd,
        settings,
        watch=False,
        trusted=True if trusted else None,
        ask=yes_asker if yes else None,
        cannot_ask=CANNOT_ASK,
    )
    if workspace.trust_notice:
        print(f"synapse exec: {workspace.trust_notice}", file=sys.stderr)
    exit_code = 0
    try:
        router = await workspace.start()
        # An MCP server's sampling: asked as a permission question (denied without --yes,
        # nobody being there), on a model of its own; elicitation: declined (no elicitor).
        router = router.derive(mcp_host=SessionMcp(router.permission, model, settings))
        await workspace.registry_ready()
        for index, command in enumerate(commands):
            result = await router.route(command)
            if exit_code == 0:  # the first failure decides the exit status
                exit_code = result.exit_code
            if as_json:
                category = result.category.value if result.category else None
                record = command_record(
                    command, result.layer.value, result.exit_code, result.is_error, category,
                    result.stdout, result.stderr, result.text, result.duration,
                )  # fmt: skip
                print(json.dumps(record, ensure_ascii=False))
            else:
                if len(commands) > 1:
                    print(f"$ {command}" if index == 0 else f"\n$ {command}")
                sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
            sys.stdout.flush()
    finally:
        await workspace.close()
        await model.aclose()
    return exit_code


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    cwd = (args.cwd or Path.cwd()).resolve()
    if not cwd.is_dir():
        print(f"synapse exec: --cwd {cwd}: not a directory", file=sys.stderr)
        return 2
    settings = LiveSettings(folder=cwd)
    if args.timeout is not None and not args.timeout >= MIN_TIMEOUT_S:
        print(
            f"synapse exec: --timeout must be at least {MIN_TIMEOUT_S:g} seconds",
            file=sys.stderr,
        )
        return 2
    overrides = face_settings(args)
    if args.timeout is not None:
        overrides["commandTimeout"] = args.timeout
    settings.set_face(overrides)
    for problem in settings.problems:  # once each (set_face answers the whole list)
        print(f"synapse exec: settings: {problem}", file=sys.stderr)
    if settings.refusals:
        return 2
    home = settings().synapse_home
    home_unusable = home_problem(home)
    stderr_warnings((str(home),) if home_unusable else ())
    if home_unusable:
        print(home_line("exec", home, home_unusable), file=sys.stderr)
    try:
        return asyncio.run(run(args.commands, cwd, settings, args.json, args.trust, args.yes))
    except KeyboardInterrupt:
        return 130
