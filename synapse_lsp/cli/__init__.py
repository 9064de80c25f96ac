"""The terminal faces: `synapse` and its subcommands (chat, exec, tools, parse-command)."""

from __future__ import annotations

from synapse_lsp.cli.entry import main

__all__ = ["main"]
