"""The upstream's context window per model, for the doors that cap output to it (Anthropic's,
Gemini's) and the model listings that report it.

The configured window (`--context-window`) wins; else the one the upstream's `/v1/models`
names for the model (vLLM and SGLang: `max_model_len`; LM Studio, OpenRouter:
`context_length`). The listing is asked at most every `ttl` seconds, whatever names clients
send, and a listing that fails counts as empty until then.
"""

from __future__ import annotations

import time
from dataclasses import replace

from toolwire.errors import ToolwireError
from toolwire.upstream.base import Sampling, Upstream

LISTING_SECONDS = 300.0
_WINDOW_KEYS = ("max_model_len", "context_length", "context_window")


def listed_window(listed: list[dict[str, object]], model: str) -> int | None:
    """`model`'s window as the upstream's `/models` entries (`listed`) name it; an upstream
    listing one model speaks for any name. None when nothing says."""
    entry = next((m for m in listed if m.get("id") == model), None)
    if entry is None and len(listed) == 1:
        entry = listed[0]
    for key in _WINDOW_KEYS:
        value = (entry or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class UpstreamWindows:
    def __init__(
        self, upstream: Upstream, configured: int | None, ttl: float = LISTING_SECONDS
    ) -> None:
        self.upstream = upstream
        self.configured = configured
        self.ttl = ttl
        self._listing: tuple[float, list[dict[str, object]]] | None = None

    async def listing(self) -> list[dict[str, object]]:
        """The upstream's `/models` entries, as it sent them (cached for `ttl` seconds)."""
        if self._listing is None or time.monotonic() - self._listing[0] > self.ttl:
            try:
                listed = await self.upstream.list_models()
            except ToolwireError:
                listed = []
            self._listing = (time.monotonic(), listed)
        return self._listing[1]

    async def window(self, model: str) -> int | None:
        """`model`'s window in tokens: the configured one, else the listing's."""
        if self.configured is not None:
            return self.configured
        return listed_window(await self.listing(), model)


def capped(sampling: Sampling, room: int) -> Sampling:
    """`sampling` with its most output within `room`, the tokens the window leaves after the
    prompt (an unset maximum stays unset: the upstream then stops at its window itself)."""
    most = sampling.max_output_tokens
    return (
        replace(sampling, max_output_tokens=room) if most is not None and most > room else sampling
    )
