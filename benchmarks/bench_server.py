"""Benchmarks for `synapse lsp` over real stdio (a minimal JSON-RPC client on pipes).

    .venv/bin/python benchmarks/bench_server.py [--runs 7] [--iterations 200]
        [--only cold|first-prompt|steady|shell|memory] [--compare DIR]

Synapse runs in the sandbox a user gets (`--sandbox default`: the `workspace-write`
mode, the kernel sandbox when bubblewrap works; `SYNAPSE_SANDBOX` from the caller's
environment is removed); `--sandbox full-access` measures the LSP and router path
alone. The bare pygls baselines run their bash unsandboxed either way.

Prints:
- cold start: process spawn -> `initialize` result, median of alternating runs,
  against a bare pygls server measured in the same run (target ratio <= 1.3x);
- `synapse.shell.run` of `true`, round trip median (target <= 3 ms);
- `synapse.shell.run` against a bare pygls server doing the equivalent work
  (`BARE_SHELL_SERVER`: one persistent bash started at `initialize`, on pipes, a
  sentinel line with the exit status after each command, `{stdout, stderr,
  exitCode}` back; `read F` answered in-process, numbered like `cat -n` and
  stopped at 100 KiB with the same continuation line, as Synapse's `read`
  built-in does; both stdouts are checked equal): `true`, and `read` of a
  2,000-line file (~75 chars/line), interleaved request by request, median
  round trips, ratios (targets: `true` <= 1.3x, `read` <= 1.2x) and response
  sizes in bytes (a result never carries one text twice); measured once both
  servers are idle (Synapse's warm-up thread has imported the model SDK: it
  would share the GIL with the requests);
  `--only shell` runs just this; `--compare DIR` adds Synapse from another
  checkout (a `git archive` of an earlier commit) to the same rotation;
- `edit` of an open 20,000-line document -> `workspace/applyEdit` received by the
  client, median (target <= 5 ms);
- idle RSS after `initialize` (target <= 80 MB);
- first prompt: spawn -> the first `agent_message_chunk` of a prompt sent right after
  `initialized` (session.new + prompt against the fake Anthropic API in a subprocess),
  with the background warm-up of the model SDK on (default) and off
  (`SYNAPSE_LSP_PREWARM=0`), alternating; and `shutdown` + `exit` sent right after
  `initialized` (while the warm-up runs) -> process gone.
- memory (`--only memory`): idle RSS right after `initialize`, then after the
  background warm-up and a first `synapse.shell.run` (the server, and its whole
  process tree), with the warm-up on and off (`SYNAPSE_LSP_PREWARM=0`).
"""

from __future__ import annotations

import argparse
import contextlib
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
BARE_SHELL_COMMAND = "bare.shell.run"
BARE_SHELL_SERVER = r"""
import asyncio
import os

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("bare-shell", "0")
SENTINEL = "__BARE_SENTINEL_5f2c__"
state = {}


@server.feature(types.INITIALIZE)
async def on_initialize(ls, params):
    state["bash"] = await asyncio.create_subprocess_exec(
        "bash", "--noprofile", "--norc",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )
    state["lock"] = asyncio.Lock()


async def until_sentinel(stream):
    chunks = []
    while True:
        line = (await stream.readline()).decode("utf-8", "replace")
        at = line.find(SENTINEL)
        if at >= 0:
            chunks.append(line[:at])
            return "".join(chunks), line[at + len(SENTINEL):].strip()
        if not line:
            return "".join(chunks), ""
        chunks.append(line)


async def run_in_bash(command):
    bash = state["bash"]
    script = (
        f"{command}\n__s=$?; printf '%s %d\\n' {SENTINEL} $__s; "
        f"printf '%s\\n' {SENTINEL} >&2\n"
    )
    async with state["lock"]:
        bash.stdin.write(script.encode())
        await bash.stdin.drain()
        (out, status), (err, _) = await asyncio.gather(
            until_sentinel(bash.stdout), until_sentinel(bash.stderr)
        )
    return {"stdout": out, "stderr": err, "exitCode": int(status) if status else 1}


def cat_n(path, name, limit=2000, max_bytes=100 * 1024):
    # As `read` pages: at most `limit` lines and about 100 KiB, then where to go on.
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out, size = [], 0
    for n, line in enumerate(lines[:limit], 1):
        text = f"{n:6d}\t{line}"
        size += len(text.encode()) + 1
        if size > max_bytes and out:
            out.append(f"[output stopped at {max_bytes // 1024} KiB; continue with: "
                       f"read {name} --offset {n - 1}]")
            break
        out.append(text)
    return "\n".join(out) + "\n"


@server.command("bare.shell.run")
async def shell_run(ls, *args):
    command = args[0]["command"]
    if command.startswith("read "):
        try:
            name = command[5:].strip()
            text = cat_n(os.path.join(os.getcwd(), name), name)
        except OSError as exc:
            return {"stdout": "", "stderr": f"read: {exc}\n", "exitCode": 1}
        return {"stdout": text, "stderr": "", "exitCode": 0}
    return await run_in_bash(command)


server.start_io()
"""
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

    def start_request(self, method: str, params: Any) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def request(self, method: str, params: Any) -> Any:
        my_id = self.start_request(method, params)
        while True:
            msg = self.next_message()
            if msg is not None and msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg.get("result")

    def next_message(self) -> dict[str, Any] | None:
        """The next response, or None after handling a server notification or request."""
        msg = self.recv()
        if "method" not in msg:
            return msg
        self.seen.append((time.perf_counter(), msg))
        if "id" in msg:
            handler = self.on_request.get(msg["method"])
            result = handler(msg["params"]) if handler else None
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        return None

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
    bare: list[float] = []
    ours: list[float] = []
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


