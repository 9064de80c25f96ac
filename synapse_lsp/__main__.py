"""`python -m synapse_lsp` starts the language server (what editors spawn);
`python -m synapse_lsp acp` starts the ACP agent instead (docs/acp.md)."""

import importlib
import sys

if sys.argv[1:2] == ["acp"]:
    # Launched by module name, as `synapse <command>` launches every face (cli/entry.py).
    acp_server = importlib.import_module("synapse_lsp.acp.server")
    sys.exit(acp_server.main(sys.argv[2:]))

from synapse_lsp.lsp.server import main

sys.exit(main(sys.argv[1:]))
