"""A budget of bytes shared by tasks that hold memory for a while (the WebSocket door's queued
messages, all sockets of a process together): `take` waits, up to a deadline, until what is
asked fits; `give` returns it and wakes the waiters to try again."""

from __future__ import annotations

import asyncio


class ByteBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: set[asyncio.Future[None]] = set()

    async def take(self, size: int, wait: float | None) -> bool:
        """Hold `size` bytes; False when they did not fit within `wait` seconds (None: wait
        as long as it takes), or never can (more than the whole budget)."""
        if size > self.limit:
            return False
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        while self.held + size > self.limit:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            freed: asyncio.Future[None] = loop.create_future()
            self._waiters.add(freed)
            try:
                await asyncio.wait_for(freed, left)
            except TimeoutError:
                return False
            finally:
                self._waiters.discard(freed)
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size
        for freed in self._waiters:
            if not freed.done():
                freed.set_result(None)
        self._waiters.clear()
