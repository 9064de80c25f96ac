"""`python -m synapse_lsp` starts the language server (what editors spawn)."""

import sys

from synapse_lsp.lsp.server import main

sys.exit(main(sys.argv[1:]))
