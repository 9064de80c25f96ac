"""Helpers (no tests here): a test ACP client on the SDK's client side, driving a real
`synapse acp` over stdio.

`AcpTestClient` keeps every `session/update`, answers `session/request_permission`
from a script of option ids, and serves `fs/*` from in-memory editor buffers.
`acp_agent(...)` spawns `.venv/bin/synapse acp` and initializes it.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
    WriteTextFileResponse,
)

SYNAPSE = str(Path(sys.executable).parent / "synapse")
FAKE_KEY = "sk-ant-fake-acp-test"


class AcpTestClient:
    """What an editor would do, recorded."""

    def __init__(
        self, buffers: dict[str, str] | None = None, answers: list[str] | None = None
    ) -> None:
        self.buffers = buffers  # None: no fs capability
        self.answers: deque[str] = deque(answers or [])
        self.hold = False  # True: permission questions stay unanswered (a user away)
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.asked: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []
        self._changed = asyncio.Event()

    # -- the acp.Client methods the agent calls

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update.model_dump(by_alias=True, exclude_none=True)))
        self._changed.set()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.asked.append(
            (
                tool_call.model_dump(by_alias=True, exclude_none=True),
                [o.model_dump(by_alias=True, exclude_none=True) for o in options],
            )
        )
        self._changed.set()
        if self.hold:
            await asyncio.Event().wait()
        if not self.answers:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answers.popleft())
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        if self.buffers is None or path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        assert self.buffers is not None, "the agent wrote through a client without fs"
        self.buffers[path] = content
        self.writes.append((path, content))
        return WriteTextFileResponse()

    # -- helpers for tests

    def of(self, session_id: str) -> list[dict[str, Any]]:
        return [u for sid, u in self.updates if sid == session_id]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()


def caps(client: AcpTestClient) -> ClientCapabilities:
    has_fs = client.buffers is not None
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=has_fs, write_text_file=has_fs)
    )


@asynccontextmanager
async def acp_agent(
    client: AcpTestClient, env: dict[str, str]
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process, InitializeResponse]]:
    """`synapse acp` spawned with `env` (added to a minimal environment), initialized."""
    async with spawn_agent_process(
        client,  # type: ignore[arg-type]
        SYNAPSE,
        "acp",
        env=env,
        transport_kwargs={"stderr": None, "shutdown_timeout": 20.0},
    ) as (conn, proc):
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=caps(client),
            client_info=Implementation(name="synapse-tests", version="1"),
        )
        yield conn, proc, init


def agent_env(home: Path, base_url: str | None, **extra: str) -> dict[str, str]:
    env = {"SYNAPSE_HOME": str(home)}
    if base_url is not None:
        env.update(ANTHROPIC_API_KEY=FAKE_KEY, ANTHROPIC_BASE_URL=base_url)
    env.update(extra)
    return env


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    """Update kinds, consecutive duplicates and live output collapsed."""
    out: list[str] = []
    for u in updates:
        kind = str(u["sessionUpdate"])
        if kind == "tool_call_update":
            kind += ":" + str(u.get("status"))
            if kind == "tool_call_update:in_progress":
                continue
        if kind in ("available_commands_update", "usage_update"):
            continue
        if not out or out[-1] != kind:
            out.append(kind)
    return out


def texts(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def finished(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]
