"""MCP servers as Bash commands, with real servers (tests/mcp_servers/demo_server.py) over
stdio and streamable HTTP, through the real router and a real bash session.

One registry (and one event loop) is shared by the module: starting a Python MCP
server costs ~1-2 s of imports, so only the tests that must restart servers start
their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from synapse_lsp.cmdline import quote
from synapse_lsp.commands import FailureCategory, Layer
from synapse_lsp.config import Settings
from synapse_lsp.extensions import wrapper_files
from synapse_lsp.extensions.registry import ExtensionRegistry
from synapse_lsp.router import BashRouter
from tests.mcp_router import extension_router

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


def stdio_entry(*extra: str, **more: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), *extra], **more}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, proc: subprocess.Popen[bytes], deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("HTTP MCP server exited early")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} never opened")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and ") Z " in stat.read_text())


async def wait_until(predicate: Any, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port), "--name", "web"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, http_server: str) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcp")
    home, work = root / "home", root / "work"
    (home / "mcp").mkdir(parents=True)
    work.mkdir()
    # A stale wrapper of a server that no longer exists, and a user's own file.
    (home / "bin").mkdir()
    wrapper_files.install(home / "bin" / "mcp:gone:tool", f"#!/bin/sh\n{wrapper_files.MARKER}: x\n")
    (home / "bin" / "mcp:user:own").write_text("#!/bin/sh\necho mine\n")
    config = {
        "mcpServers": {
            "demo": stdio_entry(disabledTools=["secret"], timeout=1.5),
            "web": {"url": http_server, "headers": {"X-Test": "1"}},
            "off": stdio_entry(disabled=True),
            "missing": {"command": "no-such-mcp-server-xyz"},
            "typo": {"comand": "python"},
            "nocmd": {"args": ["x"]},
        }
    }
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps(config))
    (work / "mcp_servers.json").write_text('{"mcpServers": {"broken": ')  # invalid JSON
    return {"home": home, "work": work}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def registry(env: dict[str, Path]) -> AsyncIterator[ExtensionRegistry]:
    settings = Settings(synapse_home=env["home"], command_timeout=20.0)
    reg = ExtensionRegistry(settings, env["work"], watch=False)
    await reg.start()
    await reg.wait_for_mcp(60)
    try:
        yield reg
    finally:
        await reg.close()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def router(env: dict[str, Path], registry: ExtensionRegistry) -> AsyncIterator[BashRouter]:
    async with extension_router(registry, env["work"]) as r:
        yield r


# ---------------------------------------------------------------- arguments

ARGUMENT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("x 3", {"name": "x", "count": 3}),
    ("--name x --count 3", {"name": "x", "count": 3}),
    ("--count=3 --name=x", {"name": "x", "count": 3}),
    ("x 3 0.25", {"ratio": 0.25}),
    ("x 3 --ratio 2", {"ratio": 2}),
    ("x 3 --verbose", {"verbose": True}),
    ("x 3 --verbose --no-verbose", {"verbose": False}),
    ("x 3 --verbose=false", {"verbose": False}),
    ('x 3 --tags \'["a","b"]\'', {"tags": ["a", "b"]}),
    ("x 3 --tags a --tags b", {"tags": ["a", "b"]}),
    ("x 3 --options '{\"k\": [1, 2]}'", {"options": {"k": [1, 2]}}),
    ("x 3 --mode safe", {"mode": "safe"}),
    ("'two words' -5", {"name": "two words", "count": -5}),
    ("-- --dash 3", {"name": "--dash", "count": 3}),
    ('\'{"name": "j", "count": 7, "verbose": true}\'', {"name": "j", "verbose": True}),
]


@pytest.mark.parametrize(("args", "expected"), ARGUMENT_CASES)
async def test_arguments_map_to_the_input_schema(
    router: BashRouter, args: str, expected: dict[str, Any]
) -> None:
    result = await router.route(f"mcp:demo:configure {args}")
    assert result.exit_code == 0, result.text
    assert result.layer is Layer.EXTENSION
    structured = result.data["structured"]
    assert {k: structured[k] for k in expected} == expected
    # Structured content arrives pretty-printed.
    assert json.loads(result.stdout) == structured
    assert '\n  "name"' in result.stdout


ERROR_CASES: list[tuple[str, str]] = [
    ("x", "missing required argument <count>"),
    ("", "missing required arguments <name>, <count>"),
    ("x three", "<count>: expected an integer, got 'three'"),
    ("x 3 --ratio fast", "<ratio>: expected a number"),
    ("x 3 --mode turbo", "<mode> must be one of fast, safe"),
    ("x 3 --colour red", "unknown option --colour"),
    ("x 3 --tags '[1,'", "<tags>: expected a JSON array"),
    ("x 3 --options '[1]'", "<options>: expected a JSON object"),
    ("x 3 --ratio", "--ratio needs a value"),
    ("x 3 0.5 false '[]' '{}' fast extra", "unexpected argument 'extra'"),
    ("x 3 --verbose=maybe", "<verbose>: expected true or false"),
    ('\'{"name": "j"}\'', "missing required argument <count>"),
]


@pytest.mark.parametrize(("args", "message"), ERROR_CASES)
async def test_wrong_arguments_exit_non_zero_with_usage_and_help_hint(
    router: BashRouter, args: str, message: str
) -> None:
    result = await router.route(f"mcp:demo:configure {args}")
    assert result.exit_code == 2
    assert result.is_error
    assert result.category is FailureCategory.INVALID_USAGE
    assert message in result.stderr
    assert "Usage: mcp:demo:configure <name> <count> [--ratio X] [--verbose]" in result.stderr
    assert "Hint: Run `mcp:demo:configure --help`" in result.text


async def test_whole_json_input_with_a_wrongly_typed_field_is_refused(router: BashRouter) -> None:
    result = await router.route("""mcp:demo:add '{"a": "1", "b": 2}'""")
    assert result.exit_code == 2
    assert "'a' must be integer" in result.stderr


async def test_dash_h_prints_usage_and_the_one_line_description(router: BashRouter) -> None:
    result = await router.route("mcp:demo:configure -h")
    assert result.exit_code == 0
    assert result.stdout == (
        "Usage: mcp:demo:configure <name> <count> [--ratio X] [--verbose] [--tags JSON] "
        "[--options JSON] [--mode fast|safe]\n"
        "Echo every argument back as a structured result.\n"
    )


async def test_dash_dash_help_prints_the_full_page(router: BashRouter) -> None:
    page = (await router.route("mcp:demo:configure --help")).stdout
    assert page.startswith("mcp:demo:configure - Echo every argument back as a structured result.")
    for line in (
        "  <name> (or --name) (string, required): Name",
        "  <count> (or --count) (integer, required): Count",
        "  --ratio (number, optional, default 0.5): Ratio",
        "  --verbose (boolean, optional, default false): Verbose",
        "  --tags (array of string, optional): Tags",
        "  --options (object, optional): Options",
        '  --mode (string, optional, default "fast", one of fast, safe): Mode',
        "  Exercises string, integer, number, boolean, array, object and enum parameters.",
        "Examples:",
        "  mcp:demo:configure name-value 1",
        """  mcp:demo:configure '{"name": "name-value", "count": 1}'""",
    ):
        assert line in page.splitlines(), line


async def test_help_examples_run_as_printed(router: BashRouter) -> None:
    """The generated examples are quoted with `cmdline.quote`: each one runs as shown."""
    page = (await router.route("mcp:demo:configure --help")).stdout
    examples = page.split("Examples:\n", 1)[1].splitlines()
    assert len(examples) >= 2
    for line in examples:
        result = await router.route(line.strip())
        assert result.exit_code == 0, (line, result.text)


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("name-value_1.2/x:y@z,a=b+%", "name-value_1.2/x:y@z,a=b+%"),
        ("", "''"),
        ("two words", "'two words'"),
        ("it's", "'it'\\''s'"),
        ('{"name": "x"}', """'{"name": "x"}'"""),
        ("~", "'~'"),
        ("$HOME *.py `id` $(id) a;b|c&d<e>f", "'$HOME *.py `id` $(id) a;b|c&d<e>f'"),
        ("café", "'café'"),
        ("line\nbreak\\", "'line\nbreak\\'"),
    ],
)
async def test_cmdline_quote_is_one_word_for_bash(
    router: BashRouter, text: str, quoted: str
) -> None:
    assert quote(text) == quoted
    result = await router.route(f"printf '%s|' {quote(text)} {quote(text)}")
    assert result.stdout == f"{text}|{text}|"


# ------------------------------------------------------------------ results


async def test_text_result_is_printed(router: BashRouter) -> None:
    result = await router.route("mcp:demo:echo 'hello there'")
    assert (result.exit_code, result.stdout) == (0, "hello there\n")


async def test_image_and_binary_resource_are_summarised(router: BashRouter) -> None:
    image = await router.route("mcp:demo:picture")
    assert image.stdout == "[image: image/png, 70 bytes, attached]\n"  # and shown to the model
    assert [a["source"]["media_type"] for a in image.attachments] == ["image/png"]
    blob = await router.route("mcp:demo:document")
    assert blob.stdout == "[resource: file:///tmp/data.bin, application/octet-stream, 2048 bytes]\n"


async def test_is_error_result_exits_non_zero_with_the_message(router: BashRouter) -> None:
    result = await router.route("mcp:demo:fail 'disk is full'")
    assert result.exit_code == 1
    assert result.is_error
    assert "disk is full" in result.stderr
    assert result.category is FailureCategory.EXECUTION_ERROR


async def test_remote_streamable_http_server(router: BashRouter) -> None:
    result = await router.route("mcp:web:add 40 2")
    assert (result.exit_code, result.stdout) == (0, "42\n")


# ------------------------------------------------------- config and states


async def test_disabled_tool_and_server_give_clear_errors(router: BashRouter) -> None:
    tool = await router.route("mcp:demo:secret")
    assert tool.exit_code == 1
    assert "disabled" in tool.stderr and "disabledTools" in tool.stderr
    server = await router.route("mcp:off:echo hi")
    assert server.exit_code == 1
    assert "MCP server 'off' is disabled" in server.stderr
    listing = await router.route('command:search "" --limit 500')
    assert "mcp:demo:secret" not in listing.stdout
    assert "mcp:off:" not in listing.stdout


async def test_bad_config_entries_are_reported_and_the_rest_loads(
    registry: ExtensionRegistry, router: BashRouter, env: dict[str, Path]
) -> None:
    home_file = env["home"] / "mcp" / "mcp_servers.json"
    problems = registry.problems
    assert any(
        str(home_file) in p and "'typo'" in p and "unknown key(s) 'comand'" in p for p in problems
    )
    assert any(
        str(home_file) in p and "'nocmd'" in p and "missing 'command'" in p for p in problems
    )
    work_file = env["work"] / "mcp_servers.json"
    assert any(str(work_file) in p and "invalid JSON" in p for p in problems)
    missing = await router.route("mcp:missing:anything")
    assert missing.exit_code == 1
    assert "'missing'" in missing.stderr and "command not found: no-such-mcp-server-xyz" in (
        missing.stderr
    )
    assert (await router.route("mcp:demo:echo still-here")).stdout == "still-here\n"
    unknown = await router.route("mcp:demo:nope")
    assert unknown.exit_code == 127
    assert unknown.category is FailureCategory.NOT_FOUND


# ------------------------------------------------------- timeout and crash


async def test_per_call_timeout_keeps_the_server(router: BashRouter) -> None:
    before = (await router.route("mcp:demo:pid")).stdout
    slow = await router.route("mcp:demo:slow 30")
    assert slow.exit_code == 124
    assert slow.category is FailureCategory.TIMEOUT
    assert "timed out after 1.5 s" in slow.stderr
    assert (await router.route("mcp:demo:pid")).stdout == before


async def test_crashed_stdio_server_is_restarted_on_next_use(
    router: BashRouter, registry: ExtensionRegistry
) -> None:
    first = int((await router.route("mcp:demo:pid")).stdout)
    crash = await router.route("mcp:demo:crash")
    assert crash.exit_code == 1
    assert "disconnected" in crash.stderr and "restarted on the next call" in crash.stderr
    again = await router.route("mcp:demo:pid")
    assert again.exit_code == 0, again.text
    assert int(again.stdout) != first
    assert await wait_until(lambda: not pid_alive(first))
    assert (await router.route("mcp:demo:echo back")).stdout == "back\n"


async def test_a_server_that_exits_while_idle_is_restarted_before_the_next_call(
    router: BashRouter, registry: ExtensionRegistry
) -> None:
    server = registry.mcp.servers["demo"]
    first = int((await router.route("mcp:demo:pid")).stdout)
    os.kill(first, signal.SIGKILL)
    assert await wait_until(lambda: server.state == "broken")  # noticed with no call made
    assert server.error is not None and "exited" in server.error
    again = await router.route("mcp:demo:pid")
    assert again.exit_code == 0, again.text  # the call was not lost
    assert int(again.stdout) != first
    assert server.state == "ready"


# ------------------------------------------------------------- discovery


async def test_command_search_keyword_regex_type_and_ranking(router: BashRouter) -> None:
    keyword = await router.route("command:search ECHO")
    names = keyword.data["matches"]
    assert names[:2] == ["mcp:demo:echo", "mcp:web:echo"]
    # "integer" only matches descriptions: after the name matches, here the only ones.
    described = await router.route("command:search integers")
    assert described.data["matches"] == ["mcp:demo:add", "mcp:web:add"]
    regex = await router.route("tools search '^mcp:web:(echo|add)$'")
    assert regex.exit_code == 0
    assert regex.data["matches"] == ["mcp:web:add", "mcp:web:echo"]
    assert regex.stdout.splitlines()[0] == "mcp:web:add  Add two integers."
    typed = await router.route("command:search echo --type skill")
    assert typed.data["matches"] == []
    assert "No skill commands match 'echo'" in typed.stdout
    bad = await router.route("command:search x --type tool")
    assert bad.exit_code == 2


# --------------------------------------------------------------- wrappers


async def test_wrappers_installed_stale_removed_user_files_kept(env: dict[str, Path]) -> None:
    bin_dir = env["home"] / "bin"
    assert (bin_dir / "mcp:demo:echo").is_file()
    assert os.access(bin_dir / "mcp:demo:echo", os.X_OK)
    assert (bin_dir / "mcp:web:echo").is_file()
    assert not (bin_dir / "mcp:demo:secret").exists()
    assert not (bin_dir / "mcp:gone:tool").exists()
    assert (bin_dir / "mcp:user:own").read_text() == "#!/bin/sh\necho mine\n"
    assert not [p for p in bin_dir.iterdir() if p.name.startswith(".synapse-tmp-")]


async def test_wrapper_works_in_a_native_pipeline(
    router: BashRouter, registry: ExtensionRegistry
) -> None:
    assert registry.run_dir is not None
    found = await router.route("command -v mcp:demo:echo")
    assert found.stdout.strip() == str(registry.run_dir.bin_dir / "mcp:demo:echo")
    result = await router.route("echo ignored | mcp:demo:echo hi | tr a-z A-Z")
    assert result.layer is Layer.NATIVE
    assert (result.exit_code, result.stdout) == (0, "HI\n")
    in_process = await router.route("mcp:web:echo hi | tr a-z A-Z")
    assert in_process.stdout == "HI\n"
    helped = await router.route("mcp:demo:add -h | head -1")
    assert helped.stdout == "Usage: mcp:demo:add <a> <b>\n"
    failing = await router.route("true && mcp:demo:add 1 x; echo rc=$?")
    assert "rc=2" in failing.stdout


async def test_wrapper_without_a_running_synapse_connects_one_shot(env: dict[str, Path]) -> None:
    """A terminal with no Synapse process: the wrapper starts the server itself."""
    other_home = env["home"].parent / "lonely-home"
    other_home.mkdir()
    config = other_home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"solo": stdio_entry()}}))
    spec = wrapper_files.mcp_wrapper_spec("mcp:solo:add", "u", "h", other_home, config)
    path = other_home / "bin" / "mcp:solo:add"
    path.parent.mkdir()
    wrapper_files.install(path, wrapper_files.render(spec))
    proc = await asyncio.create_subprocess_exec(
        str(path), "2", "3", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert (proc.returncode, out) == (0, b"5\n"), err


# ------------------------------------------------ start-up and shutdown


async def test_slow_server_does_not_block_other_commands(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "mcp").mkdir(parents=True)
    gate = tmp_path / "gate"
    config = {"mcpServers": {"slow": stdio_entry("--wait-for", str(gate)), "fast": stdio_entry()}}
    (home / "mcp" / "mcp_servers.json").write_text(json.dumps(config))
    (home / "skills" / "s" / "scripts").mkdir(parents=True)
    (home / "skills" / "s" / "scripts" / "hi.sh").write_text("echo skill-ready\n")
    reg = ExtensionRegistry(Settings(synapse_home=home), None, watch=False, serve_socket=False)
    await reg.start()
    try:
        # start() returned with both servers still connecting; skills work at once.
        assert reg.mcp.servers["slow"].state == "connecting"
        ctx = _ctx(reg, tmp_path)
        skill = reg.get("skill:s:hi")
        assert skill is not None
        assert (await skill.run(["skill:s:hi"], ctx)).stdout == "skill-ready\n"
        pending = reg.get("mcp:slow:echo")
        assert pending is not None
        waiting = asyncio.create_task(pending.run(["mcp:slow:echo", "late"], ctx))
        fast = reg.get("mcp:fast:echo")
        assert fast is not None
        assert (await fast.run(["mcp:fast:echo", "quick"], ctx)).stdout == "quick\n"
        assert reg.mcp.servers["slow"].state == "connecting"
        assert not waiting.done()
        gate.touch()
        assert (await asyncio.wait_for(waiting, 60)).stdout == "late\n"
        pids = [
            int((await reg.mcp.servers[n].call("pid", {}, 10)).content[0].text)  # type: ignore[union-attr]
            for n in ("slow", "fast")
        ]
    finally:
        await reg.close()
    assert await wait_until(lambda: all(not pid_alive(pid) for pid in pids))


async def test_shutdown_leaves_no_child_process(
    registry: ExtensionRegistry, router: BashRouter
) -> None:
    pid = int((await router.route("mcp:demo:pid")).stdout)
    assert pid_alive(pid)
    await registry.mcp.servers["demo"].stop()
    assert await wait_until(lambda: not pid_alive(pid))
    # ...and the next call starts it again.
    registry.mcp.servers["demo"].start()
    again = await router.route("mcp:demo:pid")
    assert again.exit_code == 0 and int(again.stdout) != pid


def _ctx(reg: ExtensionRegistry, cwd: Path) -> Any:
    from synapse_lsp.commands import CommandContext
    from synapse_lsp.files import DiskFiles

    return CommandContext(cwd=cwd, settings=reg.settings, files=DiskFiles(), env=dict(os.environ))
