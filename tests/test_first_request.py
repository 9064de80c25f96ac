"""The first request goes out first (issue 34): no import, MCP server or shell on the
path of a user's first words. Real processes, the fake Messages API in this process.

- `synapse acp` imports the model SDK in the background from its start, off the
  event loop's thread, before any prompt;
- an MCP server still hanging in its handshake delays neither `session/new` nor the
  first model request; a command line calling it (inside a bash expansion too) waits
  for it, then works;
- `chat -p` sends its first request before its bash starts;
- closing an MCP manager signals a stdio server after a short grace instead of
  waiting (2 s) for it to exit on its own; `chat -p`'s exit and an ACP session's
  signal their servers while the session still closes (its SessionEnd hook), not
  after; a stopped server's input ends at once; which groups SIGTERM surely ends;
- `chat -p`'s client uses the TLS context built beside the SDK's import, which
  trusts what the SDK's own would (`SSL_CERT_FILE`) and refuses a certificate it
  does not trust at once (not retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.schema import McpServerStdio, TextContentBlock

from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.config import Settings
from synapse_lsp.extensions.mcp_client import McpManager
from tests.fake_api import FAKE_KEY
from tests.test_acp_client import AcpTestClient, acp_agent, agent_env, finished

DEMO = Path(__file__).parent / "mcp_servers" / "demo_server.py"
ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process now."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            table[int(entry.name)] = (int(stat[stat.rindex(")") + 2 :].split()[1]), name)
    return table


def descendant_names(root: int) -> list[str]:
    table = _children(root)
    found, frontier = [], {root}
    while frontier:
        frontier = {p for p, (ppid, _) in table.items() if ppid in frontier}
        found += [table[p][1] for p in frontier]
    return found


class WatchingApi(FakeAnthropic):
    """The fake API, calling `on_first` when the first message request arrives."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script)
        self.on_first: Any = None
        self.seen = 0

    def _next(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.seen += 1
        if self.seen == 1 and self.on_first is not None:
            self.on_first()
        return super()._next(body)


PROBE = """
import sys, threading
from pathlib import Path
out = Path(sys.argv[1])
def hook(event, args):
    if event == "import" and args[0] == "anthropic" and not out.exists():
        out.write_text(threading.current_thread().name)
sys.addaudithook(hook)
from synapse_lsp.acp import server
server.main([])
"""


def test_acp_imports_the_model_sdk_from_its_start_off_the_loop(tmp_path: Path) -> None:
    """Only `initialize` is asked: the SDK is imported anyway, in another thread than
    the event loop's; end of input then ends the agent."""
    marker = tmp_path / "imported-by"
    env = dict(os.environ, SYNAPSE_HOME=str(tmp_path / "home"), ANTHROPIC_API_KEY=FAKE_KEY)
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(marker)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    try:
        for _ in range(6000):  # the import takes seconds on a loaded machine
            if marker.exists() and marker.read_text():
                break
            time.sleep(0.02)
        imported_by = marker.read_text()
    finally:
        proc.stdin.close()
        proc.wait(60)
    assert imported_by and imported_by != "MainThread"
    assert proc.returncode == 0


async def test_acp_first_request_does_not_wait_for_a_hanging_mcp_server(tmp_path: Path) -> None:
    """The client's server hangs in its handshake until a file exists; the file is made
    only once the model's first request arrived and its command (`$(mcp:slow:echo …)`,
    through the wrapper, which does not exist yet) started: the command waits for the
    server, then gets its answer."""
    proj = tmp_path / "proj"
    proj.mkdir()
    release = tmp_path / "release"
    api = WatchingApi(
        [
            {"commands": ["echo got $(mcp:slow:echo hi)"]},
            {"commands": ["mcp:slow:echo direct"]},
            {"text": "Done."},
        ]
    )
    await api.start()
    first_request_while_hanging: list[bool] = []
    api.on_first = lambda: first_request_while_hanging.append(not release.exists())
    slow = McpServerStdio(
        name="slow",
        command=sys.executable,
        args=[str(DEMO), "--name", "slow", "--wait-for", str(release)],
        env=[],
    )
    client = AcpTestClient()
    try:
        async with acp_agent(client, agent_env(tmp_path / "home", api.base_url)) as (
            conn,
            _proc,
            _init,
        ):
            sid = (await conn.new_session(cwd=str(proj), mcp_servers=[slow])).session_id

            async def release_when_the_command_runs() -> None:
                await client.wait_for(
                    lambda: any(u["sessionUpdate"] == "tool_call" for u in client.of(sid))
                )
                release.write_text("go")

            releasing = asyncio.ensure_future(release_when_the_command_runs())
            text = TextContentBlock(type="text", text="call the slow server")
            result = await conn.prompt(session_id=sid, prompt=[text])
            await releasing
    finally:
        await api.close()
    assert first_request_while_hanging == [True]
    assert result.stop_reason == "end_turn"
    outputs = [u["content"][0]["content"]["text"] for u in finished(client.of(sid))]
    assert outputs[0].strip() == "got hi", outputs
    assert outputs[1].strip() == "direct", outputs


async def chat_p(
    prompt: str, env: dict[str, str], cwd: Path, started: Callable[[int], None] | None = None
) -> tuple[int | None, str, str]:
    """`synapse chat -p PROMPT` run to its end (`started` gets its pid at once): its exit
    status, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "synapse_lsp.cli.entry", "chat", "-p", prompt,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, env=env, cwd=cwd,
    )  # fmt: skip
    if started is not None:
        started(proc.pid)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode, out.decode(), err.decode()


async def test_chat_p_sends_its_first_request_before_bash_starts(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    api = WatchingApi([{"commands": ["echo ran-it"]}, {"text": "Done."}])
    await api.start()
    processes: list[int] = []
    at_first_request: list[list[str]] = []
    api.on_first = lambda: at_first_request.append(descendant_names(processes[0]))
    env = dict(
        os.environ,
        SYNAPSE_HOME=str(home),
        ANTHROPIC_API_KEY=FAKE_KEY,
        ANTHROPIC_BASE_URL=api.base_url,
    )
    env.pop("SYNAPSE_SANDBOX", None)  # what a user gets: the kernel sandbox where it works
    try:
        code, out, err = await chat_p("run it", env, work, processes.append)
    finally:
        await api.close()
    assert code == 0, err
    assert out == "Done.\n"
    assert len(at_first_request) == 1
    assert not {"bash", "bwrap"} & set(at_first_request[0]), at_first_request
    [_, second] = api.message_requests
    results = [b for m in second["messages"] for b in m["content"] if isinstance(b, dict)]
    assert any("ran-it" in json.dumps(b) for b in results if b.get("type") == "tool_result")


def _watched_inodes(pid: int) -> set[int]:
    """The inodes the inotify instances of `pid` watch (from /proc/PID/fdinfo)."""
    found: set[int] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if str(fd.readlink()) != "anon_inode:inotify":
                continue
            for line in Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text().splitlines():
                if line.startswith("inotify wd:"):
                    found.add(int(line.split(" ino:")[1].split()[0], 16))
    return found


def _inotify_instances(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += str(fd.readlink()) == "anon_inode:inotify"
    return count


@pytest.mark.parametrize("mode", ["prompt", "stream-json"])
async def test_one_chat_p_turn_runs_without_the_extension_watcher(
    tmp_path: Path, mode: str
) -> None:
    """`chat -p "prompt"` is one turn: no extension watcher (as `synapse exec`), so its
    exit pays no inotify teardown: while the second request is answered (the tools have
    started by then) nothing is watched but the work folder (the hand-edit guard's
    watch of the model's wait, agent/hand_edits.py, which the turn's end closes).
    Turns read from `--input-format stream-json` keep it: one appears while the process
    waits for the next turn."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    api = WatchingApi([{"commands": ["true"]}, {"text": "Done."}])
    await api.start()
    pids: list[int] = []
    turn: list[int] = []  # the turn's requests (a title's have no tools)
    seen: list[int] = []
    real_next = api._next

    def counting(body: dict[str, Any] | None = None) -> dict[str, Any]:
        if body and body.get("tools"):
            turn.append(1)
            if len(turn) == 2:
                seen.append(len(_watched_inodes(pids[0]) - {work.stat().st_ino}))
        return real_next(body)

    api._next = counting  # type: ignore[method-assign]
    env = dict(os.environ, SYNAPSE_HOME=str(home), ANTHROPIC_API_KEY=FAKE_KEY)
    env["ANTHROPIC_BASE_URL"] = api.base_url
    args = ["-p", "run it"] if mode == "prompt" else ["-p", *STREAM_JSON]
    line = {"type": "user", "message": {"role": "user", "content": "run it"}}
    watching = False
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "synapse_lsp.cli.entry", "chat", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.PIPE, env=env, cwd=work,
        )  # fmt: skip
        pids.append(proc.pid)
        if mode == "stream-json":
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write((json.dumps(line) + "\n").encode())
            await proc.stdin.drain()
            while b'"type": "result"' not in (got := await proc.stdout.readline()):
                assert got, "the turn ended without its result"
            for _ in range(200):  # its watcher, while the next turn is awaited
                if watching := _inotify_instances(proc.pid) > 0:
                    break
                await asyncio.sleep(0.05)
            proc.stdin.close()
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        await api.close()
    assert proc.returncode == 0, err.decode()
    assert mode == "stream-json" or out.decode() == "Done.\n"
    assert seen == [0] if mode == "prompt" else watching, (seen, watching)


