"""`lsp/dispatch.py`: a received message goes where pygls' own `handle_message` sends
it (the same handling method, the same arguments), for every kind of message, without
pygls' runtime-Protocol checks."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol

from synapse_lsp.agent.scripted_api import FakeAnthropic
from synapse_lsp.lsp.dispatch import dispatch
from synapse_lsp.lsp.server import SynapseServer
from tests.lsp_client import editor

MESSAGES: dict[str, dict[str, Any]] = {
    "request": {
        "jsonrpc": "2.0", "id": 7, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///x.py"},
                   "position": {"line": 0, "character": 0}},
    },
    "notification": {
        "jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": "file:///x.py", "languageId": "python",
                                    "version": 1, "text": "x = 1\n"}},
    },
    "cancel": {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}},
    "request, null id": {"jsonrpc": "2.0", "id": None, "method": "shutdown"},
    "response": {"jsonrpc": "2.0", "id": "s-1", "result": {"applied": True}},
    "null result": {"jsonrpc": "2.0", "id": "s-2", "result": None},
    "error": {"jsonrpc": "2.0", "id": "s-3", "error": {"code": -32603, "message": "no"}},
}  # fmt: skip


def _recorded(route: Any, data: dict[str, Any], *, shutdown: bool = False) -> list[Any]:
    """What `route(protocol, message)` handed to the protocol's handling methods."""
    protocol = SynapseServer().protocol
    protocol._shutdown = shutdown
    calls: list[Any] = []
    for name in ("_handle_request", "_handle_notification", "_handle_response"):

        def record(*args: Any, name: str = name) -> None:
            calls.append((name, args))

        setattr(protocol, name, record)
    route(protocol, protocol.structure_message(data))
    return calls


def _ours(protocol: Any, message: Any) -> None:
    method = getattr(message, "method", "")
    dispatch(protocol, message, method, bool(method) and hasattr(message, "id"))


@pytest.mark.parametrize("kind", MESSAGES)
@pytest.mark.parametrize("shutdown", [False, True])
def test_each_message_goes_where_pygls_sends_it(kind: str, shutdown: bool) -> None:
    data = MESSAGES[kind]
    expected = _recorded(JsonRPCProtocol.handle_message, data, shutdown=shutdown)
    assert _recorded(_ours, data, shutdown=shutdown) == expected
    assert bool(expected) is not shutdown  # handled, unless the server is shutting down


def test_a_message_of_another_jsonrpc_version_is_dropped_as_pygls_drops_it() -> None:
    data = {**MESSAGES["request"], "jsonrpc": "1.0"}
    assert _recorded(JsonRPCProtocol.handle_message, data) == []
    assert _recorded(_ours, data) == []


COMMANDS_REFUSED: dict[str, dict[str, Any]] = {
    "unknown command": {"command": "synapse.nothing", "arguments": []},
    "two arguments": {"command": "synapse.shell.run", "arguments": [{}, {}]},
    "malformed argument": {"command": "synapse.shell.run", "arguments": [{"command": 42}]},
}


def _answers(route: Any, params: dict[str, Any]) -> list[Any]:
    """What the protocol sends when `route` handles an executeCommand with `params`."""
    server = SynapseServer()
    server.bind_handlers()
    protocol: Any = server.protocol
    sent: list[Any] = []
    protocol._send_data = sent.append
    data = {"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": params}
    route(protocol, protocol.structure_message(data))
    assert protocol._request_futures.get(3) is None  # answered: no request left open
    return [protocol._converter.unstructure(message) for message in sent]


@pytest.mark.parametrize("case", COMMANDS_REFUSED)
def test_a_command_refused_before_it_runs_is_answered_as_pygls_answers_it(case: str) -> None:
    """`workspace/executeCommand` runs by our own path (the answer leaves in the
    command's last step); a refusal in its first step gets pygls' very answer."""
    expected = _answers(JsonRPCProtocol.handle_message, COMMANDS_REFUSED[case])
    assert [m.get("error", {}).get("code") for m in expected] != [None]  # an error answer
    assert _answers(_ours, COMMANDS_REFUSED[case]) == expected


async def test_shutdown_while_a_command_runs_is_answered_and_the_server_exits(
    tmp_path: Path,
) -> None:
    """An editor closing mid-prompt (the model's answer still to come): `shutdown`
    cancels the open request, answers null, and `exit` ends the server with 0. pygls
    looped over the open requests while each cancel removed one from them: shutdown
    was answered with an internal error and the server never counted as shut down."""
    proj, home = tmp_path / "proj", tmp_path / "home"
    proj.mkdir()
    home.mkdir()
    async with FakeAnthropic([{"text": "too late", "delay": 60}]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-ant-fake", "ANTHROPIC_BASE_URL": api.base_url}
        async with editor(home, [proj], env=env) as ed:
            server = ed.client._server
            assert server is not None
            created = await ed.command("synapse.session.new", {})
            prompt = asyncio.ensure_future(
                ed.command(
                    "synapse.session.prompt", {"sessionId": created["sessionId"], "text": "hi"}
                )
            )
            for _ in range(1500):
                if api.calls or prompt.done():
                    break
                await asyncio.sleep(0.02)
            assert api.calls == 1 and not prompt.done()
            # answered null: an error answer raises here
            await asyncio.wait_for(ed.client.shutdown_async(None), 30)
            [answer] = await asyncio.wait_for(asyncio.gather(prompt, return_exceptions=True), 30)
            assert isinstance(answer, JsonRpcException | dict), answer  # answered either way
            ed.client.exit(None)
            assert await asyncio.wait_for(server.wait(), 30) == 0


def test_shutdown_answers_every_request_still_open_and_shuts_down() -> None:
    """Requests still open at `shutdown` (a command its user handler did not end) are
    each answered `cancelled` as they are cancelled, which removes them from the open
    requests: the loop over them must not fail half way (pygls' own raises "dictionary
    changed size during iteration" and never sets `_shutdown`)."""
    protocol: Any = SynapseServer().protocol
    answers: list[tuple[Any, Any]] = []
    protocol._send_response = lambda msg_id, result=None, error=None: answers.append(
        (msg_id, error)
    )
    for msg_id in ("a", "b", "c"):
        future: Future[Any] = Future()
        future.add_done_callback(partial(protocol._send_handler_result, msg_id=msg_id))
        protocol._request_futures[msg_id] = future
    protocol._ctx_msg_id.set("shutdown-id")
    steps = protocol.lsp_shutdown()
    handler, _, _ = next(steps)  # the server's own shutdown (dispose), not run here
    assert handler is protocol.fm.features[types.SHUTDOWN]
    with pytest.raises(StopIteration):
        steps.send(None)
    assert protocol._shutdown is True
    assert sorted(msg_id for msg_id, _ in answers) == ["a", "b", "c"]
    assert all(error is not None and "canceled" in error.message for _, error in answers)
    assert protocol._request_futures == {}
