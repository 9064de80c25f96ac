"""Stable entry point of the extension wrappers in `$SYNAPSE_HOME/bin`.

Wrappers written by every Synapse version run `python -m synapse_lsp.wrappers call …`;
the code lives in `synapse_lsp.extensions.wrapper_client`.
"""

from __future__ import annotations

import sys

from synapse_lsp.extensions.wrapper_client import *  # noqa: F403
from synapse_lsp.extensions.wrapper_client import call_main, main

__all__ = ["call_main", "main"]

if __name__ == "__main__":
    sys.exit(main())
