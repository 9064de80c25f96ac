"""Agent-loop figures against the fake Messages API (real SDK, real HTTP, real bash).

    .venv/bin/python benchmarks/bench_agent.py [--deltas 10000] [--tools 50] [--turns 500]

Prints:
- per-delta latency the loop adds between the SDK yielding a text delta and the
  event reaching a `run_turn` consumer (median, p99), and the whole stream's
  time through the loop vs raw SDK streaming (ratio);
- time to first text delta, loop vs raw SDK;
- a scripted N-tool-call turn: total time, time inside tool calls, and the rest;
- peak RSS after a long session (one short tool call per turn);
- cold import time of `synapse_lsp.agent` (and that it does not import the SDK).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from synapse_lsp.agent import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.events import TextDelta, ToolCallFinished, ToolCallStarted
from synapse_lsp.fakeapi import FakeAnthropic
from synapse_lsp.model import ModelClient, StreamItem, StreamText
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession


class StampedModel(ModelClient):
    """Records when each text delta leaves the SDK layer."""

    stamps: list[float]

    async def stream(self, **kw: Any) -> AsyncGenerator[StreamItem, None]:  # type: ignore[override]
        async for item in super().stream(**kw):
            if isinstance(item, StreamText):
                self.stamps.append(time.perf_counter())
            yield item


def model_for(api: FakeAnthropic, cls: type[ModelClient] = ModelClient) -> ModelClient:
    return cls(api_key="bench", base_url=api.base_url, model="fake-model")


async def raw_stream(api: FakeAnthropic) -> tuple[float, float]:
    """(time to first delta, total) streaming straight from ModelClient."""
    model = model_for(api)
    start = time.perf_counter()
    first = 0.0
    async for item in model.stream(system="s", messages=[{"role": "user", "content": "go"}]):
        if isinstance(item, StreamText) and not first:
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    await model.close()
    return first, total


async def loop_stream(
    api: FakeAnthropic, router: BashRouter, settings: Settings
) -> tuple[float, float, list[float]]:
    model = model_for(api, StampedModel)
    assert isinstance(model, StampedModel)
    model.stamps = []
    session = ChatSession(router, settings, model=model)
    received: list[float] = []
    start = time.perf_counter()
    first = 0.0
    async for event in session.run_turn("go"):
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            received.append(now)
            if not first:
                first = now - start
    total = time.perf_counter() - start
    await model.close()
    latencies = [r - s for s, r in zip(model.stamps, received, strict=True)]
    return first, total, latencies


async def bench_stream(deltas: int, router: BashRouter, settings: Settings) -> None:
    text = "x" * deltas
    response = {"text": text, "chunk_size": 1}
    async with FakeAnthropic([response] * 6) as api:
        await raw_stream(api)  # warm-up: SDK import, connection
        raw = [await raw_stream(api) for _ in range(2)]
        await loop_stream(api, router, settings)
        looped = [await loop_stream(api, router, settings) for _ in range(2)]
    lat = sorted(x for _, _, run in looped for x in run)
    p99 = lat[int(len(lat) * 0.99)]
    raw_total = min(t for _, t in raw)
    loop_total = min(t for _, t, _ in looped)
    print(f"text stream, {deltas} deltas:")
    print(
        f"  loop latency per delta (SDK yield -> consumer): median "
        f"{statistics.median(lat) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms"
    )
    print(
        f"  whole stream: raw SDK {raw_total * 1e3:.0f} ms, through the loop "
        f"{loop_total * 1e3:.0f} ms, ratio {loop_total / raw_total:.2f}"
    )
    print(
        f"  time to first delta: raw SDK {min(f for f, _ in raw) * 1e3:.2f} ms, loop "
        f"{min(f for f, _, _ in looped) * 1e3:.2f} ms"
    )


async def bench_tools(count: int, router: BashRouter, settings: Settings) -> None:
    script: list[Any] = [{"commands": ["sleep 0.02"]} for _ in range(count)] + ["done"]
    async with FakeAnthropic(script) as api:
        model = model_for(api)
        session = ChatSession(router, settings, model=model)
        in_tools = 0.0
        started: dict[str, float] = {}
        start = time.perf_counter()
        async for event in session.run_turn("run them"):
            if isinstance(event, ToolCallStarted):
                started[event.tool_call_id] = time.perf_counter()
            elif isinstance(event, ToolCallFinished):
                in_tools += time.perf_counter() - started[event.tool_call_id]
        total = time.perf_counter() - start
        await model.close()
    rest = total - in_tools
    print(f"{count}-tool-call turn (each `sleep 0.02`, {count + 1} model calls):")
    print(
        f"  total {total * 1e3:.0f} ms, in tool calls {in_tools * 1e3:.0f} ms, rest (model "
        f"HTTP + loop) {rest * 1e3:.0f} ms = {rest / total * 100:.1f} % of the total "
        f"({rest / (count + 1) * 1e3:.2f} ms per model round trip)"
    )


async def bench_rss(turns: int, router: BashRouter, settings: Settings) -> None:
    script = {"loop": True, "responses": [{"commands": ["echo hi"]}, {"text": "ok " * 50}]}
    # The fake server keeps only the last request, so RSS measures the agent, not the recorder.
    async with FakeAnthropic(script, keep_requests=1) as api:
        model = model_for(api)
        session = ChatSession(router, settings, model=model)
        start = time.perf_counter()
        for i in range(turns):
            async for _ in session.run_turn(f"turn {i}: " + "please " * 20):
                pass
        elapsed = time.perf_counter() - start
        await model.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{turns}-turn session ({turns * 2} model calls, fake server in-process): "
        f"peak RSS {peak:.0f} MB, {elapsed / turns * 1e3:.1f} ms per turn"
    )


def bench_import() -> None:
    code = (
        "import time, sys; t = time.perf_counter(); import synapse_lsp.agent; "
        "print(time.perf_counter() - t, 'anthropic' in sys.modules)"
    )
    runs = []
    sdk = False
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        seconds, loaded = out.stdout.split()
        runs.append(float(seconds))
        sdk = sdk or loaded == "True"
    print(
        f"cold import of synapse_lsp.agent: median {statistics.median(runs) * 1e3:.0f} ms "
        f"(5 runs); anthropic imported: {sdk}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--turns", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(synapse_home=Path(tmp) / "home")
        shell = ShellSession(Path(tmp), settings)
        await shell.start()
        try:
            router = BashRouter(shell, settings)
            await bench_stream(args.deltas, router, settings)
            await bench_tools(args.tools, router, settings)
            await bench_rss(args.turns, router, settings)
        finally:
            await shell.close()
    bench_import()


if __name__ == "__main__":
    asyncio.run(main())
