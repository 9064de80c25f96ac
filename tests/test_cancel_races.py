"""A cancel that comes in the same instant as what a turn waits for (the snapshot before
the turn, the user's answer to a permission question) still cancels the turn: Python
3.11's `asyncio.wait_for` returned the result then and dropped the cancel, and the
cancelled turn went on to run its command. Each test ends the wait and cancels the
turn within a few loop steps of each other, at every offset."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from synapse_lsp.checkpoints import Checkpoints
from synapse_lsp.commands import Layer
from synapse_lsp.config import Settings
from synapse_lsp.policy.gate import ALLOW_ONCE, AskingGate
from synapse_lsp.question import Question

OFFSETS = range(4)  # loop steps between the end of the wait and the cancel


async def _cancel_lands(
    wait: Callable[[], Awaitable[object]], end: Callable[[], None], offset: int
) -> None:
    """A turn that waits, then runs a "command" (a long sleep): ended and cancelled
    `offset` loop steps apart, the turn must end cancelled, never reach the command."""
    ran: list[str] = []

    async def turn() -> None:
        await wait()
        ran.append("command")
        await asyncio.sleep(3600)

    task = asyncio.ensure_future(turn())
    for _ in range(5):  # let it reach its wait
        await asyncio.sleep(0)
    assert not task.done()
    end()
    for _ in range(offset):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.cancelled(), "the cancel was lost: the turn went on"
    if offset == 0:
        assert ran == [], "the command started after the cancel"


@pytest.mark.parametrize("offset", OFFSETS)
async def test_a_cancel_as_the_snapshot_ends_is_not_lost(tmp_path: Path, offset: int) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    keeper = Checkpoints(root, tmp_path / "home", "s1", tmp_path / "records")
    snapshot: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def pending() -> None:
        await snapshot

    keeper._pending = asyncio.ensure_future(pending())  # the snapshot before the turn
    await _cancel_lands(keeper.ready, lambda: snapshot.set_result(None), offset)
    assert keeper.disabled is None


@pytest.mark.parametrize("offset", OFFSETS)
async def test_a_cancel_as_the_user_answers_is_not_lost(tmp_path: Path, offset: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def ask(question: Question) -> str | None:
        return await answer

    settings = Settings(
        synapse_home=tmp_path / "home",
        sandbox="workspace-write",
        permission="ask-writes-outside-workspace",
    )
    gate = AskingGate(settings, ws, ask)

    async def wait() -> None:
        assert await gate.check("write ../outside.txt hi", Layer.AGENT, ws) is None

    await _cancel_lands(wait, lambda: answer.set_result(ALLOW_ONCE), offset)
