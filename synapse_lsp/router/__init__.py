"""BashRouter: decides each command line's layer and runs it there (SPEC §2).

`decide` (the public `BashRouter`: which layer, which steps, the gate), `native`
(lines bash runs, inside or outside the sandbox), `inprocess` (built-ins and
extension commands, their words and pipes), `tool_result` (the text the model
gets, and the lines refused before anything runs), `base` (what the parts share).
"""

from __future__ import annotations

from synapse_lsp.router.base import (
    EXTENSION_PREFIXES,
    ExtensionDirectory,
    RouteResult,
    WithholdsServers,
)
from synapse_lsp.router.decide import BashRouter
from synapse_lsp.router.tool_result import failure_hint, format_for_model

__all__ = [
    "EXTENSION_PREFIXES",
    "BashRouter",
    "ExtensionDirectory",
    "RouteResult",
    "WithholdsServers",
    "failure_hint",
    "format_for_model",
]
