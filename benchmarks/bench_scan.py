"""How long reading one big command line takes, and whether it grows linearly.

    .venv/bin/python benchmarks/bench_scan.py [--runs 5]

Prints, for 1 MB and 2 MB lines (a `write` of one huge quoted word, and a native line
of many short commands):
- `cmdline.split_argv`, `permissions.simple_commands` and `permissions.writes_outside`
  times, the ratio time(2 MB) / time(1 MB) (target <= 2.2: linear), and the ratio to
  a plain `re`-based tokeniser (`re.findall(r"'[^']*'|\\S+", line)`) on the same line;
- a 600 KB `write` through a real `synapse lsp` over stdio (`synapse.shell.run`), round
  trip, next to a `true` round trip in the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_server import Rpc, initialize  # noqa: E402
from synapse_lsp import bashparse, cmdline  # noqa: E402
from synapse_lsp.cmdline import simple_commands  # noqa: E402
from synapse_lsp.commands import Layer  # noqa: E402
from synapse_lsp.policy.writes import writes_outside  # noqa: E402

_PLAIN = re.compile(r"'[^']*'|\S+")


def best(fn: Callable[[str], object], arg: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        bashparse.clear_cache()  # each run parses the line (`bashparse.parse` caches)
        started = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - started)
    return min(times)


def _writes(line: str) -> object:
    root = Path(tempfile.gettempdir())
    return writes_outside(line, Layer.NATIVE, root, root)


def lines(size: int) -> dict[str, str]:
    return {
        "one quoted word": "write f '" + "a" * size + "'",
        "many commands": "touch x && echo 'y' | cat > z; " * (size // 32),
    }


def scanning(runs: int) -> None:
    for kind in ("one quoted word", "many commands"):
        one, two = lines(1_000_000)[kind], lines(2_000_000)[kind]
        print(f"{kind}:")
        scanners: list[tuple[str, Callable[[str], object]]] = [
            ("split_argv", cmdline.split_argv),
            ("simple_commands", simple_commands),
            ("writes_outside", _writes),
        ]
        for name, fn in scanners:
            t1 = best(fn, one, runs)
            t2 = best(fn, two, runs)
            plain = best(_PLAIN.findall, two, runs)
            print(
                f"  {name:16s} 1 MB {t1 * 1000:8.1f} ms   2 MB {t2 * 1000:8.1f} ms   "
                f"2MB/1MB {t2 / t1:4.2f}   vs re tokeniser {t2 / plain:6.1f}x"
            )


def lsp_round_trip(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "ws")
        root.mkdir()
        env = dict(os.environ, SYNAPSE_HOME=str(Path(tmp, "home")))
        rpc = Rpc([sys.executable, "-m", "synapse_lsp"], env, root)
        try:
            initialize(rpc, root)
            rpc.notify("initialized", {})

            def apply(params: dict[str, object]) -> dict[str, object]:
                # The editor's part: apply the created document's text to disk.
                changes = params["edit"]["documentChanges"]  # type: ignore[index]
                for change in changes:
                    if "edits" in change:
                        path = Path(change["textDocument"]["uri"].removeprefix("file://"))
                        path.write_text("".join(e["newText"] for e in change["edits"]))
                return {"applied": True}

            rpc.on_request["workspace/applyEdit"] = apply
            content = ("lorem ipsum 'dolor' sit amet " * 21_000)[:600_000]
            lines = {
                "true": "true",
                "600 KB write": f"write big.txt {cmdline.quote(content)}",
                "600 KB printf": f"printf %s {cmdline.quote(content)} > big2.txt",
            }
            figures: dict[str, list[float]] = {name: [] for name in lines}
            for _ in range(runs):
                for name, line in lines.items():
                    params = {"command": "synapse.shell.run", "arguments": [{"command": line}]}
                    started = time.perf_counter()
                    rpc.request("workspace/executeCommand", params)
                    figures[name].append(time.perf_counter() - started)
            assert Path(root, "big.txt").read_text() == content
            assert Path(root, "big2.txt").read_text() == content
            base = statistics.median(figures["true"])
            for name, times in figures.items():
                med = statistics.median(times)
                ratio = med / base
                print(f"  synapse.shell.run {name:13s} {med * 1000:8.1f} ms  ({ratio:5.1f}x true)")
        finally:
            rpc.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scanning(args.runs)
    print("LSP round trip:")
    lsp_round_trip(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
