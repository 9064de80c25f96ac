"""Background import threads (`synapse chat`'s SDK preload, the server's warm-up) start
only once `importlib.resources` is imported: the SDK (certifi) and Synapse's own
modules (agent.prompts) both import it, its modules import each other, and two threads
importing it at once made Python raise `_DeadlockError` in one of them (`synapse chat`
died at start on a loaded CI machine). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys, threading
seen = []
start = threading.Thread.start
def recording(self):
    seen.append((self.name, "importlib.resources" in sys.modules))
    start(self)
threading.Thread.start = recording
{body}
print(json.dumps(seen))
"""

BODIES = {
    "chat preload": "from synapse_lsp.cli import preload\npreload.start_sdk_import()",
    "server warm-up": (
        "from synapse_lsp.lsp.warmup import Warmup\n"
        "Warmup(need_mcp=lambda: False, stages={'core': (), 'mcp': (), 'sdk': ()}).start()"
    ),
}


@pytest.mark.parametrize("face", sorted(BODIES))
def test_a_background_import_thread_starts_after_importlib_resources(face: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=BODIES[face])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen and all(imported for _, imported in seen), seen
