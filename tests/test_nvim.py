"""The Neovim plugin against the real server, in real headless Neovim.

Each test starts `nvim --headless --clean -u nvim-client/tests/driver.lua` with
the plugin on 'runtimepath'; the plugin spawns `python -m synapse_lsp` through
Neovim's LSP client, the server talks to the scripted fake Anthropic API
(in-process, on loopback), and the driver writes what it saw (buffer lines,
disk text, transcript lines, permission asks) as JSON before `qa!`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from synapse_lsp.lsp.protocol import PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "nvim-client"
DRIVER = CLIENT / "tests" / "driver.lua"
# SYNAPSE_TEST_NVIM=/path/to/nvim runs the suite on another Neovim (e.g. 0.11)
NVIM = os.environ.get("SYNAPSE_TEST_NVIM") or shutil.which("nvim")
NVIM_TIMEOUT = 150
# how many Neovim + server pairs run at once (each server imports the SDKs on start)
PARALLEL = int(os.environ.get("SYNAPSE_TEST_NVIM_PARALLEL") or 2)

pytestmark = [
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install neovim)"),
    # the first test also runs every scenario (module fixture)
    pytest.mark.timeout(600),
]


@dataclass
class Scenario:
    """One headless Neovim run: its driver scenario, fake-model script and settings."""

    name: str
    script: Any = field(default_factory=list)
    permission: str | None = None
    open_file: str | None = "a.py"
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    model_requests: list[dict[str, Any]] = field(default_factory=list)
    workdir: Path = Path()


SCENARIOS = [
    Scenario("attach"),
    Scenario("run_edit"),
    Scenario(
        "chat",
        script=[
            {
                "text": "Streaming the answer in small pieces.",
                "commands": ["echo hello-from-tool"],
                "chunk_size": 3,
                "chunk_delay": 0.03,
            },
            {"text": "All done."},
        ],
    ),
    Scenario("cancel", script=[{"commands": ["sleep 30"]}, {"text": "should not be asked"}]),
    Scenario(
        "deny",
        script=[{"commands": ["touch created.txt"]}, {"text": "Understood."}],
        permission="ask-all-native",
    ),
    Scenario(
        "save",
        script=[
            {"commands": ["edit a.py 'foo = 2' 'foo = 3'"]},
            {"commands": ["grep -c 'foo = 3' a.py && echo disk-has-the-edit"]},
            {"text": "Checked."},
        ],
    ),
    Scenario(
        "save_user",
        script=[
            {"commands": ["edit a.py 'foo = 2' 'foo = 3'"]},
            {"commands": ["grep -c 'foo = 3' a.py; echo checked"]},
            {"text": "Checked."},
        ],
    ),
    Scenario("sessions", script=[{"text": "Remembered."}]),
    Scenario("ask", script=[{"text": "It sets foo."}]),
    Scenario(
        "diff",
        script=[
            {"commands": ["edit a.py 'foo' 'bar'"]},
            {"commands": ["write new.txt 'hi\n'"]},
            {"text": "Changed foo and added new.txt."},
        ],
    ),
    Scenario(
        "rewind",
        script=[
            {"commands": ["edit a.py 'foo' 'bar'", "echo made > made.txt && rm b.py"]},
            {"text": "Changed things."},
        ],
    ),
]


async def run_nvim(sc: Scenario, tmp: Path) -> None:
    """Run one driver scenario with the fake API serving its script; fill in sc.result."""
    from synapse_lsp.agent.scripted_api import FakeAnthropic

    assert NVIM is not None
    sc.workdir = tmp / "proj"
    sc.workdir.mkdir(parents=True)
    (sc.workdir / "a.py").write_text("x = 1\nfoo = 2\n")
    (sc.workdir / "b.py").write_text("old = 1\n")
    out = tmp / f"{sc.name}.json"
    async with FakeAnthropic(sc.script) as api:
        config = {
            "cmd": [sys.executable, "-m", "synapse_lsp"],
            "cmd_env": {
                "ANTHROPIC_BASE_URL": api.base_url,
                "ANTHROPIC_API_KEY": "test-key-not-real",
                "SYNAPSE_HOME": str(tmp / "synapse-home"),
            },
            "settings": {},
            "permission": sc.permission,
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "NVIM"))}
        env.update(
            {
                "SYN_CLIENT": str(CLIENT),
                "SYN_OUT": str(out),
                "SYN_SCENARIO": sc.name,
                "SYN_CONFIG": json.dumps(config),
                "HOME": str(tmp / "home"),
                "XDG_STATE_HOME": str(tmp / "state"),
            }
        )
        args = [NVIM, "--headless", "--clean", "-u", str(DRIVER)]
        if sc.open_file:
            args.append(sc.open_file)
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=sc.workdir,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # nvim, its server and their children: one group to clean up
        )
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=NVIM_TIMEOUT)
        except TimeoutError:
            sc.error = f"nvim did not finish scenario {sc.name!r} in {NVIM_TIMEOUT} s"
            return
        finally:
            await kill_group(proc)
        sc.model_requests = api.message_requests
    if not out.exists():
        sc.error = (
            f"no result from nvim (exit {proc.returncode})\n"
            f"stdout: {stdout.decode(errors='replace')[-2000:]}\n"
            f"stderr: {stderr.decode(errors='replace')[-2000:]}"
        )
        return
    sc.result = json.loads(out.read_text())
    if not sc.result.get("ok"):
        sc.error = f"{sc.result.get('error')}\n{sc.result.get('messages', '')}"


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    """End whatever nvim left behind (a server that did not exit with it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.2)
    if proc.returncode is None:
        await proc.wait()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scenario]:
    """All scenarios, each in its own Neovim + server + fake API, run a few at a time."""

    # SYNAPSE_TEST_NVIM_ONLY=rewind,diff runs only those (the others' tests skip)
    only = {n for n in os.environ.get("SYNAPSE_TEST_NVIM_ONLY", "").split(",") if n}
    chosen = [sc for sc in SCENARIOS if not only or sc.name in only]

    async def run_all() -> None:
        await asyncio.gather(*(run_nvim(sc, tmp_path_factory.mktemp(sc.name)) for sc in chosen))

    asyncio.run(run_all())
    return {sc.name: sc for sc in SCENARIOS}


