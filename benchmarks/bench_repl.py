"""The REPL's start, as a user meets it: `synapse chat` on a terminal (a PTY).

    .venv/bin/python benchmarks/bench_repl.py [--runs 5] [--idle 3]

Against the fake Messages API on loopback (in this process), median (min–max) of
`--runs`:

- spawn -> the prompt `You (1)>` on the terminal (before the model SDK has loaded:
  it is imported in the background, cli/preload.py);
- typed at once: a line typed as soon as the prompt shows -> its request arrives
  (this one waits for the rest of the SDK import);
- typed later: a line typed `--idle` seconds after the prompt -> its request arrives
  (target: at most 50 ms; the SDK has loaded by then);
- for scale, spawn -> first request of the minimal SDK loop of bench_peers.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ptyprocess import PtyProcess  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_peers import KEY, MINIMAL_LOOP, ROOT, TimedApi  # noqa: E402

PROMPT = b"You (1)> "


def _read_until(proc: PtyProcess, marker: bytes, timeout: float = 30.0) -> float:
    """Read the terminal until `marker` shows; the time it did."""
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {marker!r} within {timeout} s; got {seen[-300:]!r}")
        try:
            seen += proc.read(4096)
        except EOFError as exc:
            raise RuntimeError(f"the REPL ended: {seen[-300:]!r}") from exc
    return time.monotonic()


def one_run(
    api: TimedApi, loop: asyncio.AbstractEventLoop, env: dict[str, str], cwd: Path, idle: float
) -> tuple[float, float]:
    """(spawn -> prompt, typed -> request) for one REPL, typing after `idle` seconds."""

    async def reset() -> None:
        api._queue.clear()
        api.add({"text": "Hello."})
        api.arrivals.clear()

    asyncio.run_coroutine_threadsafe(reset(), loop).result()
    synapse = str(Path(sys.executable).with_name("synapse"))
    started = time.monotonic()
    proc = PtyProcess.spawn([synapse, "chat"], env=env, cwd=str(cwd), dimensions=(40, 160))
    try:
        shown = _read_until(proc, PROMPT)
        if idle:
            time.sleep(idle)
        typed = time.monotonic()
        proc.write(b"hi\r")
        deadline = time.monotonic() + 30
        while not api.arrivals and time.monotonic() < deadline:
            time.sleep(0.0005)
        if not api.arrivals:
            raise RuntimeError("no request arrived")
        _read_until(proc, b"You (2)> ")
        return shown - started, api.arrivals[0] - typed
    finally:
        proc.terminate(force=True)


def minimal_first_request(
    api: TimedApi, loop: asyncio.AbstractEventLoop, env: dict[str, str], script: Path
) -> float:
    async def reset() -> None:
        api._queue.clear()
        api.add({"text": "Hello."})
        api.arrivals.clear()

    asyncio.run_coroutine_threadsafe(reset(), loop).result()
    started = time.monotonic()
    subprocess.run([sys.executable, str(script), "hi"], env=env, capture_output=True, check=True)
    first: float = api.arrivals[0]
    return first - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle", type=float, default=3.0)
    args = parser.parse_args()
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "synapse_lsp")], check=True
    )
    loop = asyncio.new_event_loop()
    api = TimedApi()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(api.start(), loop).result()
    prompt_shown: list[float] = []
    at_once: list[float] = []
    later: list[float] = []
    minimal: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp, "work")
        work.mkdir()
        home = Path(tmp, "home")
        home.mkdir()
        script = Path(tmp, "minimal_loop.py")
        script.write_text(MINIMAL_LOOP)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "TERM": "xterm",
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.base_url,
            "SYNAPSE_HOME": str(home),
        }
        if "PYTHONPATH" in os.environ:  # e.g. measuring another checkout with this venv
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        for run in range(args.runs):
            shown, typed = one_run(api, loop, env, work, 0.0)
            prompt_shown.append(shown)
            at_once.append(typed)
            later.append(one_run(api, loop, env, work, args.idle)[1])
            minimal.append(minimal_first_request(api, loop, env, script))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    asyncio.run_coroutine_threadsafe(api.close(), loop).result()

    def cell(values: list[float]) -> str:
        return (
            f"{statistics.median(values) * 1000:.0f} ms "
            f"({min(values) * 1000:.0f}–{max(values) * 1000:.0f})"
        )

    print(f"\n`synapse chat` on a PTY; median (min–max) of {args.runs} runs")
    print("| figure | time |\n|---|---|")
    print(f"| spawn → prompt shown | {cell(prompt_shown)} |")
    print(f"| typed at once → request | {cell(at_once)} |")
    print(f"| typed after {args.idle:g} s → request | {cell(later)} (target ≤ 50 ms) |")
    print(f"| minimal SDK loop: spawn → request | {cell(minimal)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
