"""`parse_command(argv)`: what a command line does, for people (SPEC §8).

The public entry of the summaries: `parse_command` (Codex's answer from the port in
`codex.py`, with Synapse's kinds from `command_kinds.py` where Codex says
`unknown`), the variants, and `synapse parse-command` (`main`), which also prints
the kind and title from `titles.py`. Lossy by design: anything not understood
stays `unknown`.

Import order (a DAG): shell_words <- codex <- command_kinds <- titles <- parse_command.
"""

from __future__ import annotations

import argparse
import json
import sys

from synapse_lsp import cmdline
from synapse_lsp.summaries.codex import (
    CODEX_TYPES,
    Edit,
    Fetch,
    Format,
    Lint,
    ListFiles,
    Noop,
    ParsedCommand,
    Plan,
    Read,
    Search,
    Task,
    Test,
    Tool,
    Unknown,
    Upgrade,
    is_small_formatting_command,
    parse_shell_script,
    short_display_path,
)
from synapse_lsp.summaries.command_kinds import parse_command
from synapse_lsp.summaries.titles import honest, summarize_parsed

__all__ = [
    "CODEX_TYPES",
    "Edit",
    "Fetch",
    "Format",
    "Lint",
    "ListFiles",
    "Noop",
    "ParsedCommand",
    "Plan",
    "Read",
    "Search",
    "Task",
    "Test",
    "Tool",
    "Unknown",
    "Upgrade",
    "is_small_formatting_command",
    "main",
    "parse_command",
    "parse_shell_script",
    "short_display_path",
]


# ------------------------------------------------------------------ CLI


def build_parser() -> argparse.ArgumentParser:
    from synapse_lsp import __version__

    parser = argparse.ArgumentParser(
        prog="synapse parse-command",
        usage="synapse parse-command [-h] [--codex] (--script LINE | -- ARGV...)",
        description="Print the summary of a command line as JSON: "
        "{parsed: [...], kind, title} (for editor authors).",
        epilog="Exit status 0; 2 for a usage error. "
        "Example: synapse parse-command --script 'rg -n TODO src | head'",
    )
    parser.add_argument(
        "--script", metavar="LINE", help="the line as bash reads it (`bash -lc LINE`)"
    )
    parser.add_argument(
        "--codex", action="store_true",
        help="exactly Codex's answer: no Synapse kinds, and the kind and title of that "
        "answer (by default a line that writes is titled as an edit)",
    )  # fmt: skip
    parser.add_argument(
        "argv", nargs="*", metavar="ARGV", help="after `--`: an argv to summarize instead"
    )
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    return parser


def main(argv: list[str]) -> int:
    """`synapse parse-command`: the summary of a command line as JSON (for editor authors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # -h, --version, usage errors: argparse printed why
        return exc.code if isinstance(exc.code, int) else 2
    script: str | None = args.script
    words: list[str] | None = args.argv if "--" in argv else None
    if args.argv and words is None:
        parser.print_usage(sys.stderr)
        print(f"parse-command: unexpected argument {args.argv[0]!r}", file=sys.stderr)
        return 2
    if (script is None) == (words is None) or (words is not None and not words):
        parser.print_usage(sys.stderr)
        print("parse-command: give either --script 'LINE' or -- ARGV...", file=sys.stderr)
        return 2
    codex_only = bool(args.codex)
    full = ["bash", "-lc", script] if script is not None else list(words or [])
    parsed = parse_command(full, codex_only=codex_only)
    summary = summarize_parsed(parsed)
    if not codex_only:  # the title people see never hides a write; --codex is Codex's
        line = script if script is not None else " ".join(map(cmdline.quote, words or []))
        summary = honest(summary, line)
    out = {"parsed": [p.to_dict() for p in parsed], "kind": summary.kind, "title": summary.title}
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
