"""Retries of an upstream call that finally fails are part of the story: the /ui timeline keeps
them and the client's error counts them (issue 30)."""

from __future__ import annotations

import json

from tests.inprocess_gateway import app_gateway, sse_events
from toolwire.testing import Body, ScriptedUpstream


async def test_a_failed_call_keeps_its_retries_in_the_timeline(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(*[Body({"error": {"message": "busy"}}, status=503) for _ in range(2)])
    async with app_gateway(fake_upstream, max_retries=1) as gw:
        async with gw.http.stream(
            "POST", "/v1/responses", json={"model": "m", "input": "hi", "stream": True}
        ) as response:
            raw = b"".join([chunk async for chunk in response.aiter_bytes()])
        events = sse_events(raw)
        failed = events[-1]["response"]
        assert failed["status"] == "failed"
        assert "(after 2 attempts, 1 of them retries)" in failed["error"]["message"]
        entries = await gw.store.ui.timeline(failed["id"])
    retries = [entry for entry in entries if entry["type"] == "upstream_retry"]
    assert [(entry["cause"], entry["attempt"]) for entry in retries] == [("http_503", 1)], (
        json.dumps(entries)
    )
