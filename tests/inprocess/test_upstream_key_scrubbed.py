"""The upstream's key never reaches a client, a stored response or a timeline, however the
upstream quotes it in its errors (whole, truncated, masked)."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from tests.inprocess_gateway import app_gateway
from toolwire.testing import ScriptedUpstream
from toolwire.upstream.scrub import Scrubber

KEY = "sk-proj-Zx81Qa7TmL0pRw3YbN5cVd2E"
FORMS = [
    f"Incorrect API key provided: {KEY}.",
    f"Incorrect API key provided: {KEY[:8]}{'*' * 20}{KEY[-4:]}. You can find your key at",
    f"invalid api key '{KEY[:3]}...{KEY[-4:]}'",
    f"key {KEY[:5]}…{KEY[-2:]} has no quota",
    f"Traceback (most recent call last):\n  headers={{'Authorization': 'Bearer {KEY}'}}",
    f"the key {KEY[:16]} was revoked",
]
#: What a leak of each form would look like in output (the visible parts).
TELLS = [KEY, KEY[:16], f"{KEY[:8]}{'*' * 20}{KEY[-4:]}", f"{KEY[:3]}...{KEY[-4:]}",
         f"{KEY[:5]}…{KEY[-2:]}"]  # fmt: skip


def test_every_form_is_scrubbed() -> None:
    scrub = Scrubber([KEY])
    for form in FORMS:
        cleaned = scrub.text(form)
        assert not any(tell in cleaned for tell in TELLS), cleaned
        assert "<redacted>" in cleaned
    assert (
        scrub.text("a normal sk- error with sk and 1234") == "a normal sk- error with sk and 1234"
    )


@pytest.mark.parametrize("status", [400, 429, 500])
@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_errors_quoting_the_key_reach_nobody(
    tmp_path: Path, status: int, stream: bool
) -> None:
    answers = iter(FORMS * 4)

    def quoting(request: httpx.Request) -> httpx.Response:
        message = next(answers)
        return httpx.Response(status, json={"error": {"message": message, "type": "x"}})

    db = tmp_path / "t.db"
    seen: list[str] = []
    async with app_gateway(
        ScriptedUpstream(), db, upstream_transport=httpx.MockTransport(quoting), api_key=KEY
    ) as gateway:
        for _ in FORMS:
            answer = await gateway.http.post(
                "/v1/responses", json={"model": "m", "input": "hi", "stream": stream}
            )
            seen.append(answer.text)
            if stream:
                created = orjson.loads(answer.text.split("data: ", 2)[1].split("\n")[0])
                response_id = created["response"]["id"]
                stored = await gateway.http.get(f"/v1/responses/{response_id}")
                timeline = await gateway.http.get(f"/ui/api/responses/{response_id}")
                seen += [stored.text, timeline.text]
        await gateway.idle()
    assert any("the upstream" in text for text in seen)  # the errors did get relayed
    for text in seen:
        assert not any(tell in text for tell in TELLS), text
    everything = every_byte(tmp_path)  # the database, its -wal and -shm
    assert not any(tell.encode() in everything for tell in TELLS)


def every_byte(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in directory.iterdir())
