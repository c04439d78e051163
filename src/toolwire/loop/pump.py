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

from toolwire.loop.cooperative import Slice

T = TypeVar("T")


#: Events in one batch at most: a run that emitted thousands at once (a megabyte of
#: arguments in 4 KiB deltas) is handed over in parts, with a chance for the event loop to
#: run something else between them once a slice of time has gone by (`Slice`).
MAX_BATCH = 32


class _End(Generic[T]):
    __slots__ = ()


async def pump(run: Callable[[Callable[[T], None]], Awaitable[Any]]) -> AsyncGenerator[T, None]:
    """Yield what `run(emit)` emits, one by one, as it emits it, until `run` returns: the
    batches of `pump_batches` taken apart (one pump, two ways to consume it)."""
    async with contextlib.aclosing(pump_batches(run)) as batches:
        async for batch in batches:
            for item in batch:
                yield item


async def pump_batches(
    run: Callable[[Callable[[T], None]], Awaitable[Any]],
    idle: float | None = None,
) -> AsyncGenerator[list[T], None]:
    """As `pump`, but everything emitted by the time the consumer looks comes as one list.

    `idle`: after that many seconds without an event an empty batch comes, so a door can keep
    its connection alive (Anthropic's `ping`) while the model or a tool is slow; a timeout
    on the wait itself, no task per request beside the run's.

    Nothing waits for a batch to fill: the consumer takes what is there the moment it runs
    (the run emits a whole network read's worth of events between two awaits). An SSE door
    then writes one frame group per socket write instead of one per event: each write crosses
    the ASGI middlewares and the server's send (~10 µs per event at 500 events a stream). A
    batch holds at most `MAX_BATCH` events, and between batches the event loop gets a turn once
    a slice of time has passed (the consumer's work on a batch counts)."""
    queue: asyncio.Queue[T | _End[T]] = asyncio.Queue()
    end: _End[T] = _End()
    work = Slice()  # the consumer's handling of batches must not hold the event loop either

    async def produce() -> None:
        try:
            await run(queue.put_nowait)
        finally:
            queue.put_nowait(end)

    task = asyncio.create_task(produce())
    try:
        done = False
        while not done:
            batch: list[T] = []
            if idle is None:
                item = await queue.get()
            else:
                try:
                    async with asyncio.timeout(idle):
                        item = await queue.get()
                except TimeoutError:
                    yield batch  # empty: nothing happened for `idle` seconds
                    continue
            while True:
                if item is end:
                    done = True
                    break
                batch.append(item)  # type: ignore[arg-type]
                if queue.empty() or len(batch) >= MAX_BATCH:
                    break
                item = queue.get_nowait()
            if batch:
                yield batch
            await work.tick()
        await task  # re-raises what the run raised
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
