"""Stable entry point of the extension wrappers in `$SYNAPSE_HOME/bin`.

Wrappers written by every Synapse version run `python -m synapse_lsp.wrappers call …`;
the code lives in `synapse_lsp.extensions.wrappers`.
"""

from __future__ import annotations

import sys

from synapse_lsp.extensions.wrappers import *  # noqa: F403
from synapse_lsp.extensions.wrappers import call_main, main

__all__ = ["call_main", "main"]

if __name__ == "__main__":
    sys.exit(main())
