"""ACP face vs LSP face: spawn -> initialize result, and session/new latency.

    .venv/bin/python benchmarks/bench_acp.py [RUNS]

Median of RUNS (default 7) alternating runs, the same minimal blocking JSON-RPC
client on pipes for both faces (NDJSON for ACP, LSP framing for LSP), shells
unsandboxed (SYNAPSE_SANDBOX=full-access). Zed's adapter `claude-agent-acp`
(`npm i @zed-industries/claude-agent-acp`) is measured beside them when
$CLAUDE_AGENT_ACP names its executable (as root it also needs IS_SANDBOX=1);
skipped otherwise.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_server import CAPABILITIES, Rpc  # LSP framing client  # noqa: E402


class NdRpc:
    """NDJSON (ACP) blocking client."""

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

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(
            (
                json.dumps(
                    {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
                )
                + "\n"
            ).encode()
        )
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError
            msg = json.loads(line)
            if msg.get("id") == self.next_id and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:  # claude-agent-acp does not end at end of input
            self.proc.kill()
            self.proc.wait()


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


CLAUDE = os.environ.get("CLAUDE_AGENT_ACP", "")


def claude_run(env: dict[str, str], root: Path) -> tuple[float, float]:
    t0 = time.perf_counter()
    rpc = NdRpc([CLAUDE], dict(env, HOME=str(root.parent / "claude-home")), root)
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


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        env = dict(
            os.environ,
            SYNAPSE_HOME=str(Path(tmp) / "home"),
            SYNAPSE_SANDBOX="full-access",
            ANTHROPIC_API_KEY="sk-ant-bench",
        )
        faces = {"acp": acp_run, "lsp": lsp_run}
        if CLAUDE:
            faces["claude"] = claude_run
        else:
            print("claude-agent-acp: $CLAUDE_AGENT_ACP not set, skipped")
        for run in faces.values():
            run(env, root)  # warm the page cache
        figures: dict[str, list[tuple[float, float]]] = {k: [] for k in faces}
        for _ in range(runs):
            for name, run in faces.items():
                figures[name].append(run(env, root))
    med = {
        k: (statistics.median(a for a, _ in v) * 1000, statistics.median(b for _, b in v) * 1000)
        for k, v in figures.items()
    }
    tot = {k: statistics.median(a + b for a, b in v) * 1000 for k, v in figures.items()}
    print(f"runs per face: {runs} (alternating)")
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


if __name__ == "__main__":
    main()
