"""Synapse beside its peers on one scripted turn: 50 Bash `true` calls, then an answer.

    .venv/bin/python benchmarks/bench_peers.py [--runs 5] [--calls 50] [--files N] [--settings JSON]

Every agent talks to the same fake Messages API (synapse_lsp.agent.scripted_api) on
loopback, in this process, which timestamps each request's arrival and each
response's end. Agents, interleaved run by run:

- `synapse chat -p` (this checkout, `python -m synapse_lsp`), and the one of each
  --compare DIR (an earlier checkout's sources: same-run before/after figures);
- a minimal loop on the `anthropic` SDK (stream, run the tool with `bash -c`, repeat);
- Claude Code (`claude -p … --allowedTools Bash`) when `claude` is on PATH; skipped
  with a message otherwise (install it yourself: `npm i -g @anthropic-ai/claude-code`;
  CI never does).

Printed per agent (median over runs, with min–max): per tool call (a response's end
-> the next request's arrival), whole turn (spawn -> exit), spawn -> first model
request, last answer -> process exit (`--mcp N`: with N MCP servers to shut down),
peak RSS (the agent's own process: `PeakRss`). Requests that are not
part of the turn (a peer's side calls without tools) get a one-line answer and are
not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synapse_lsp.agent.scripted_api import FakeAnthropic

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-ant-bench-not-a-key"

MINIMAL_LOOP = """\
import subprocess, sys
import anthropic

client = anthropic.Anthropic()
tools = [{"name": "Bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"]}}]
messages = [{"role": "user", "content": sys.argv[1]}]
while True:
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024,
                                messages=messages, tools=tools) as stream:
        message = stream.get_final_message()
    messages.append({"role": "assistant", "content": message.content})
    uses = [b for b in message.content if b.type == "tool_use"]
    if not uses:
        print("".join(b.text for b in message.content if b.type == "text"))
        break
    results = []
    for use in uses:
        done = subprocess.run(["bash", "-c", use.input["command"]], capture_output=True, text=True)
        results.append({"type": "tool_result", "tool_use_id": use.id,
                        "content": (done.stdout + done.stderr) or "(no output)"})
    messages.append({"role": "user", "content": results})
"""


class TimedApi(FakeAnthropic):
    """The fake API, timestamping the turn's requests; side requests get a short text."""

    def __init__(self) -> None:
        super().__init__([])
        self.arrivals: list[float] = []
        self.ends: list[float] = []

    def _next(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if not body or not body.get("tools"):
            return {"text": "ok"}
        self.arrivals.append(time.monotonic())
        return super()._next(body)

    async def _stream(self, *args: Any, **kwargs: Any) -> bool:
        keep = await super()._stream(*args, **kwargs)
        self.ends.append(time.monotonic())
        return keep


@dataclass
class Figures:
    per_call: list[float] = field(default_factory=list)
    turn: list[float] = field(default_factory=list)
    first_request: list[float] = field(default_factory=list)
    exit_after_answer: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)


def run_once(
    api: TimedApi,
    loop: asyncio.AbstractEventLoop,
    argv: list[str],
    calls: int,
    env: dict[str, str],
    cwd: Path,
    out: Figures,
) -> None:
    script = [{"commands": ["true"]} for _ in range(calls)] + [{"text": "Done."}]

    async def reset() -> None:
        api._queue.clear()
        api.add(*script)
        api.arrivals.clear()
        api.ends.clear()

    asyncio.run_coroutine_threadsafe(reset(), loop).result()
    started = time.monotonic()
    pid = _spawn_in(argv, env, cwd)
    peak = PeakRss(pid)
    _, status, _usage = os.wait4(pid, 0)
    ended = time.monotonic()
    peak.stop()
    if os.waitstatus_to_exitcode(status) != 0 or len(api.arrivals) != calls + 1:
        print(
            f"  ! {Path(argv[0]).name}… exited {os.waitstatus_to_exitcode(status)} after "
            f"{len(api.arrivals)} of {calls + 1} requests",
            file=sys.stderr,
        )
        return
    gaps = [api.arrivals[i + 1] - api.ends[i] for i in range(calls)]
    out.per_call.append(statistics.median(gaps))
    out.turn.append(ended - started)
    out.first_request.append(api.arrivals[0] - started)
    out.exit_after_answer.append(ended - api.ends[-1])
    out.rss_mb.append(peak.kib / 1024)