def tree_rss_mb(pid: int) -> float:
    """RSS of `pid` and every descendant (the shells' supervisors, bash, bwrap)."""
    from synapse_lsp import proctree

    pids = {pid} | proctree.descendants(pid, proctree.scan())
    total = 0.0
    for p in pids:
        with contextlib.suppress(OSError):
            total += rss_mb(p)
    return total


def print_memory(env: dict[str, str], root: Path) -> None:
    """Idle memory as users meet it: right after `initialize`, then once the background
    warm-up (model SDK import) has run and a first `synapse.shell.run` started the
    folder's shell; the server alone and with its process tree; warm-up on and off."""
    for label, extra in (("warm-up on", {}), ("warm-up off", {"SYNAPSE_LSP_PREWARM": "0"})):
        rpc = Rpc([sys.executable, "-m", "synapse_lsp"], {**env, **extra}, root)
        try:
            initialize(rpc, root)
            before = rss_mb(rpc.proc.pid)
            rpc.notify("initialized", {})
            wait_idle(rpc.proc.pid)
            rpc.request(
                "workspace/executeCommand",
                {"command": "synapse.shell.run", "arguments": [{"command": "true"}]},
            )
            wait_idle(rpc.proc.pid)
            print(
                f"idle RSS ({label}): {before:.1f} MB after initialize; after the warm-up and "
                f"a first shell command {rss_mb(rpc.proc.pid):.1f} MB, process tree "
                f"{tree_rss_mb(rpc.proc.pid):.1f} MB"
            )
        finally:
            rpc.close()


def shell_round_trips(rpc: Rpc, iterations: int) -> list[float]:
    params = {"command": "synapse.shell.run", "arguments": [{"command": "true"}]}
    rpc.request("workspace/executeCommand", params)  # warm: starts the shell
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        rpc.request("workspace/executeCommand", params)
        times.append(time.perf_counter() - t)
    return times


def response_bytes(result: Any) -> int:
    """The size of a result as the server sends it (compact JSON, as pygls writes it)."""
    return len(json.dumps(result).encode())


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def wait_idle(pid: int, limit: float = 30.0) -> float:
    """Wait until the process has used no CPU for 0.3 s (the warm-up thread's imports
    done: they would share the GIL with the measured requests); returns the wait."""
    started = time.perf_counter()
    last, still = cpu_ticks(pid), 0
    while still < 3 and time.perf_counter() - started < limit:
        time.sleep(0.1)
        now = cpu_ticks(pid)
        still = still + 1 if now == last else 0
        last = now
    return time.perf_counter() - started


