"""The optional legs: collected only when asked for (`./dev everything` sets
SYNAPSE_EVERYTHING to server-everything's entry point), never in `./dev test`."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("SYNAPSE_EVERYTHING") else ["test_*.py"]
