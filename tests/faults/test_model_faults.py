"""Fault drill, the model API: a refused request is final, whatever its body says."""

from __future__ import annotations

from typing import Any

import pytest

from synapse_lsp.agent.fakeapi import FakeAnthropic
from synapse_lsp.agent.model import ModelClient, StreamRetry
from synapse_lsp.errors import ModelError


async def _call(api: FakeAnthropic) -> list[Any]:
    model = ModelClient(
        api_key="sk-ant-fault", base_url=api.base_url, model="m", max_attempts=5,
        retry_base_delay=0.001,
    )  # fmt: skip
    items: list[Any] = []
    try:
        async for item in model.stream(system="s", messages=[{"role": "user", "content": "hi"}]):
            items.append(item)
    finally:
        await model.close()
    return items


async def test_a_400_with_api_error_in_its_body_is_not_retried() -> None:
    refused = {"error": {"status": 400, "type": "api_error", "message": "bad request"}}
    async with FakeAnthropic([refused, "never reached"]) as api:
        with pytest.raises(ModelError, match="refused the request.*bad request"):
            await _call(api)
        assert len(api.message_requests) == 1


async def test_a_529_overloaded_is_still_retried() -> None:
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}
    async with FakeAnthropic([overloaded, "fine"]) as api:
        items = await _call(api)
        assert any(isinstance(i, StreamRetry) for i in items)
        assert len(api.message_requests) == 2
