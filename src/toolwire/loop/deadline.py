"""A run's deadline: `asyncio.timeout`'s contract, at less of its cost.

Every request runs under one (`settings.deadline`, 1800 s by default) and almost none reaches
it, so what counts is the cost of entering and leaving it: `asyncio.timeout` (Python 3.11) spends
~3.8 µs there (an asynchronous context manager, its state machine, `reschedule`), this ~2 µs
(a plain context manager around one loop timer, cancelled on the way out). What it does is
`asyncio.timeout`'s: on expiry the task is cancelled, and the `CancelledError` leaving the
block becomes `TimeoutError` unless the task was also cancelled from elsewhere
(`Task.uncancel`, as asyncio counts it); `expired()` says whether it fired.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class Deadline:
    """`with Deadline(seconds):` (None: no deadline) around one block of one task: a plain
    context manager (entering and leaving it awaits nothing), where `asyncio.timeout` is an
    asynchronous one."""

    __slots__ = ("_cancelling", "_delay", "_expired", "_handle", "_task")

    def __init__(self, delay: float | None) -> None:
        self._delay = delay
        self._expired = False
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    def expired(self) -> bool:
        """Whether the deadline passed (and cancelled the block)."""
        return self._expired

    def __enter__(self) -> Deadline:
        if self._delay is not None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a Deadline is entered in a task")
            self._task = task
            self._cancelling = task.cancelling()
            self._handle = asyncio.get_running_loop().call_later(self._delay, self._expire)
        return self

    def _expire(self) -> None:
        self._handle = None
        self._expired = True
        assert self._task is not None
        self._task.cancel()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        elif (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
