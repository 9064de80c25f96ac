"""Extension layer figures (issue 4). Run: .venv/bin/python benchmarks/bench_extensions.py

1. `command:search` over 10,000 generated extension commands (target: median <= 5 ms).
2. Routing overhead of an in-process `mcp:` call over a direct SDK `call_tool` on the
   same session (target: median difference <= 1 ms), and the ratio.
3. Start-up: `registry.start()` return time, and time to the first usable command with
   N stdio servers.
4. Watcher latency: new script written -> found by `command:search` (target <= 300 ms).
5. Wrapper call from a plain shell (`sh -c 'mcp:bench:echo hi'`) through the running
   process's socket, against the in-process call; and the one-shot fallback.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synapse_lsp.commands import CommandContext
from synapse_lsp.config import Settings
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.extensions.search import CommandSearchCommand, IndexEntry, SearchIndex
from synapse_lsp.files import DiskFiles
from synapse_lsp.router import BashRouter
from synapse_lsp.shell import ShellSession

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp_servers" / "demo_server.py"
WORDS = [
    *("alpha", "beta", "gamma", "delta", "pdf", "git", "commit"),
    *("read", "write", "image", "search", "parse", "list", "sync"),
]


def ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:.3f} ms, "
        f"p90 {sorted(values)[int(len(values) * 0.9)] * 1000:.3f} ms (n={len(values)})"
    )


class _Source:
    def __init__(self, entries: list[IndexEntry]) -> None:
        self.index = SearchIndex(entries)

    def search_index(self) -> SearchIndex:
        return self.index

    def notes(self) -> list[str]:
        return []


async def bench_search(ctx: CommandContext) -> None:
    entries = []
    for i in range(10_000):
        kind = "mcp" if i % 2 else "skill"
        name = f"{kind}:srv{i % 97}:{WORDS[i % len(WORDS)]}_{i}"
        summary = f"{WORDS[(i * 7) % len(WORDS)]} the {WORDS[(i * 3) % len(WORDS)]} number {i}"
        entries.append(IndexEntry.of(name, summary))
    command = CommandSearchCommand(_Source(entries))
    for label, argv in [
        ("keyword 'pdf'", ["pdf"]),
        ("two keywords 'git commit'", ["git commit"]),
        ("regex 'mcp:srv1[0-9]:.*'", ["mcp:srv1[0-9]:.*"]),
        ("keyword + --type skill", ["image", "--type", "skill"]),
        ("no match", ["zzzz"]),
    ]:
        times = []
        for _ in range(60):
            t = time.perf_counter()
            out = await command.run(argv, ctx)
            times.append(time.perf_counter() - t)
        print(f"  command:search {label}: {ms(times)}; {out.data['total']} matches")


def write_config(home: Path, servers: dict[str, list[str]]) -> None:
    (home / "mcp").mkdir(parents=True, exist_ok=True)
    config = {
        "mcpServers": {
            name: {"command": sys.executable, "args": [str(SERVER), *extra]}
            for name, extra in servers.items()
        }
    }
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps(config))


async def bench_overhead(base: Path) -> None:
    home = base / "overhead"
    write_config(home, {"bench": []})
    settings = Settings(synapse_home=home)
    registry = ExtensionRegistry(settings, None, watch=False)
    await registry.start()
    await registry.wait_for_mcp(60)
    work = base / "work"
    work.mkdir(exist_ok=True)
    shell = ShellSession(work, settings)
    await shell.start()
    router = BashRouter(shell, settings, extensions=registry)
    client = registry.mcp.servers["bench"]._client
    assert client is not None
    try:
        direct, routed = [], []
        for _ in range(20):  # warm-up
            await client.call_tool("echo", {"text": "hi"})
            await router.route("mcp:bench:echo hi")
        for _ in range(200):
            t = time.perf_counter()
            await client.call_tool("echo", {"text": "hi"})
            direct.append(time.perf_counter() - t)
            t = time.perf_counter()
            result = await router.route("mcp:bench:echo hi")
            routed.append(time.perf_counter() - t)
            assert result.stdout == "hi\n"
        d, r = statistics.median(direct), statistics.median(routed)
        print(f"  direct SDK call_tool:      {ms(direct)}")
        print(f"  router.route('mcp:…'):     {ms(routed)}")
        print(
            f"  routing overhead: {(r - d) * 1000:.3f} ms (median difference), ratio {r / d:.2f}x"
        )

        wrapper, in_process = [], []
        assert registry.run_dir is not None  # its own wrappers, which name its socket
        env = {**os.environ, "PATH": f"{registry.run_dir.bin_dir}:{os.environ['PATH']}"}
        for _ in range(15):
            t = time.perf_counter()
            run = await asyncio.create_subprocess_exec(
                "sh", "-c", "mcp:bench:echo hi", env=env, stdout=subprocess.PIPE
            )
            out, _ = await run.communicate()
            wrapper.append(time.perf_counter() - t)
            assert out == b"hi\n", out
            t = time.perf_counter()
            await router.route("mcp:bench:echo hi")
            in_process.append(time.perf_counter() - t)
        print(f"  wrapper from sh via socket: {ms(wrapper)}")
        print(f"  in-process call (same run): {ms(in_process)}")
    finally:
        await shell.close()
        await registry.close()
    # No Synapse process any more: the wrapper connects one-shot.
    one_shot = []
    for _ in range(3):
        t = time.perf_counter()
        run = await asyncio.create_subprocess_exec(
            "sh", "-c", "mcp:bench:echo hi", env=env, stdout=subprocess.PIPE
        )
        out, _ = await run.communicate()
        one_shot.append(time.perf_counter() - t)
        assert out == b"hi\n", out
    print(f"  wrapper one-shot (no running Synapse): {ms(one_shot)}")


async def bench_startup(base: Path, count: int) -> None:
    home = base / f"startup-{count}"
    write_config(home, {f"s{i}": [] for i in range(count)})
    settings = Settings(synapse_home=home)
    ctx = CommandContext(cwd=base, settings=settings, files=DiskFiles(), env=dict(os.environ))
    registry = ExtensionRegistry(settings, None, watch=False, serve_socket=False)
    t = time.perf_counter()
    await registry.start()
    returned = time.perf_counter() - t
    first = registry.get(f"mcp:s{count - 1}:echo")
    assert first is not None
    out = await first.run([first.name, "hi"], ctx)
    usable = time.perf_counter() - t
    await registry.wait_for_mcp(120)
    every = time.perf_counter() - t
    await registry.close()
    assert out.stdout == "hi\n", out
    print(
        f"  {count} stdio server(s): start() returned in {returned * 1000:.1f} ms; first "
        f"command answered after {usable:.2f} s; all connected after {every:.2f} s"
    )


async def bench_watcher(base: Path) -> None:
    home = base / "watch"
    (home / "skills" / "w" / "scripts").mkdir(parents=True)
    settings = Settings(synapse_home=home)
    registry = ExtensionRegistry(settings, None, serve_socket=False)
    await registry.start()
    ctx = CommandContext(cwd=base, settings=settings, files=DiskFiles())
    search = CommandSearchCommand(registry)
    await asyncio.sleep(0.3)
    times = []
    try:
        for i in range(20):
            script = home / "skills" / "w" / "scripts" / f"tool{i}.sh"
            t = time.perf_counter()
            script.write_text(f"# Tool {i}.\necho {i}\n")
            while True:
                out = await search.run([f"tool{i}"], ctx)
                if f"skill:w:tool{i}" in out.data["matches"]:
                    break
                if time.perf_counter() - t > 10:
                    raise TimeoutError(f"tool{i} never appeared")
                await asyncio.sleep(0.002)
            times.append(time.perf_counter() - t)
    finally:
        await registry.close()
    print(f"  new script -> found by command:search: {ms(times)}")


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ext-") as tmp:
        base = Path(tmp)
        ctx = CommandContext(cwd=base, settings=Settings(synapse_home=base), files=DiskFiles())
        print("command:search over 10,000 extension commands")
        await bench_search(ctx)
        print("mcp: call latency (stdio demo server, tool echo)")
        await bench_overhead(base)
        print("start-up to first usable command")
        for count in (1, 4):
            await bench_startup(base, count)
        print("watcher latency")
        await bench_watcher(base)


if __name__ == "__main__":
    asyncio.run(main())
