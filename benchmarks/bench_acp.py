"""ACP: Synapse's faces at start-up, and one scripted turn beside Zed's claude-agent-acp.

    .venv/bin/python benchmarks/bench_acp.py [--runs 7] [--calls 10] [--mcp 2] [--pause S]
                                             [--only faces|turn] [--no-peer] [--compare DIR]

Start-up (`faces`): spawn -> `initialize` result and `session/new` latency of the
ACP face beside the LSP face, the same minimal blocking JSON-RPC client on pipes
for both (NDJSON for ACP, LSP framing for LSP).

One turn (`turn`): every agent talks to the same fake Messages API
(synapse_lsp.agent.scripted_api, on loopback in this process, timestamping each
request's arrival and each response's end) over ACP: initialize, session/new,
(a pause of --pause seconds), one session/prompt whose script is --calls Bash
`true` calls then an answer, then end of input. Figures per agent (median, with
min-max): `session/prompt` -> first model request, spawn -> first model
request (the pause included), the whole turn (prompt ->
its result), per tool call (a response's end -> the next request), end of
input -> process exit. Agents, interleaved run by run:

- Synapse (`python -m synapse_lsp acp`);
- Synapse with --mcp N stdio MCP servers passed in `session/new`
  (tests/mcp_servers/demo_server.py), when --mcp is given;
- the Synapse of each --compare DIR (an earlier checkout's sources: same-run
  before/after figures);
- Zed's adapter claude-agent-acp (`@zed-industries/claude-agent-acp`, pinned to
  PEER_VERSION): $CLAUDE_AGENT_ACP names its executable, else it is installed on
  demand with npm into ~/.cache/synapse-bench/ (skipped with a message when npm
  or the registry is not there, or with --no-peer). As root it runs with
  IS_SANDBOX=1 (Claude Code refuses to skip permission prompts as root otherwise);
  its session is put in `bypassPermissions` mode (Synapse runs full-access).

Shells unsandboxed (SYNAPSE_SANDBOX=full-access) in both sections. Only ratios of
one run mean anything on a shared machine. Never run in CI.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.bench_peers import TimedApi  # noqa: E402
from benchmarks.bench_server import CAPABILITIES, Rpc  # LSP framing client  # noqa: E402

PEER_PACKAGE = "@zed-industries/claude-agent-acp"
PEER_VERSION = "0.23.1"  # the version issue 34 measured against
EXIT_CAP = 5.0  # seconds an agent gets to exit after end of input (then it is killed)
KEY = "sk-ant-bench-not-a-key"


class NdRpc:
    """NDJSON (ACP) blocking client; answers the agent's own requests (a permission
    question: the first "allow always", else "allow once"; anything else: an error)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError(f"the agent closed its output during {method}")
            msg = json.loads(line)
            if "method" in msg:
                if "id" in msg:
                    self._answer(msg)
                continue
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def _answer(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "session/request_permission":
            options = msg["params"].get("options", [])
            pick = next((o for o in options if o.get("kind") == "allow_always"), None) or next(
                (o for o in options if o.get("kind") == "allow_once"), None
            )
            if pick is not None:
                outcome = {"outcome": "selected", "optionId": pick["optionId"]}
            else:
                outcome = {"outcome": "cancelled"}
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": outcome}})
            return
        self.send(
            {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "error": {"code": -32601, "message": f"{msg['method']} not offered"},
            }
        )

    def end_input(self, cap: float = EXIT_CAP) -> bool:
        """Close stdin; True if the agent exited within `cap` seconds (else it is killed)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        # Polled every millisecond: `Popen.wait(timeout)` sleeps up to 50 ms between its
        # looks (its figures came in steps of ~32 and ~50 ms).
        deadline = time.monotonic() + cap
        while self.proc.poll() is None:
            if time.monotonic() > deadline:  # claude-agent-acp does not end at end of input
                self.proc.kill()
                self.proc.wait()
                return False
            time.sleep(0.001)
        return True

    def close(self) -> None:
        self.end_input(30)


# ------------------------------------------------------------------ start-up


def acp_run(env: dict[str, str], root: Path) -> tuple[float, float]:
    t0 = time.perf_counter()
    rpc = NdRpc([sys.executable, "-m", "synapse_lsp", "acp"], env, root)
    rpc.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    t1 = time.perf_counter()
    rpc.request("session/new", {"cwd": str(root), "mcpServers": []})
    t2 = time.perf_counter()
    rpc.close()
    return t1 - t0, t2 - t1


def lsp_run(env: dict[str, str], root: Path) -> tuple[float, float]:
    t0 = time.perf_counter()
    rpc = Rpc([sys.executable, "-m", "synapse_lsp"], env, root)
    rpc.request(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "capabilities": CAPABILITIES,
        },
    )
    t1 = time.perf_counter()
    rpc.notify("initialized", {})
    rpc.request(
        "workspace/executeCommand",
        {"command": "synapse.session.new", "arguments": [{"workspaceUri": root.as_uri()}]},
    )
    t2 = time.perf_counter()
    rpc.close()
    return t1 - t0, t2 - t1


def peer_start_run(argv: list[str], env: dict[str, str], root: Path) -> tuple[float, float]:
    t0 = time.perf_counter()
    rpc = NdRpc(argv, peer_environment(env, root.parent), root)
    rpc.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    t1 = time.perf_counter()
    try:
        rpc.request("session/new", {"cwd": str(root), "mcpServers": []})
        t2 = time.perf_counter()
    except RuntimeError:
        t2 = float("nan")
    rpc.proc.kill()
    rpc.proc.wait()
    return t1 - t0, t2 - t1


def faces(runs: int, env: dict[str, str], root: Path, peer: list[str] | None) -> None:
    runners: dict[str, Any] = {"acp": acp_run, "lsp": lsp_run}
    if peer is not None:
        runners["claude"] = lambda e, r: peer_start_run(peer, e, r)
    for run in runners.values():
        run(env, root)  # warm the page cache
    figures: dict[str, list[tuple[float, float]]] = {k: [] for k in runners}
    for _ in range(runs):
        for name, run in runners.items():
            figures[name].append(run(env, root))
    med = {
        k: (statistics.median(a for a, _ in v) * 1000, statistics.median(b for _, b in v) * 1000)
        for k, v in figures.items()
    }
    tot = {k: statistics.median(a + b for a, b in v) * 1000 for k, v in figures.items()}
    print(f"\nStart-up, runs per face: {runs} (alternating)")
    print(
        f"spawn -> initialize result: ACP {med['acp'][0]:.1f} ms, LSP {med['lsp'][0]:.1f} ms, "
        f"ratio {med['acp'][0] / med['lsp'][0]:.2f}x"
    )
    if "claude" in med:
        print(
            f"claude-agent-acp spawn -> initialize result: {med['claude'][0]:.1f} ms "
            f"(ours/theirs {med['acp'][0] / med['claude'][0]:.2f}x); its session/new: "
            f"{med['claude'][1]:.1f} ms; spawn -> session/new result {tot['claude']:.1f} ms "
            f"(ours/theirs {tot['acp'] / tot['claude']:.2f}x)"
        )
    print(
        f"spawn -> session/new result: ACP {tot['acp']:.1f} ms, LSP {tot['lsp']:.1f} ms, "
        f"ratio {tot['acp'] / tot['lsp']:.2f}x"
    )
    print(
        f"session/new latency:        ACP {med['acp'][1]:.1f} ms, LSP {med['lsp'][1]:.1f} ms, "
        f"ratio {med['acp'][1] / med['lsp'][1]:.2f}x"
    )


# ---------------------------------------------------------------------- turn


@dataclass
class Agent:
    argv: list[str]
    env: dict[str, str]
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    bypass: bool = False  # put the session in bypassPermissions mode (claude-agent-acp)


@dataclass
class TurnFigures:
    first_request: list[float] = field(default_factory=list)
    spawn_first: list[float] = field(default_factory=list)
    turn: list[float] = field(default_factory=list)
    per_call: list[float] = field(default_factory=list)
    exit: list[float] = field(default_factory=list)
    no_exit: int = 0


def turn_run(
    api: TimedApi,
    loop: asyncio.AbstractEventLoop,
    agent: Agent,
    root: Path,
    calls: int,
    pause: float,
    out: TurnFigures,
) -> None:
    script = [{"commands": ["true"]} for _ in range(calls)] + [{"text": "Done."}]

    async def reset() -> None:
        api._queue.clear()
        api.add(*script)
        api.arrivals.clear()
        api.ends.clear()

    asyncio.run_coroutine_threadsafe(reset(), loop).result()
    spawned = time.monotonic()
    rpc = NdRpc(agent.argv, agent.env, root)
    try:
        rpc.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
            },
        )
        new = rpc.request("session/new", {"cwd": str(root), "mcpServers": agent.mcp_servers})
        sid = new["sessionId"]
        modes = [m["id"] for m in (new.get("modes") or {}).get("availableModes", [])]
        if agent.bypass and "bypassPermissions" in modes:
            rpc.request("session/set_mode", {"sessionId": sid, "modeId": "bypassPermissions"})
        if pause:
            time.sleep(pause)
        prompt = f"Run `true` {calls} times, one call each, then say Done."
        sent = time.monotonic()
        rpc.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]}
        )
        done = time.monotonic()
        exited = rpc.end_input()
        ended = time.monotonic()
    except (EOFError, RuntimeError, KeyError) as exc:
        print(f"  ! {Path(agent.argv[0]).name}: {exc}", file=sys.stderr)
        rpc.proc.kill()
        rpc.proc.wait()
        return
    if len(api.arrivals) != calls + 1:
        print(
            f"  ! {Path(agent.argv[-1]).name}: {len(api.arrivals)} of {calls + 1} requests",
            file=sys.stderr,
        )
        return
    out.first_request.append(api.arrivals[0] - sent)
    out.spawn_first.append(api.arrivals[0] - spawned)
    out.turn.append(done - sent)
    out.per_call.append(statistics.median(api.arrivals[i + 1] - api.ends[i] for i in range(calls)))
    if exited:
        out.exit.append(ended - done)
    else:
        out.no_exit += 1


def peer_environment(base: dict[str, str], tmp: Path) -> dict[str, str]:
    """claude-agent-acp's: its own HOME, no telemetry; as root, IS_SANDBOX=1."""
    home = tmp / "claude-home"
    home.mkdir(exist_ok=True)
    env = dict(
        base,
        HOME=str(home),
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return env


def turn(args: argparse.Namespace, env: dict[str, str], tmp: Path, peer: list[str] | None) -> None:
    loop = asyncio.new_event_loop()
    api = TimedApi()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    asyncio.run_coroutine_threadsafe(api.start(), loop).result()
    root = tmp / "turn-proj"
    root.mkdir()
    (root / "README.md").write_text("A project.\n")
    base = dict(env, ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY=KEY)
    synapse = [sys.executable, "-m", "synapse_lsp", "acp"]
    agents: dict[str, Agent] = {"Synapse": Agent(synapse, base)}
    for other in args.compare:
        agents[f"Synapse @{other.name}"] = Agent(synapse, dict(base, PYTHONPATH=str(other)))
    if args.mcp:
        server = ROOT / "tests" / "mcp_servers" / "demo_server.py"
        servers = [
            {"name": f"demo{i}", "command": sys.executable, "args": [str(server), "--name",
             f"demo{i}"], "env": []}
            for i in range(args.mcp)
        ]  # fmt: skip
        agents[f"Synapse + {args.mcp} MCP"] = Agent(synapse, base, mcp_servers=servers)
        for other in args.compare:
            env = dict(base, PYTHONPATH=str(other))
            agents[f"Synapse @{other.name} + {args.mcp} MCP"] = Agent(synapse, env, servers)
    if peer is not None:
        agents["claude-agent-acp"] = Agent(peer, peer_environment(base, tmp), bypass=True)
    figures = {name: TurnFigures() for name in agents}
    for agent in agents.values():  # warm the page cache (and npm's first-run work)
        turn_run(api, loop, agent, root, args.calls, 0.0, TurnFigures())
    for run in range(args.runs):
        for name, agent in agents.items():
            turn_run(api, loop, agent, root, args.calls, args.pause, figures[name])
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    asyncio.run_coroutine_threadsafe(api.close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)

    def cell(values: list[float], scale: float = 1000, unit: str = "ms") -> str:
        if not values:
            return "—"
        med = statistics.median(values) * scale
        return f"{med:.0f} {unit} ({min(values) * scale:.0f}–{max(values) * scale:.0f})"

    names = list(agents)
    pause = f", {args.pause:g} s pause after session/new" if args.pause else ""
    print(
        f"\nOne turn over ACP: {args.calls} Bash `true` calls then an answer{pause}; "
        f"median (min–max) of {args.runs} interleaved runs"
    )
    print("| figure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, attr in (
        ("session/prompt → first model request", "first_request"),
        ("spawn → first model request (pause included)", "spawn_first"),
        ("whole turn (prompt → its result)", "turn"),
        ("per tool call", "per_call"),
        ("end of input → exit", "exit"),
    ):
        cells = []
        for n in names:
            text = cell(getattr(figures[n], attr))
            if attr == "exit" and figures[n].no_exit:
                text += f"; {figures[n].no_exit} did not exit in {EXIT_CAP:g} s"
            cells.append(text)
        print(f"| {label} | " + " | ".join(cells) + " |")

    def ratio(a: str, b: str, attr: str) -> str:
        x, y = getattr(figures[a], attr), getattr(figures[b], attr)
        return f"{statistics.median(x) / statistics.median(y):.2f}×" if x and y else "—"

    print()
    if "claude-agent-acp" in figures:
        print(
            "Synapse / claude-agent-acp: prompt → first request "
            f"{ratio('Synapse', 'claude-agent-acp', 'first_request')} (target ≤ 1.5×), "
            f"whole turn {ratio('Synapse', 'claude-agent-acp', 'turn')} (target ≤ 1.0×), "
            f"per tool call {ratio('Synapse', 'claude-agent-acp', 'per_call')}"
        )
    mcp = f" + {args.mcp} MCP" if args.mcp else ""
    for tag in ["", *(f" @{o.name}" for o in args.compare)]:
        if args.mcp:
            with_mcp, without = f"Synapse{tag}{mcp}", f"Synapse{tag}"
            print(
                f"{without}: with {args.mcp} MCP server(s) / without: prompt → first request "
                f"{ratio(with_mcp, without, 'first_request')}, exit "
                f"{ratio(with_mcp, without, 'exit')} (target ≤ 1.5×)"
            )
        if tag:
            for suffix in ["", mcp] if mcp else [""]:
                now, then = f"Synapse{suffix}", f"Synapse{tag}{suffix}"
                print(
                    f"{now} / {then}: prompt → first request "
                    f"{ratio(now, then, 'first_request')}, whole turn {ratio(now, then, 'turn')}, "
                    f"per tool call {ratio(now, then, 'per_call')}, exit {ratio(now, then, 'exit')}"
                )


# ---------------------------------------------------------------------- peer


def find_peer(version: str) -> list[str] | None:
    """claude-agent-acp's argv: $CLAUDE_AGENT_ACP, else the cached npm install (made now
    when missing); None, with a message, when it cannot be had."""
    named = os.environ.get("CLAUDE_AGENT_ACP", "")
    if named:
        return [named]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    prefix = cache / "synapse-bench" / f"claude-agent-acp-{version}"
    binary = prefix / "node_modules" / ".bin" / "claude-agent-acp"
    if binary.exists():
        return [str(binary)]
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        print("claude-agent-acp: node/npm not on PATH, skipped")
        return None
    print(f"claude-agent-acp: installing {PEER_PACKAGE}@{version} into {prefix} …")
    try:
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--silent",
             f"{PEER_PACKAGE}@{version}"],
            check=True, timeout=600, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(
            f"claude-agent-acp: npm install failed ({exc}"
            f"{'; ' + detail.decode(errors='replace').strip()[-300:] if detail else ''}), skipped"
        )
        return None
    if not binary.exists():
        print(f"claude-agent-acp: installed, but {binary} is missing; skipped")
        return None
    return [str(binary)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_positional", nargs="?", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=10, help="tool calls in the turn")
    parser.add_argument("--mcp", type=int, default=0, metavar="N", help="also Synapse + N MCP")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds after session/new")
    parser.add_argument("--only", choices=("faces", "turn"), help="one section only")
    parser.add_argument("--no-peer", action="store_true", help="leave claude-agent-acp out")
    parser.add_argument("--peer-version", default=PEER_VERSION)
    parser.add_argument(
        "--compare", type=Path, action="append", default=[], metavar="DIR",
        help="also run the Synapse whose sources are in DIR (e.g. `git archive` of an earlier "
        "commit), as one more agent of the turn",
    )  # fmt: skip
    args = parser.parse_args()
    if args.runs_positional:
        args.runs = args.runs_positional
    # As an installed package would be: byte-compiled.
    for tree in (ROOT, *args.compare):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "synapse_lsp")], check=True
        )
    peer = None if args.no_peer else find_peer(args.peer_version)
    if args.no_peer:
        print("claude-agent-acp: --no-peer, skipped")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "proj"
        root.mkdir()
        env = dict(
            os.environ,
            SYNAPSE_HOME=str(tmp / "home"),
            SYNAPSE_SANDBOX="full-access",
            ANTHROPIC_API_KEY=KEY,
        )
        if args.only != "turn":
            faces(args.runs, env, root, peer)
        if args.only != "faces":
            turn(args, env, tmp, peer)


if __name__ == "__main__":
    main()
