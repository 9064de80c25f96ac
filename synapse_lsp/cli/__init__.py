"""The terminal faces: `synapse` and its subcommands (chat, exec, tools, parse-command)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The `synapse` console script (`synapse_lsp.cli:main`, kept for installed scripts).

    Imported lazily so that `python -m synapse_lsp.cli.entry` does not find its own
    module already loaded (runpy warns about that)."""
    from synapse_lsp.cli.entry import main as entry_main

    return entry_main(argv)
