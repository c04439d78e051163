"""Relaying a run's events to a consumer that pulls them (an SSE response, an async iterator).

The one pump every streaming door uses: the run goes in a task that pushes events into a queue;
the consumer iterates them in order. If the consumer stops early (a client disconnected), the run
is cancelled, so the driver records it as cancelled; if the run raises, the consumer sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _End(Generic[T]):
    __slots__ = ()


async def pump(run: Callable[[Callable[[T], None]], Awaitable[Any]]) -> AsyncGenerator[T, None]:
    """Yield what `run(emit)` emits, as it emits it, until `run` returns."""
    queue: asyncio.Queue[T | _End[T]] = asyncio.Queue()
    end: _End[T] = _End()

    async def produce() -> None:
        try:
            await run(queue.put_nowait)
        finally:
            queue.put_nowait(end)

    task = asyncio.create_task(produce())
    try:
        while True:
            item = await queue.get()
            if item is end:
                break
            yield item  # type: ignore[misc]
        await task  # re-raises what the run raised
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
