"""Parallel sub-agents: one model response with N `task:*` calls, each sub-agent running
one `sleep S` command — the turn's wall time run concurrently (`maxParallelTasks` 5)
vs one at a time (`maxParallelTasks` 1), in the same run (real SDK against the fake
Messages API, real bash: each sub-agent starts, uses and closes a shell of its own).

    .venv/bin/python benchmarks/bench_subagents.py [--tasks 3] [--sleep 1] [--repeats 3]

Prints each mode's median wall time, the ratio parallel/serial (ideal: 1/N), and the
overhead over the ideal (wall time minus the sleeps that had to be waited for).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from synapse_lsp.agent.model import ModelClient
from synapse_lsp.agent.scripted_api import FakeAnthropic, normalize_response
from synapse_lsp.agent.session import ChatSession
from synapse_lsp.config import Settings
from synapse_lsp.events import TurnFinished
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

SUB = "SUB:"


class SubAgentAPI(FakeAnthropic):
    """Answers a sub-agent by its state (their calls interleave): first a command, then
    a final text; the parent takes the scripted queue."""

    command = "sleep 1"

    def _next(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        messages = (body or {}).get("messages", [])
        first = messages[0]["content"] if messages else []
        text = first[0].get("text", "") if isinstance(first, list) and first else str(first)
        if not text.startswith(SUB):
            return super()._next(body)
        last = messages[-1]["content"]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
            return normalize_response("sub-agent done")
        return normalize_response({"commands": [self.command]})


async def one_turn(
    api: SubAgentAPI, router: BashRouter, settings: Settings, model: ModelClient, tasks: int
) -> float:
    lines = [f"task:general -p '{SUB} job {i}' -d 'job {i}'" for i in range(tasks)]
    api.add({"commands": lines}, "all done")
    session = ChatSession(router, settings, model=model)
    try:
        started = time.perf_counter()
        events = [e async for e in session.run_turn("fan out")]
        took = time.perf_counter() - started
    finally:
        await session.close()
    last = events[-1]
    assert isinstance(last, TurnFinished) and last.stop_reason == "end_turn", last
    return took


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(synapse_home=Path(tmp) / "home", sandbox="full-access")
        shell = ShellSession(Path(tmp), base)
        await shell.start()
        try:
            api = SubAgentAPI([])
            async with api:
                api.command = f"sleep {args.sleep:g}"
                router = BashRouter(shell, base)
                # One client for every run (the SDK import and its HTTP client are not
                # what is measured), warmed up by an untimed turn.
                model = ModelClient(api_key="bench", base_url=api.base_url, model="fake-model")
                figures: dict[str, list[float]] = {"parallel": [], "serial": []}
                try:
                    await one_turn(api, router, base, model, 1)
                    for _ in range(args.repeats):  # interleaved: both modes, same machine
                        for mode, cap in (("parallel", 5), ("serial", 1)):
                            settings = dataclasses.replace(base, max_parallel_tasks=cap)
                            took = await one_turn(api, router, settings, model, args.tasks)
                            figures[mode].append(took)
                finally:
                    await model.close()
        finally:
            await shell.close()
    parallel = statistics.median(figures["parallel"])
    serial = statistics.median(figures["serial"])
    waves = -(-args.tasks // 5)
    print(f"{args.tasks} sub-agents, each running `sleep {args.sleep:g}`, {args.repeats} runs")
    print(f"parallel (cap 5): median {parallel:.3f} s  runs {_fmt(figures['parallel'])}")
    print(f"serial   (cap 1): median {serial:.3f} s  runs {_fmt(figures['serial'])}")
    print(f"ratio parallel/serial: {parallel / serial:.2f} (ideal {1 / args.tasks:.2f})")
    print(
        f"overhead over the sleeps: parallel {parallel - waves * args.sleep:.3f} s, "
        f"serial {serial - args.tasks * args.sleep:.3f} s "
        f"({(serial - args.tasks * args.sleep) / args.tasks * 1000:.0f} ms per sub-agent: "
        "model calls, its own shell's start and close)"
    )


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


if __name__ == "__main__":
    asyncio.run(main())
