"""Benchmarks for `synapse lsp` over real stdio (a minimal JSON-RPC client on pipes).

    .venv/bin/python benchmarks/bench_server.py [--runs 7] [--iterations 200]

Prints:
- cold start: process spawn -> `initialize` result, median of alternating runs,
  against a bare pygls server measured in the same run (target ratio <= 1.3x);
- `synapse.shell.run` of `true`, round trip median (target <= 3 ms);
- `edit` of an open 20,000-line document -> `workspace/applyEdit` received by the
  client, median (target <= 5 ms);
- idle RSS after `initialize` (target <= 80 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BARE_SERVER = (
    "from pygls.lsp.server import LanguageServer\nLanguageServer('bare', '0').start_io()\n"
)
CAPABILITIES: dict[str, Any] = {
    "workspace": {
        "applyEdit": True,
        "workspaceEdit": {"documentChanges": True, "resourceOperations": ["create"]},
        "configuration": False,
    },
    "window": {"workDoneProgress": False},
}


class Rpc:
    """A blocking JSON-RPC client on the server's stdio; answers server requests."""

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
        self.on_request: dict[str, Any] = {}
        self.seen: list[tuple[float, dict[str, Any]]] = []

    def send(self, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("server closed its output")
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
            elif line in (b"\r\n", b"\n"):
                break
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        return message

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            msg = self.recv()
            if "method" in msg:
                self.seen.append((time.perf_counter(), msg))
                if "id" in msg:
                    handler = self.on_request.get(msg["method"])
                    result = handler(msg["params"]) if handler else None
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                continue
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def initialize(rpc: Rpc, root: Path) -> Any:
    return rpc.request(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "capabilities": CAPABILITIES,
        },
    )


def cold_start(runs: int, env: dict[str, str], root: Path) -> tuple[list[float], list[float]]:
    bare, ours = [], []
    commands = {
        "bare": [sys.executable, "-c", BARE_SERVER],
        "synapse": [sys.executable, "-m", "synapse_lsp"],
    }
    for i in range(runs * 2):
        name = "bare" if i % 2 == 0 else "synapse"
        started = time.perf_counter()
        rpc = Rpc(commands[name], env, root)
        initialize(rpc, root)
        elapsed = time.perf_counter() - started
        (bare if name == "bare" else ours).append(elapsed)
        rpc.close()
    return bare, ours


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def shell_round_trips(rpc: Rpc, iterations: int) -> list[float]:
    params = {"command": "synapse.shell.run", "arguments": [{"command": "true"}]}
    rpc.request("workspace/executeCommand", params)  # warm: starts the shell
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        rpc.request("workspace/executeCommand", params)
        times.append(time.perf_counter() - t)
    return times


def edit_to_apply(rpc: Rpc, root: Path, iterations: int) -> list[float]:
    path = root / "big.txt"
    lines = [f"line {i}: some ordinary text to make the line realistic\n" for i in range(20000)]
    text = "".join(lines)
    path.write_text(text)
    uri = path.as_uri()
    doc = {"version": 1, "text": text}
    rpc.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": text}},
    )
    applied_at: list[float] = []

    def apply(params: dict[str, Any]) -> dict[str, Any]:
        applied_at.append(time.perf_counter())
        change = params["edit"]["documentChanges"][0]
        edits = change["edits"]
        body = doc["text"]
        assert isinstance(body, str)
        starts = body.splitlines(keepends=True)
        offsets = [0]
        for line in starts:
            offsets.append(offsets[-1] + len(line))
        for e in sorted(
            edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
            reverse=True,
        ):  # fmt: skip
            s, f = e["range"]["start"], e["range"]["end"]
            a = offsets[s["line"]] + s["character"]
            b = offsets[f["line"]] + f["character"]
            body = body[:a] + e["newText"] + body[b:]
        doc["text"] = body
        doc["version"] = int(doc["version"]) + 1  # type: ignore[call-overload]
        rpc.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": doc["version"]},
                "contentChanges": [{"range": e["range"], "text": e["newText"]} for e in edits],
            },
        )
        return {"applied": True}

    rpc.on_request["workspace/applyEdit"] = apply
    times = []
    for i in range(iterations + 1):
        old, new = ("foo", "bar") if i % 2 == 0 else ("bar", "foo")
        if i == 0:
            old, new = "line 10000: some", "line 10000: foo"
        elif i % 2 == 1:
            old, new = "line 10000: foo", "line 10000: bar"
        else:
            old, new = "line 10000: bar", "line 10000: foo"
        sent = time.perf_counter()
        result = rpc.request(
            "workspace/executeCommand",
            {
                "command": "synapse.shell.run",
                "arguments": [{"command": f"edit big.txt '{old}' '{new}'"}],
            },
        )
        if result["isError"]:
            raise RuntimeError(result)
        if i > 0:  # the first one warms up the router
            times.append(applied_at[-1] - sent)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="cold starts of each server")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env["SYNAPSE_HOME"] = str(Path(tmp) / "home")
        print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

        bare, ours = cold_start(args.runs, env, root)
        mb, mo = statistics.median(bare), statistics.median(ours)
        print(
            f"cold start (spawn -> initialize result), median of {args.runs} alternating runs: "
            f"bare pygls {mb * 1000:.0f} ms, synapse {mo * 1000:.0f} ms, "
            f"ratio {mo / mb:.2f}x (target <= 1.3x)"
        )

        rpc = Rpc([sys.executable, "-m", "synapse_lsp"], env, root)
        initialize(rpc, root)
        rpc.notify("initialized", {})
        time.sleep(1.0)
        print(f"idle RSS after initialize: {rss_mb(rpc.proc.pid):.1f} MB (target <= 80 MB)")
        try:
            trips = shell_round_trips(rpc, args.iterations)
            median = statistics.median(trips) * 1000
            print(
                f"synapse.shell.run `true` round trip: median {median:.2f} ms,"
                f" p90 {statistics.quantiles(trips, n=10)[-1] * 1000:.2f} ms over "
                f"{len(trips)} runs (target <= 3 ms)"
            )
            edits = edit_to_apply(rpc, root, max(20, args.iterations // 4))
            print(
                "edit on an open 20,000-line document -> applyEdit received: median "
                f"{statistics.median(edits) * 1000:.2f} ms, p90 "
                f"{statistics.quantiles(edits, n=10)[-1] * 1000:.2f} ms over {len(edits)} edits "
                "(target <= 5 ms)"
            )
            print(f"RSS after the runs: {rss_mb(rpc.proc.pid):.1f} MB")
        finally:
            rpc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
