"""Giving the event loop back during long runs of CPU work on streamed input.

A fast upstream (or an in-process one) can hand the driver thousands of deltas without the
stream ever having to wait, so `async for` never suspends, and the hold-back's judging of
hostile text (1 MiB of unclosed `<tool_call>` or nested `{"name": `, tens of ms per delta) would
hold every other request, `/health` included, until the turn ends. `Slice.tick()` after each
delta yields once a slice of wall time has passed since the last yield: other tasks then wait
at most about one slice plus one delta's work.
"""

from __future__ import annotations

import asyncio
import time

#: Seconds of work between yields: small against a request's latency, large against the cost
#: of a yield (microseconds).
SLICE_SECONDS = 0.01


class Slice:
    __slots__ = ("_since", "_slice")

    def __init__(self, seconds: float = SLICE_SECONDS) -> None:
        self._slice = seconds
        self._since = time.perf_counter()

    async def tick(self) -> None:
        """Yield to the event loop if a slice has passed since the last yield."""
        if time.perf_counter() - self._since >= self._slice:
            await asyncio.sleep(0)
            self._since = time.perf_counter()

    async def give_way(self) -> None:
        """Yield now (before a large step of its own, such as judging a whole turn's text)."""
        await asyncio.sleep(0)
        self._since = time.perf_counter()
