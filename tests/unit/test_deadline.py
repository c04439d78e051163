"""`Deadline` does what `asyncio.timeout` does, case by case: the same exception out of the
block, the same `expired()`, the same count of the task's cancellations after it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolwire.loop.deadline import Deadline


async def _outcome(timer: Any, body: Callable[[], Awaitable[object]]) -> tuple[str, bool, int]:
    """What leaving the block under `timer` raised, whether it expired, and the task's
    cancellations still counted."""

    async def run() -> tuple[str, bool, int]:
        raised = "nothing"
        try:
            if isinstance(timer, Deadline):
                with timer:
                    await body()
            else:
                async with timer:
                    await body()
        except BaseException as exc:
            raised = type(exc).__name__
        task = asyncio.current_task()
        assert task is not None
        return raised, timer.expired(), task.cancelling()

    return await asyncio.create_task(run())


async def _sleep() -> None:
    await asyncio.sleep(1)


async def _fail() -> None:
    raise ValueError


async def _quick() -> None:
    await asyncio.sleep(0)


async def _cancelled_too() -> None:
    """The deadline fires, and then someone else cancels the task as well."""
    try:
        await asyncio.sleep(1)
    finally:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)


@pytest.mark.parametrize("body", [_sleep, _fail, _quick, _cancelled_too])
@pytest.mark.parametrize("delay", [0.01, None, 5.0])
async def test_a_deadline_ends_a_block_as_asyncio_timeout_does(
    body: Callable[[], Awaitable[object]], delay: float | None
) -> None:
    if body in (_sleep, _cancelled_too) and delay != 0.01:
        body = _quick  # nothing would end it (soon)
    expected = await _outcome(asyncio.timeout(delay), body)
    assert await _outcome(Deadline(delay), body) == expected


async def test_a_deadline_that_fires_raises_timeout_and_says_so() -> None:
    deadline = Deadline(0.01)
    with pytest.raises(TimeoutError), deadline:
        await asyncio.sleep(1)
    assert deadline.expired()


async def test_a_cancel_from_outside_stays_a_cancel() -> None:
    entered = asyncio.Event()

    async def run() -> None:
        with Deadline(5.0):
            entered.set()
            await asyncio.sleep(1)

    task = asyncio.create_task(run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_leaving_in_time_leaves_no_timer() -> None:
    deadline = Deadline(5.0)
    with deadline:
        pass
    assert deadline._handle is None and not deadline.expired()
