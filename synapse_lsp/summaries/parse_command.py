"""`parse_command(argv)`: what a command line does, for people (SPEC §8).

The public entry of the summaries: `parse_command` (Codex's answer from the port in
`codex.py`, with Synapse's kinds from `command_kinds.py` where Codex says
`unknown`), the variants, and `synapse parse-command` (`main`), which also prints
the kind and title from `titles.py`. Lossy by design: anything not understood
stays `unknown`.

Import order (a DAG): shell_words <- codex <- command_kinds <- titles <- parse_command.
"""

from __future__ import annotations

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


def _usage() -> str:
    return (
        "usage: synapse parse-command [--codex] --script 'LINE'\n"
        "       synapse parse-command [--codex] -- ARGV...\n"
        "Prints JSON: {parsed: [...], kind, title}. --script treats LINE as `bash -lc LINE`;\n"
        "--codex prints only what Codex's parse_command would answer."
    )


def main(argv: list[str]) -> int:
    """`synapse parse-command`: the summary of a command line as JSON (for editor authors)."""
    codex_only = False
    script: str | None = None
    words: list[str] | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(_usage())
            return 0
        if arg == "--codex":
            codex_only = True
        elif arg == "--script":
            if i + 1 >= len(argv):
                print("parse-command: --script needs a value\n" + _usage(), file=sys.stderr)
                return 2
            i += 1
            script = argv[i]
        elif arg.startswith("--script="):
            script = arg.partition("=")[2]
        elif arg == "--":
            words = argv[i + 1 :]
            break
        else:
            print(f"parse-command: unexpected argument {arg!r}\n" + _usage(), file=sys.stderr)
            return 2
        i += 1
    if (script is None) == (words is None) or (words is not None and not words):
        print(
            "parse-command: give either --script 'LINE' or -- ARGV...\n" + _usage(), file=sys.stderr
        )
        return 2
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