STREAM_JSON = ["--input-format", "stream-json", "--output-format", "stream-json"]


SLOW_TO_EXIT = textwrap.dedent(
    """
    import signal, sys, time
    sys.path.insert(0, {tests!r})
    from mcp_servers.demo_server import build
    marker = {marker!r}
    def on_term(signum, frame):
        open(marker, "w").write("sigterm")
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, on_term)
    build("lingering").run("stdio")
    time.sleep(1.0)  # slow to end after end of input
    open(marker, "w").write("ended on its own")
    """
)


async def test_closing_signals_a_server_after_a_short_grace(tmp_path: Path) -> None:
    marker = tmp_path / "how-it-ended"
    script = tmp_path / "lingering.py"
    script.write_text(SLOW_TO_EXIT.format(tests=str(ROOT / "tests"), marker=str(marker)))
    config = tmp_path / "mcp_servers.json"
    server = {"command": sys.executable, "args": [str(script)]}
    config.write_text(json.dumps({"mcpServers": {"lingering": server}}))
    manager = McpManager(Settings(synapse_home=tmp_path / "home"), None, config_files=[config])
    await manager.start()
    await manager.wait_all(60)
    assert manager.servers["lingering"].state == "ready", manager.servers["lingering"].error
    await manager.close()
    assert marker.read_text() == "sigterm"