def shell_versus_bare(
    ours: Rpc, bare: Rpc, root: Path, iterations: int, before: Rpc | None = None
) -> dict[str, dict[str, Any]]:
    """`synapse.shell.run` against the bare server's equivalent, interleaved request by
    request: per case (`true`, `read` of a 2,000-line file) the round trips of each
    server and the size of one response. `before`: Synapse from another checkout
    (`--compare`), in the same rotation."""
    name = "read-bench.txt"
    filler = "the quick brown fox jumps over the lazy dog; some ordinary text"
    (root / name).write_text("".join(f"{i:05d} {filler} {i % 97:02d}\n" for i in range(2000)))
    cases = {"true": "true", "read": f"read {name}"}
    calls = {"synapse": (ours, "synapse.shell.run"), "bare": (bare, BARE_SHELL_COMMAND)}
    if before is not None:
        calls["before"] = (before, "synapse.shell.run")
    who_all = list(calls)
    found: dict[str, dict[str, Any]] = {
        case: {**{who: [] for who in who_all}, "bytes": {}} for case in cases
    }
    for i in range(iterations + 2):  # the first two warm up (the shell, the router)
        for case, command in cases.items():
            order = who_all[i % len(who_all) :] + who_all[: i % len(who_all)]
            for who in order:
                rpc, method = calls[who]
                params = {"command": method, "arguments": [{"command": command}]}
                t = time.perf_counter()
                result = rpc.request("workspace/executeCommand", params)
                elapsed = time.perf_counter() - t
                if result.get("exitCode") != 0:
                    raise RuntimeError(f"{who} {command!r} failed: {result}")
                if i >= 2:
                    found[case][who].append(elapsed)
                found[case]["bytes"][who] = response_bytes(result)
                found[case].setdefault("results", {})[who] = result
    ours_read, bare_read = (found["read"]["results"][w]["stdout"] for w in ("synapse", "bare"))
    if ours_read != bare_read:
        raise RuntimeError("the bare `read` does not return what Synapse's does")
    return found


def print_shell_versus_bare(found: dict[str, dict[str, Any]]) -> None:
    targets = {"true": 1.3, "read": 1.2}  # issue 34
    for case, label in (("true", "`true`"), ("read", "`read` of a 2,000-line file")):
        ours, bare = found[case]["synapse"], found[case]["bare"]
        mo, mb = statistics.median(ours), statistics.median(bare)
        size = found[case]["bytes"]
        text = found[case]["results"]["synapse"].get("text")
        print(
            f"synapse.shell.run {label} vs bare pygls + bash, median of {len(ours)} "
            f"interleaved round trips: bare {mb * 1000:.2f} ms, synapse {mo * 1000:.2f} ms, "
            f"ratio {mo / mb:.2f}x (target <= {targets[case]}x); response bytes: "
            f"bare {size['bare']}, synapse {size['synapse']} "
            f"(text {'null' if text is None else len(text)})"
        )
        if "before" in found[case]:
            mf = statistics.median(found[case]["before"])
            print(f"  before (--compare): {mf * 1000:.2f} ms, ratio {mf / mb:.2f}x")


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


def first_prompt(
    runs: int, env: dict[str, str], root: Path, base_url: str, think: float = 0.0
) -> dict[str, list[float]]:
    """Spawn -> first agent_message_chunk of a prompt sent right after `initialized`;
    with `think` > 0, the user waits that long first and the clock starts at the prompt
    (session.new + prompt) instead."""
    found: dict[str, list[float]] = {"warm-up on": [], "warm-up off": []}
    for i in range(runs * 2):
        name = "warm-up on" if i % 2 == 0 else "warm-up off"
        run_env = dict(env, ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=base_url)
        run_env["SYNAPSE_LSP_PREWARM"] = "1" if name == "warm-up on" else "0"
        started = time.perf_counter()
        rpc = Rpc([sys.executable, "-m", "synapse_lsp"], run_env, root)
        try:
            initialize(rpc, root)
            rpc.notify("initialized", {})
            if think > 0:
                time.sleep(think)
                started = time.perf_counter()
            sid = rpc.request("workspace/executeCommand", {"command": "synapse.session.new"})[
                "sessionId"
            ]
            prompt = {"sessionId": sid, "text": "hello"}
            my_id = rpc.start_request(
                "workspace/executeCommand",
                {"command": "synapse.session.prompt", "arguments": [prompt]},
            )
            first: float | None = None
            while True:
                msg = rpc.next_message()
                if msg is not None and msg.get("id") == my_id:
                    if "error" in msg or msg["result"]["stopReason"] != "end_turn":
                        raise RuntimeError(f"prompt failed: {msg}")
                    break
                if first is None and msg is None:
                    at, note = rpc.seen[-1]
                    update = note.get("params", {}).get("update", {})
                    if update.get("sessionUpdate") == "agent_message_chunk":
                        first = at
            assert first is not None, "no agent_message_chunk"
            found[name].append(first - started)
        finally:
            rpc.close()
    return found