def get(runs: dict[str, Scenario], name: str) -> Scenario:
    sc = runs[name]
    if not sc.result and sc.error is None:
        pytest.skip(f"scenario {name} not chosen by SYNAPSE_TEST_NVIM_ONLY")
    assert sc.error is None, sc.error
    # Neovim 0.10+ warns about deprecated APIs in :messages; the plugin uses none
    assert "deprecated" not in sc.result.get("messages", ""), sc.result["messages"]
    return sc


def summary_title(command: str) -> str:
    from synapse_lsp.summaries.titles import summarize

    return summarize(command).title


def test_setup_attaches_the_real_server(runs: dict[str, Scenario]) -> None:
    sc = get(runs, "attach")
    result = sc.result
    assert result["attached"] is True
    assert result["second_attached"] is True
    assert result["client_count"] == 1
    assert "synapse.session.prompt" in result["commands"]
    assert "synapse.shell.run" in result["commands"]
    # the plugin and the server speak the same protocol: no mismatch message
    assert result["protocol_version"] == PROTOCOL_VERSION
    assert "protocol" not in sc.result.get("messages", "")
    status = result["status"]["res"]
    assert status["apiKey"] is True
    assert [w["uri"] for w in status["workspaces"]] == [sc.workdir.as_uri()]
    # the statusline names the sandbox mode the server reports
    sandbox = status["sandbox"]
    assert sandbox["mode"] in ("read-only", "workspace-write", "full-access")
    expected = (
        sandbox["mode"]
        if sandbox["sandboxed"] or sandbox["mode"] == "full-access"
        else (sandbox["mode"] + ": NOT sandboxed")
    )
    assert result["statusline"] == f"synapse · {expected}"