def _started(argv: list[str]) -> subprocess.Popen[bytes]:
    """A process in its own group, once it runs its own code (a line on stdout)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline()
    return proc


def test_a_server_group_dies_of_sigterm_unless_one_of_it_catches_ignores_or_blocks_it() -> None:
    """What decides whether a closing server is waited for after its SIGTERM."""
    from synapse_lsp.extensions.mcp_stdio import dies_of_sigterm

    ready = "import sys, time; print(1, flush=True); "
    plain = [sys.executable, "-c", ready + "time.sleep(30)"]
    catches = [
        sys.executable,
        "-c",
        "import signal; "
        "signal.signal(signal.SIGTERM, lambda *a: None); " + ready + "time.sleep(30)",
    ]
    blocks = [
        sys.executable,
        "-c",
        "import signal; "
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}); " + ready + "time.sleep(30)",
    ]
    # a shell whose child (in its group) ignores SIGTERM; the shell itself does not
    child_ignores = ["sh", "-c", "(trap '' TERM; echo 1; exec sleep 30) & wait"]
    children_die = ["sh", "-c", "(echo 1; exec sleep 30) & wait"]  # fmt: skip
    procs = {name: _started(argv) for name, argv in [
        ("plain", plain), ("catches", catches), ("blocks", blocks),
        ("child ignores", child_ignores), ("children die", children_die),
    ]}  # fmt: skip
    try:
        stopped = _started(plain)
        os.killpg(stopped.pid, signal.SIGSTOP)
        time.sleep(0.1)
        procs["stopped"] = stopped
        found = {name: dies_of_sigterm(proc.pid) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert found == {
        "plain": True,
        "catches": False,
        "blocks": False,
        "child ignores": False,
        "children die": True,
        "stopped": False,
    }


EOF_LOGGER = textwrap.dedent(
    """
    import sys, time
    open({ready!r}, "w").close()
    sys.stdin.read()  # to the end of its input
    open({marker!r}, "w").write("end of input")
    time.sleep(30)  # then slow to end: only a signal ends it soon
    """
)


async def test_a_stopping_server_is_ended_before_its_session_closes(tmp_path: Path) -> None:
    """The owner's stop begins the server's end at once (its input closed, SIGTERM
    after the grace) while the session still closes, not only when the session's close
    comes to the transport: the server sees the end of its input inside."""
    from mcp import StdioServerParameters

    from synapse_lsp.extensions.mcp_stdio import stdio_transport

    marker, ready = tmp_path / "how-it-ended", tmp_path / "ready"
    script = tmp_path / "server.py"
    script.write_text(EOF_LOGGER.format(marker=str(marker), ready=str(ready)))
    params = StdioServerParameters(command=sys.executable, args=[str(script)])
    stopping = asyncio.Event()
    with (tmp_path / "stderr").open("w") as errlog:
        by = lambda: asyncio.get_running_loop().time() + 1.0  # noqa: E731 - SIGTERM 1 s on
        async with stdio_transport(params, errlog, by, stopping.wait):
            for _ in range(3000):  # it runs (a loaded machine: seconds)
                if ready.exists():
                    break
                await asyncio.sleep(0.01)
            assert ready.exists() and not marker.exists()
            stopping.set()
            for _ in range(3000):
                if marker.exists():
                    break
                await asyncio.sleep(0.01)
            ended_inside = marker.exists()
    assert ended_inside
    assert marker.read_text() == "end of input"


TIMES_ITS_SIGTERM = textwrap.dedent(
    """
    import signal, sys, time
    sys.path.insert(0, {tests!r})
    from mcp_servers.demo_server import build
    def on_term(signum, frame):
        open({marker!r}, "w").write(repr(time.time()))
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, on_term)
    build("timed").run("stdio")
    time.sleep(5.0)  # slow to end after end of input: only a signal ends it soon
    """
)


def _slow_session_end(tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
    """A home whose SessionEnd hook takes a second, and a server that writes when it got
    SIGTERM: (home, the SIGTERM's time file, the hook's end time file, the server's argv)."""
    home = tmp_path / "home"
    (home / "mcp").mkdir(parents=True)
    signalled, hook_ended = tmp_path / "signalled-at", tmp_path / "hook-ended-at"
    script = tmp_path / "timed.py"
    script.write_text(TIMES_ITS_SIGTERM.format(tests=str(ROOT / "tests"), marker=str(signalled)))
    record = f"{sys.executable} -c 'import time; print(time.time())' > {hook_ended}"
    end = [{"hooks": [{"type": "command", "command": f"cat >/dev/null; sleep 1; {record}"}]}]
    (home / "settings.json").write_text(json.dumps({"hooks": {"SessionEnd": end}}))
    return home, signalled, hook_ended, [sys.executable, str(script)]


async def test_a_chat_p_exit_ends_its_mcp_servers_beside_the_session_end(tmp_path: Path) -> None:
    """`chat -p`'s exit signals its MCP servers while the session still closes (its
    SessionEnd hook takes a second here), not after: an exit waits for the slower of
    the two, not for both in turn. The server ends; the hook runs to its end."""
    home, signalled, hook_ended, argv = _slow_session_end(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    entry = {"command": argv[0], "args": argv[1:]}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"timed": entry}}))
    api = FakeAnthropic([{"commands": ["mcp:timed:echo --text hi"]}, {"text": "Done."}])
    await api.start()
    env = dict(os.environ, SYNAPSE_HOME=str(home), ANTHROPIC_API_KEY=FAKE_KEY)
    env["ANTHROPIC_BASE_URL"] = api.base_url
    env.pop("SYNAPSE_SANDBOX", None)
    try:
        code, out, err = await chat_p("call it", env, work)
    finally:
        await api.close()
    assert code == 0, err
    assert out == "Done.\n"
    [_, second] = api.message_requests
    [result] = [b for b in second["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert not result.get("is_error") and "hi" in json.dumps(result["content"]), result
    assert float(signalled.read_text()) < float(hook_ended.read_text())


async def test_an_acp_exit_ends_its_mcp_servers_beside_the_session_end(tmp_path: Path) -> None:
    """The same over ACP: at end of input, a session's servers (the client's) get their
    SIGTERM while its SessionEnd hook still runs."""
    home, signalled, hook_ended, argv = _slow_session_end(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    timed = McpServerStdio(name="timed", command=argv[0], args=argv[1:], env=[])
    api = FakeAnthropic([{"commands": ["mcp:timed:echo --text hi"]}, {"text": "Done."}])
    await api.start()
    client = AcpTestClient()
    try:
        async with acp_agent(client, agent_env(home, api.base_url)) as (conn, proc, _init):
            sid = (await conn.new_session(cwd=str(proj), mcp_servers=[timed])).session_id
            text = TextContentBlock(type="text", text="call it")
            result = await conn.prompt(session_id=sid, prompt=[text])
    finally:
        await api.close()
    assert result.stop_reason == "end_turn"
    assert proc.returncode == 0
    assert [u["content"][0]["content"]["text"].strip() for u in finished(client.of(sid))] == ["hi"]
    assert float(signalled.read_text()) < float(hook_ended.read_text())


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "synapse test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class TlsApi(FakeAnthropic):
    """The fake Messages API over HTTPS."""

    def __init__(self, script: list[dict[str, Any]], cert: Path, key: Path) -> None:
        super().__init__(script)
        import ssl

        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(cert, key)

    async def start(self) -> FakeAnthropic:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def base_url(self) -> str:
        return f"https://{self.host}:{self.port}"


async def test_chat_p_verifies_tls_with_the_context_built_beside_the_sdk_import(
    tmp_path: Path,
) -> None:
    """`chat -p` builds its TLS context while the SDK imports (cli/preload.py) and its
    client uses that one: the system's trust as the SDK's own would be, `SSL_CERT_FILE`
    honoured, a certificate it does not trust refused (named, not retried)."""
    cert, key = _self_signed(tmp_path)
    probe = textwrap.dedent(
        """
        import time
        from synapse_lsp.cli import preload
        from synapse_lsp.agent.model import ModelClient
        preload.start_sdk_import()
        for _ in range(600):
            if preload._imported:
                break
            time.sleep(0.1)
        client = ModelClient(api_key="k", base_url="https://127.0.0.1:9", model="m")._sdk()
        built = preload.tls_context()
        assert built is not None
        assert client._client._transport._pool._ssl_context is built
        print("same context")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=90, cwd=ROOT
    )
    assert done.stdout.strip() == "same context", done.stderr
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    for trusted in (True, False):
        api = TlsApi([{"text": "Done over TLS."}], cert, key)
        await api.start()
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        env.update(SYNAPSE_HOME=str(home), ANTHROPIC_API_KEY=FAKE_KEY)
        env["ANTHROPIC_BASE_URL"] = api.base_url
        if trusted:
            env["SSL_CERT_FILE"] = str(cert)
        try:
            code, out, err = await chat_p("hello", env, work)
        finally:
            await api.close()
        if trusted:
            assert code == 0, err
            assert out == "Done over TLS.\n"
        else:
            assert code != 0
            assert "TLS certificate is not trusted (self-signed certificate" in err
            assert "not retried" in err and "Retrying" not in err
            assert api.message_requests == [], err