def early_exit(runs: int, env: dict[str, str], root: Path) -> dict[str, list[float]]:
    """`shutdown` + `exit` right after `initialized` (warm-up running) -> process gone."""
    times: dict[str, list[float]] = {"warm-up on": [], "warm-up off": []}
    for i in range(runs * 2):
        name = "warm-up on" if i % 2 == 0 else "warm-up off"
        run_env = dict(env, SYNAPSE_LSP_PREWARM="1" if name == "warm-up on" else "0")
        rpc = Rpc([sys.executable, "-m", "synapse_lsp"], run_env, root)
        initialize(rpc, root)
        rpc.notify("initialized", {})
        started = time.perf_counter()
        rpc.request("shutdown", None)
        rpc.notify("exit", None)
        rpc.proc.wait(30)
        times[name].append(time.perf_counter() - started)
    return times


def fake_api(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    script = tmp / "script.json"
    script.write_text(json.dumps({"responses": ["Hello from the fake model."], "loop": True}))
    port_file = tmp / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "synapse_lsp.cli.entry", "fake-api", "--script", str(script)]
        + ["--port-file", str(port_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the fake API did not start")
        time.sleep(0.02)
    return proc, f"http://127.0.0.1:{port_file.read_text().strip()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="cold starts of each server")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument(
        "--think", type=float, default=5.0, help="seconds the user takes to type the prompt"
    )
    parser.add_argument(
        "--sandbox",
        choices=["default", "workspace-write", "full-access"],
        default="default",
        help="Synapse's sandbox mode (default: what a user gets)",
    )
    parser.add_argument(
        "--only",
        choices=["cold", "first-prompt", "steady", "shell", "memory"],
        help="run one group of figures",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="shell group: Synapse from this checkout too (e.g. a `git archive` of an "
        "earlier commit), in the same interleaved rotation",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env["SYNAPSE_HOME"] = str(Path(tmp) / "home")
        env.pop("SYNAPSE_SANDBOX", None)  # see the docstring
        if args.sandbox != "default":
            env["SYNAPSE_SANDBOX"] = args.sandbox
        print(f"sandbox: {args.sandbox}")
        print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

        if args.only in (None, "cold"):
            bare, ours = cold_start(args.runs, env, root)
            mb, mo = statistics.median(bare), statistics.median(ours)
            print(
                f"cold start (spawn -> initialize result), median of {args.runs} alternating "
                f"runs: bare pygls {mb * 1000:.0f} ms, synapse {mo * 1000:.0f} ms, "
                f"ratio {mo / mb:.2f}x (target <= 1.3x)"
            )
        if args.only in (None, "first-prompt"):
            api, base_url = fake_api(Path(tmp))
            try:
                firsts = first_prompt(args.runs, env, root, base_url)
                later = first_prompt(args.runs, env, root, base_url, think=args.think)
            finally:
                api.kill()
                api.wait()
            print(
                "first prompt (spawn -> first agent_message_chunk, prompt sent right after "
                f"initialized), median of {args.runs} alternating runs: "
                + ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in firsts.items())
            )
            print(
                f"first prompt typed {args.think:.0f} s after initialized (prompt sent -> first "
                f"agent_message_chunk), median of {args.runs} alternating runs: "
                + ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in later.items())
            )
            exits = early_exit(args.runs, env, root)
            print(
                "shutdown + exit sent right after initialized -> process gone, median (max): "
                + ", ".join(
                    f"{k} {statistics.median(v) * 1000:.0f} ms ({max(v) * 1000:.0f} ms)"
                    for k, v in exits.items()
                )
            )
        if args.only in (None, "shell"):
            here = str(Path(__file__).resolve().parent.parent)
            synapse_rpc = Rpc(
                [sys.executable, "-m", "synapse_lsp"], {**env, "PYTHONPATH": here}, root
            )
            bare_rpc = Rpc([sys.executable, "-c", BARE_SHELL_SERVER], env, root)
            servers = [synapse_rpc, bare_rpc]
            before_rpc = None
            if args.compare is not None:
                home = str(Path(tmp) / "home-before")
                before_env = {
                    **env,
                    "PYTHONPATH": str(args.compare.resolve()),
                    "SYNAPSE_HOME": home,
                }
                before_rpc = Rpc([sys.executable, "-m", "synapse_lsp"], before_env, root)
                servers.append(before_rpc)
            try:
                for server in servers:
                    initialize(server, root)
                    server.notify("initialized", {})
                for server in servers:
                    wait_idle(server.proc.pid)  # Synapse's warm-up imports the model SDK
                found = shell_versus_bare(
                    synapse_rpc, bare_rpc, root, args.iterations, before=before_rpc
                )
                print_shell_versus_bare(found)
            finally:
                for server in servers:
                    server.close()
        if args.only in (None, "memory"):
            print_memory(env, root)
        if args.only not in (None, "steady"):
            return 0

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