class PeakRss:
    """The peak RSS of process `pid` after its exec: its `VmHWM`, read every 5 ms while
    it runs (the high-water mark only grows; the last reading before its end is kept).
    Not wait4's `ru_maxrss`: that mark survives exec, so a child forked from this
    process starts at this process's size (which grows with the turns it records: 900 MB
    after a 500-call turn), and every agent would weigh at least as much."""

    def __init__(self, pid: int) -> None:
        self.kib = 0
        self._proc = Path(f"/proc/{pid}")
        self._status = self._proc / "status"
        self._mine = Path("/proc/self/cmdline").read_bytes()  # the child's, until its exec
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._done.wait(0.005):
            try:
                if (self._proc / "cmdline").read_bytes() == self._mine:
                    continue  # not yet exec'd: its pages are still this process's
                text = self._status.read_text()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    self.kib = max(self.kib, int(line.split()[1]))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _spawn_in(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    pid = os.fork()
    if pid == 0:  # child: no Python work beyond this point
        try:
            os.chdir(cwd)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument(
        "--mcp",
        type=int,
        default=0,
        metavar="N",
        help="configure N stdio MCP servers (tests/mcp_servers/demo_server.py) for Synapse",
    )
    parser.add_argument(
        "--files",
        type=int,
        default=0,
        metavar="N",
        help="the agents work in a folder of N files (in 50 folders; default: an empty one)",
    )
    parser.add_argument(
        "--settings",
        default="{}",
        metavar="JSON",
        help="more Synapse settings, e.g. '{\"checkpoints\": false}' to compare without them",
    )
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], metavar="DIR",
        help="also run the Synapse whose sources are in DIR (e.g. `git archive` of an "
        "earlier commit): same-run before/after figures",
    )  # fmt: skip
    args = parser.parse_args()

    # As an installed package would be: byte-compiled (this machine's environment may
    # set PYTHONDONTWRITEBYTECODE, which would make every run compile our sources).
    for tree in (ROOT, *args.compare):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "synapse_lsp")], check=True
        )
    loop = asyncio.new_event_loop()
    api = TimedApi()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(api.start(), loop).result()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp, "work")
        work.mkdir()
        for i in range(args.files):
            folder = work / f"pkg{i % 50:02d}"
            folder.mkdir(exist_ok=True)
            (folder / f"mod{i}.py").write_text(f"VALUE = {i}\n")
        if args.files:
            print(f"the agents work in a folder of {args.files} files")
        home = Path(tmp, "synapse-home")
        home.mkdir()
        # 50 calls > the default 50 turns
        settings = {"maxTurns": 1000, **json.loads(args.settings)}
        (home / "settings.json").write_text(json.dumps(settings))
        if args.mcp:
            server = ROOT / "tests" / "mcp_servers" / "demo_server.py"
            servers = {
                f"demo{i}": {"command": sys.executable, "args": [str(server), "--name", f"demo{i}"]}
                for i in range(args.mcp)
            }
            (home / "mcp").mkdir()
            (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": servers}))
            print(f"Synapse has {args.mcp} stdio MCP server(s) configured")
        loop_file = Path(tmp, "minimal_loop.py")
        loop_file.write_text(MINIMAL_LOOP)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.base_url,
            "SYNAPSE_HOME": str(home),
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        prompt = f"Run `true` {args.calls} times, one call each, then say Done."
        synapse = str(Path(sys.executable).with_name("synapse"))
        agents: dict[str, list[str]] = {
            "Synapse (chat -p)": [synapse, "chat", "-p", prompt],
            "minimal SDK loop": [sys.executable, str(loop_file), prompt],
        }
        envs: dict[str, dict[str, str]] = {}
        for other in args.compare:  # an earlier checkout's sources, same run
            agents[f"Synapse @{other.name}"] = [synapse, "chat", "-p", prompt]
            envs[f"Synapse @{other.name}"] = dict(env, PYTHONPATH=str(other))
        claude = shutil.which("claude")
        if claude:
            agents["Claude Code"] = [claude, "-p", prompt, "--allowedTools", "Bash"]
        else:
            print("Claude Code: not on PATH, skipped (npm i -g @anthropic-ai/claude-code)")
        figures = {name: Figures() for name in agents}
        for run in range(args.runs):
            for name, argv in agents.items():
                run_once(api, loop, argv, args.calls, envs.get(name, env), work, figures[name])
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    asyncio.run_coroutine_threadsafe(api.close(), loop).result()

    def cell(values: list[float], scale: float, unit: str) -> str:
        if not values:
            return "—"
        med = statistics.median(values) * scale
        return f"{med:.1f} {unit} ({min(values) * scale:.1f}–{max(values) * scale:.1f})"

    rows = [
        ("per tool call, median", "per_call", 1000, "ms"),
        ("whole turn, wall", "turn", 1, "s"),
        ("spawn → first model request", "first_request", 1000, "ms"),
        ("last answer → process exit", "exit_after_answer", 1000, "ms"),
        ("peak RSS", "rss_mb", 1, "MB"),
    ]
    names = list(agents)
    print(f"\n{args.calls} Bash `true` calls then an answer; median (min–max) of {args.runs} runs")
    print("| figure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, attr, scale, unit in rows:
        cells = [cell(getattr(figures[n], attr), scale, unit) for n in names]
        print(f"| {label} | " + " | ".join(cells) + " |")
    base = figures["minimal SDK loop"]
    ours = figures["Synapse (chat -p)"]
    if base.first_request and ours.first_request:
        ratio = statistics.median(ours.first_request) / statistics.median(base.first_request)
        print(f"\nspawn → first request, Synapse / minimal loop: {ratio:.2f}× (target ≤ 1.0×)")
    if ours.exit_after_answer:
        exit_ms = statistics.median(ours.exit_after_answer) * 1000
        target = "target ≤ 30 ms, no MCP server" if not args.mcp else f"{args.mcp} MCP server(s)"
        print(f"last answer → exit, Synapse: {exit_ms:.0f} ms ({target})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