def test_run_edit_changes_the_modified_buffer_not_the_disk(runs: dict[str, Scenario]) -> None:
    result = get(runs, "run_edit").result
    assert result["buffer"] == ["x = 10", "bar = 2"]
    assert result["modified"] is True
    assert result["disk"] == "x = 1\nfoo = 2\n"
    transcript = result["transcript"]
    assert transcript[0] == "#### Run: edit a.py 'foo' 'bar' [completed]"
    assert transcript[-1] == ""
    assert any("a.py" in line for line in transcript[1:-1]), transcript
    # files that were not loaded in Neovim are saved after the edit (write_unopened)
    assert result["b_disk"] == "new = 1\n"
    assert result["b_modified"] is False
    # saved by Neovim, so 'fixendofline' adds the final newline, as on any :write
    assert result["todo_disk"] == "ship it\n"
    headers = [line for line in result["transcript_all"] if line.startswith("#### ")]
    assert headers == [
        "#### Run: edit a.py 'foo' 'bar' [completed]",
        "#### Run: edit b.py 'old' 'new' [completed]",
        "#### Run: write notes/todo.md 'ship it' [completed]",
    ]


def test_chat_turn_streams_into_the_transcript(runs: dict[str, Scenario]) -> None:
    result = get(runs, "chat").result
    title = summary_title("echo hello-from-tool")
    assert result["transcript"] == [
        "### You",
        "list things",
        "",
        "### Synapse",
        "Streaming the answer in small pieces.",
        "",
        f"#### Tool: {title} [completed]",
        "    $ echo hello-from-tool",
        "    hello-from-tool",
        "",
        "All done.",
        "",
    ]
    # the answer arrived in pieces and was drawn more than once
    assert result["seen_partial"] is True
    assert result["flushes"] >= 2
    # the tool call's body is a fold under its header
    assert result["fold"]["level"] == 1


def test_cancel_stops_a_running_turn(runs: dict[str, Scenario]) -> None:
    sc = get(runs, "cancel")
    result = sc.result
    title = summary_title("sleep 30")
    assert result["stop_reason"] == "cancelled"
    transcript = result["transcript"]
    assert transcript[:3] == ["### You", "wait for it", ""]
    assert f"#### Tool: {title} [cancelled]" in transcript
    assert transcript[-2:] == ["*Turn ended: cancelled*", ""]
    # the model was not called again after the cancel, nor for the refused prompt
    assert result["second_send"] is False
    assert len(sc.model_requests) == 1
    assert "and another thing" not in "\n".join(transcript)


def test_deny_prevents_the_command(runs: dict[str, Scenario]) -> None:
    sc = get(runs, "deny")
    result = sc.result
    assert result["created"] is False
    assert not (sc.workdir / "created.txt").exists()
    assert len(result["asked"]) == 1
    ask = result["asked"][0]
    question = ask["params"]  # synapse/requestPermission: the question as data
    assert question["command"] == "touch created.txt"
    assert question["steps"] == ["touch created.txt"]
    assert "touch created.txt" in question["message"]
    assert [(o["title"], o["kind"]) for o in question["options"]] == [
        ("Allow once", "allow_once"),
        ("Allow for this session", "allow_always"),
        ("Always allow `touch` here", "allow_always"),
        ("Deny", "reject_once"),
    ]
    title = summary_title("touch created.txt")
    # Matched by id: the card of the tool call the question names waited for the answer.
    assert ask["card_id"] == question["toolCallId"] == result["tool_id"]
    assert ask["header"] == f"#### Tool: {title} [waiting for your answer]"
    transcript = result["transcript"]
    header = transcript.index(f"#### Tool: {title} [Denied]")  # not "failed, exit 126"
    assert transcript[header + 1] == "    $ touch created.txt"
    body = transcript[header + 1 : transcript.index("", header)]
    assert "    Not run: denied by the user" in body, body
    assert transcript[-2:] == ["Understood.", ""]


def test_sessions_lists_and_replays_a_stored_session(runs: dict[str, Scenario]) -> None:
    result = get(runs, "sessions").result
    assert result["original"] == ["### You", "remember this", "", "### Synapse", "Remembered.", ""]
    assert result["new_is_other"] is True
    assert result["new_transcript"] == [""]
    assert result["first_session"] in [item["id"] for item in result["listed"]]
    assert result["replayed"] == result["original"]
    assert result["shown"] is True


