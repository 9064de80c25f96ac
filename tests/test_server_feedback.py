"""Editor feedback over LSP (issue 20 part 3): after the agent's edit the client reports the
file's settled diagnostics (`synapse/diagnostics`), and the user types into a file the agent
edited; the model is told once, in the next tool result or the next prompt. The real server
over stdio, the fake Messages API, the test editor of tests/lsp_client.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from synapse_lsp.agent.scripted_api import FakeAnthropic
from tests.lsp_client import Editor, editor
from tests.test_server_chat import fake_env, new_session, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

NOTE = "New problems after your edit"
BROKEN = '{"a": 1 "b": 2}'


def error_at(line: int, message: str) -> dict[str, Any]:
    return {
        "range": {"start": {"line": line, "character": 8}, "end": {"line": line, "character": 11}},
        "severity": 1,
        "message": message,
        "source": "json",
        "code": 514,
    }


def texts(request: dict[str, Any]) -> list[str]:
    """Every text the model was sent in one request (text blocks and tool results)."""
    out: list[str] = []
    for message in request["messages"]:
        content = message["content"]
        for block in [content] if isinstance(content, str) else content:
            if isinstance(block, str):
                out.append(block)
            elif block.get("type") == "text":
                out.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return out


def last_user_texts(request: dict[str, Any]) -> list[str]:
    return texts({"messages": [request["messages"][-1]]})


async def settled(ed: Editor) -> None:
    """Messages are handled in order: once a command answers, earlier notifications ran."""
    await ed.command("synapse.status")


def report(ed: Editor, params: dict[str, Any]) -> None:
    ed.client.protocol.notify("synapse/diagnostics", params)


@pytest_asyncio.fixture(loop_scope="module")
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Editor, FakeAnthropic, Path]]:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("x = 1\n")
    async with (
        FakeAnthropic([]) as api,
        editor(tmp_path / "home", [proj], env=fake_env(api)) as ed,
    ):
        yield ed, api, proj


async def test_diagnostics_notification_turns_into_a_model_visible_note(
    setup: tuple[Editor, FakeAnthropic, Path],
) -> None:
    ed, api, proj = setup
    target = proj / "data.json"
    api.add({"commands": [f"write data.json '{BROKEN}'"]}, {"text": "Wrote data.json."})
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "write the data"})
    assert ed.docs[target.as_uri()].text == BROKEN  # the edit landed in the editor
    # The editor's JSON language feature reports a syntax error once things settle; a
    # warning the file had before the edit (`before`) and an information are not news.
    old_warning = {**error_at(0, "Trailing comma"), "severity": 2}
    report(
        ed,
        {
            "sessionId": sid,
            "uri": target.as_uri(),
            "version": ed.docs[target.as_uri()].version,
            "diagnostics": [
                error_at(0, "Expected comma"),
                old_warning,
                {**error_at(0, "Just so you know"), "severity": 3},
            ],
            "before": [old_warning],
        },
    )
    await settled(ed)
    api.add({"commands": ["echo checked"]}, {"text": "Fixed."})
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "all good?"})
    first, second = api.message_requests[-2:]
    note = next(t for t in last_user_texts(first) if NOTE in t)
    assert "- data.json:1: error: Expected comma [json 514]" in note
    assert "Trailing comma" not in note and "Just so you know" not in note
    # It precedes the user's text, and the model is told once: the later request holds it
    # only in the history (one block), its own new content has no note.
    assert last_user_texts(first)[-1] == "all good?"
    assert sum(NOTE in t for t in texts(second)) == 1
    assert not any(NOTE in t for t in last_user_texts(second))


async def test_a_note_rides_on_the_next_tool_result_of_the_same_turn(
    setup: tuple[Editor, FakeAnthropic, Path],
) -> None:
    ed, api, proj = setup
    target = proj / "more.json"
    gate = proj / "go"
    api.add(
        {"commands": [f"write more.json '{BROKEN}'"]},
        {"commands": ["while [ ! -e go ]; do sleep 0.05; done; echo waited"]},
        {"text": "Done."},
    )
    sid = await new_session(ed, proj)
    prompt = ed.command("synapse.session.prompt", {"sessionId": sid, "text": "write more"})
    task = asyncio.ensure_future(prompt)

    def waiting() -> bool:
        calls = [u for u in ed.session_updates(sid) if u["sessionUpdate"] == "tool_call"]
        return len(calls) == 2

    await wait_for(waiting)
    report(ed, {"uri": target.as_uri(), "diagnostics": [error_at(0, "Expected comma")]})
    await settled(ed)
    gate.write_text("")
    result = await task
    assert result["stopReason"] == "end_turn"
    last = api.message_requests[-1]
    results = last["messages"][-1]["content"]
    # The tool result first (the API wants them first), then the note, in one message.
    assert [b["type"] for b in results] == ["tool_result", "text"]
    assert "waited" in results[0]["content"]
    assert "- more.json:1: error: Expected comma [json 514]" in results[1]["text"]


async def test_the_users_own_change_of_a_touched_file_is_noted(
    setup: tuple[Editor, FakeAnthropic, Path],
) -> None:
    ed, api, proj = setup
    uri = ed.open(proj / "a.py")
    api.add({"commands": ["edit a.py 'x = 1' 'x = 2'"]}, {"text": "Set x to 2."})
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "x = 2 please"})
    assert ed.docs[uri].text == "x = 2\n"
    ed.type_text(uri, "y = 3\n")  # the user, between turns, unsaved
    await settled(ed)
    api.add({"text": "I see your y."})
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "and now?"})
    note = next(t for t in last_user_texts(api.message_requests[-1]) if "user changed" in t)
    assert "The user changed a.py since your last edit of it" in note
    assert "+y = 3" in note and NOTE not in note


async def test_malformed_or_unknown_reports_are_ignored_and_the_server_lives_on(
    setup: tuple[Editor, FakeAnthropic, Path],
) -> None:
    ed, api, proj = setup
    target = proj / "c.json"
    api.add({"commands": [f"write c.json '{BROKEN}'"]}, {"text": "ok"})
    sid = await new_session(ed, proj)
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "write c"})
    report(ed, {"uri": 5, "diagnostics": "no"})
    report(ed, {"uri": target.as_uri(), "diagnostics": [{"message": "no range"}]})
    report(ed, {"sessionId": "nope", "uri": target.as_uri(), "diagnostics": []})
    # A file the agent did not touch is not the agent's business.
    report(ed, {"uri": (proj / "a.py").as_uri(), "diagnostics": [error_at(0, "Untouched")]})
    await settled(ed)
    api.add({"text": "fine"})
    await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "again"})
    assert not any(NOTE in t for t in texts(api.message_requests[-1]))


async def test_the_setting_off_means_no_note(tmp_path: Path) -> None:
    proj = tmp_path / "off"
    proj.mkdir()
    async with (
        FakeAnthropic([]) as api,
        editor(
            tmp_path / "home",
            [proj],
            env=fake_env(api),
            init_options={"editorFeedback": False},
        ) as ed,
    ):
        target = proj / "d.json"
        (proj / "a.py").write_text("x = 1\n")
        uri = ed.open(proj / "a.py")
        api.add(
            {"commands": [f"write d.json '{BROKEN}' && edit a.py 'x = 1' 'x = 2'"]},
            {"text": "ok"},
        )
        sid = await new_session(ed, proj)
        await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "write d"})
        assert ed.docs[uri].text == "x = 2\n"
        report(ed, {"uri": target.as_uri(), "diagnostics": [error_at(0, "Expected comma")]})
        ed.type_text(uri, "y = 3\n")
        await settled(ed)
        api.add({"text": "fine"})
        await ed.command("synapse.session.prompt", {"sessionId": sid, "text": "again"})
        joined = "\n".join(texts(api.message_requests[-1]))
        assert NOTE not in joined and "user changed" not in joined
