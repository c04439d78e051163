"""The Messages door learns the upstream's context window from its `/v1/models` (vLLM's
`max_model_len`, `context_length` elsewhere), asking at most once per interval."""

from __future__ import annotations

from typing import Any

from toolwire.loop.driver import LoopDriver
from toolwire.runtime import Runtime
from toolwire.server.messages.routes import MessagesDoor
from toolwire.server.messages.translate import MessagesSettings


class Listing:
    name = "listing"

    def __init__(self, models: list[dict[str, Any]]) -> None:
        self.models = models
        self.asked = 0

    async def list_models(self) -> list[dict[str, Any]]:
        self.asked += 1
        return self.models


def door(upstream: Any, window: int | None = None) -> MessagesDoor:
    runtime = Runtime(
        store=None,  # type: ignore[arg-type]
        upstream=upstream,
        driver=LoopDriver(upstream),
        signer=None,  # type: ignore[arg-type]
        compaction=None,  # type: ignore[arg-type]
        timelines=None,  # type: ignore[arg-type]
    )
    settings = MessagesSettings(context_window=window)
    return MessagesDoor(runtime, settings=settings, read_json=None)  # type: ignore[arg-type]


async def test_window_from_the_upstream_listing() -> None:
    upstream = Listing(
        [{"id": "qwen", "max_model_len": 32768}, {"id": "llama", "context_length": 8192}]
    )
    messages = door(upstream)
    assert await messages._window("qwen") == 32768
    assert await messages._window("llama") == 8192
    assert await messages._window("claude-anything") is None  # unknown, several listed
    assert upstream.asked == 1  # one listing, whatever names are asked for
    assert await door(Listing([{"id": "only", "max_model_len": 4096}]))._window("x") == 4096
    assert await door(upstream, window=1000)._window("qwen") == 1000  # configured wins
