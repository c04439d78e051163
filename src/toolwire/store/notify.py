"""Wake-ups between replicas on PostgreSQL: `LISTEN`/`NOTIFY` on one channel.

A write that queues a job or flags a cancel also sends a notification (delivered when its
transaction commits); every replica listening wakes its worker at once instead of at its next
poll. On SQLite (one process, or several on one file) there is no such channel and replicas
rely on `poll_seconds` alone. Notifications are only a hint: the database rows stay the truth,
so a lost notification costs at most one poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

if TYPE_CHECKING:  # PostgreSQL's alone (store/postgres.py imports it; engine.py on first use)
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger("toolwire.durable")

CHANNEL = "toolwire_runs"


def notify_in(connection: sa.Connection, payload: str) -> None:
    """Send `payload` on the channel when the transaction of `connection` (a `Store.transact`
    job's) commits; nothing on other databases than PostgreSQL."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.select(sa.func.pg_notify(CHANNEL, payload))  # a bound payload: no quoting
        )


class Listener:
    """Holds one pooled connection of the database's engine `LISTEN`ing on the channel for as
    long as it is open, and calls `on_notify(payload)` for each notification. Does nothing
    without an engine (SQLite: `Store.listener`)."""

    def __init__(self, engine: AsyncEngine | None, on_notify: Callable[[str], None]) -> None:
        self.engine = engine
        self.on_notify = on_notify
        self._connection: AsyncConnection | None = None
        self._driver: Any = None

    async def start(self) -> None:
        if self.engine is None:
            return
        try:
            connection = await self.engine.connect()
            raw = await connection.get_raw_connection()
            driver: Any = raw.driver_connection  # asyncpg's own connection: add_listener
            await driver.add_listener(CHANNEL, self._received)
        except Exception:  # polling still works: the listener only makes it faster
            log.exception("LISTEN %s failed; replicas fall back to polling", CHANNEL)
            return
        self._connection, self._driver = connection, driver

    def _received(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self.on_notify(payload)

    async def stop(self) -> None:
        connection, driver = self._connection, self._driver
        self._connection = self._driver = None
        if connection is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(driver.remove_listener(CHANNEL, self._received), 5)
        with contextlib.suppress(Exception):
            await connection.close()
