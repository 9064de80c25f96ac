"""Background import threads (`synapse chat`'s SDK preload, the server's warm-up) start
only once `importlib.resources` is imported: the SDK (certifi) and Synapse's own
modules (agent.prompts) both import it, its modules import each other, and two threads
importing it at once made Python raise `_DeadlockError` in one of them (`synapse chat`
died at start on a loaded CI machine). Checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


COLLECTOR = """
import asyncio, gc, json
from synapse_lsp.cli import preload
preload.start_sdk_import()
during = gc.isenabled()
asyncio.run(preload.sdk_ready())
print(json.dumps([during, gc.isenabled(), gc.get_freeze_count() > 0]))
"""


def test_the_collector_pauses_while_the_sdk_imports_then_runs_on_what_start_up_froze() -> None:
    """cli/preload.py: no cyclic collection during the SDK's import (its ~100k objects
    are no garbage); afterwards the collector runs again, start-up's objects frozen."""
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR], capture_output=True, text=True, timeout=120, check=True
    )
    during, after, frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (during, after, frozen) == (False, True, True)


WARMUP_COLLECTOR = """
import gc, json, sys
from synapse_lsp.lsp.warmup import Warmup
sys.path.insert(0, sys.argv[1])
warm = Warmup(need_mcp=lambda: False, stages={"core": ("probe_gc",), "mcp": (), "sdk": ()})
warm.start()
warm.thread.join(60)
import probe_gc
print(json.dumps([probe_gc.SEEN, gc.isenabled(), gc.get_freeze_count() > 0]))
"""


def test_the_server_warm_up_pauses_the_collector_too(tmp_path: Path) -> None:
    (tmp_path / "probe_gc.py").write_text("import gc\nSEEN = gc.isenabled()\n")
    done = subprocess.run(
        [sys.executable, "-c", WARMUP_COLLECTOR, str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    during, after, frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (during, after, frozen) == (False, True, True)
