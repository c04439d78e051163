"""A prepared request's loop settings: the server's own when the request changes none of them
(no copy per request), a copy when it sets `max_tool_calls`."""

from __future__ import annotations

from toolwire.server.main import compose
from toolwire.server.responses.service import ResponsesService
from toolwire.store.database import Store
from toolwire.testing import ScriptedUpstream


async def test_settings_are_shared_unless_the_request_sets_max_tool_calls(
    fake_upstream: ScriptedUpstream, database_url: str
) -> None:
    store = await Store.open(database_url)
    adapter = fake_upstream.adapter(max_retries=0)
    try:
        runtime = await compose(upstream=adapter, store=store)
        service = ResponsesService(runtime)
        shared = runtime.loop_settings
        plain = await service.prepare({"model": "m", "input": "hi"})
        assert plain.loop_request.settings is shared
        limited = await service.prepare({"model": "m", "input": "hi", "max_tool_calls": 2})
        assert limited.loop_request.settings is not shared
        assert limited.loop_request.settings.max_tool_calls == 2
        assert shared.max_tool_calls is None
        assert limited.loop_request.settings.max_iterations == shared.max_iterations
    finally:
        await adapter.aclose()
        await store.close()
