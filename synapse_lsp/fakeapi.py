"""Stable import path of the scripted fake Messages API (`synapse_lsp.agent.scripted_api`)."""

from __future__ import annotations

import sys

from synapse_lsp.agent.scripted_api import *  # noqa: F403
from synapse_lsp.agent.scripted_api import FakeAnthropic, Script, demo_script, load_script, main

__all__ = ["FakeAnthropic", "Script", "demo_script", "load_script", "main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