def test_ask_sends_the_selection_as_context(runs: dict[str, Scenario]) -> None:
    sc = get(runs, "ask")
    assert sc.result["transcript"] == [
        "### You",
        "what does this do?",
        "",
        "### Synapse",
        "It sets foo.",
        "",
    ]
    sent = json.dumps(sc.model_requests[0])
    assert "foo = 2" in sent
    assert "a.py" in sent


def test_synapse_diff_opens_the_old_text_and_the_file_in_diff_mode(
    runs: dict[str, Scenario],
) -> None:
    sc = get(runs, "diff")
    result = sc.result
    transcript = result["transcript"]
    edit_title = summary_title("edit a.py 'foo' 'bar'")
    # the edit card's header has its counts; the turn ends with the files it changed
    assert f"#### Tool: {edit_title} [completed] +1 \u22121" in transcript
    assert transcript[-4:] == [
        "Changed foo and added new.txt.",
        "",
        "Changed files: a.py +1 \u22121, new.txt +1",
        "",
    ]
    assert result["disk"] == "x = 1\nfoo = 2\n"  # the edit went to the buffer
    assert result["bad_id_new_tabs"] == 0
    assert "no-such-call" in result["messages"]
    # no id: the last call that changed a file, new.txt, created: nothing on the left
    assert result["new_tabs"] == 1
    before, after = result["last_diff"]
    assert before["diff"] is True and after["diff"] is True
    assert before["lines"] == [""] and before["name"].endswith("new.txt (new file)")
    assert before["buftype"] == "nofile" and before["modifiable"] is False
    assert after["is_file_buf"] is True and after["lines"][0] == "hi"
    assert result["new_disk"].startswith("hi\n")
    # by id: a.py, the text before the call vs the buffer as it is now
    before, after = result["first_diff"]
    assert before["diff"] is True and after["diff"] is True
    assert before["lines"] == ["x = 1", "foo = 2"]
    assert before["name"].endswith("a.py (before)")
    assert after["is_file_buf"] is True and after["current"] is True
    assert after["lines"] == ["x = 1", "bar = 2"]
    # :SynapseDiff completes the calls that changed files, newest first
    assert result["completion"] == list(reversed(result["diff_ids"]))


def test_synapse_rewind_puts_the_buffer_and_the_disk_back(runs: dict[str, Scenario]) -> None:
    sc = get(runs, "rewind")
    result = sc.result
    # The turn: the edit went to the open buffer, the shell made and removed files.
    assert result["after_turn"]["buffer"] == ["x = 1", "bar = 2"]
    assert result["after_turn"]["made"] == "made\n" and result["after_turn"]["b"] is None
    # :SynapseRewind 1: the buffer has its old text again (an edit, not a reload),
    # the created file is gone and the removed one is back; the disk copy of a.py was
    # never written by the turn.
    assert result["buffer"] == ["x = 1", "foo = 2"]
    assert result["disk"] == "x = 1\nfoo = 2\n"
    assert result["b"] == "old = 1\n" and result["made"] is None
    assert "Rewound the files to before turn 1." in result["messages"]
    assert "usage: :SynapseRewind {turn}" in result["messages"]


def test_the_agents_edit_is_saved_before_its_next_command_reads_the_disk(
    runs: dict[str, Scenario],
) -> None:
    """Issue 29: the edit landed in the open buffer; before the `grep` (which reads the
    disk) the server asked Neovim to save it (synapse/saveDocuments)."""
    sc = get(runs, "save")
    assert sc.result["buffer"] == ["x = 1", "foo = 3"]
    assert sc.result["modified"] is False
    assert sc.result["disk"] == "x = 1\nfoo = 3\n"
    assert "disk-has-the-edit" in json.dumps(sc.model_requests)


def test_a_buffer_with_the_users_own_unsaved_edit_is_not_saved_unasked(
    runs: dict[str, Scenario],
) -> None:
    sc = get(runs, "save_user")
    assert sc.result["buffer"] == ["x = 10", "foo = 3"]
    assert sc.result["modified"] is True
    assert sc.result["disk"] == "x = 1\nfoo = 2\n"
    assert "the user's own unsaved edits" in json.dumps(sc.model_requests)
