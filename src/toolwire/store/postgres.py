"""A PostgreSQL database: its one async engine (asyncpg), running the store's jobs.

A job is the same plain function of a synchronous `sqlalchemy.Connection` as on SQLite; here it
runs through `run_sync` on a pooled connection (each statement awaits asyncpg under the hood).
Reads run in a `READ ONLY` transaction (asyncpg begins it so: no extra round trip), so a write
that bypasses `Store.transact` is refused. A write runs in a task of its own: a caller
cancelled while it is under way does not cancel it (as the SQLite writer's), and closing the
database waits for it. `LISTEN`/`NOTIFY` (`store/notify.py`) holds one connection of the same
engine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from toolwire.store.notify import Listener
from toolwire.store.tables import CONTINUATIONS, KEYED, responses

log = logging.getLogger("toolwire.store")
T = TypeVar("T")

# Schema 8's and 10's partial indexes, as PostgreSQL spells them (`tables.py` names SQLite's
# only, so that a SQLite server never imports this dialect): in the metadata a new database
# is made from.
for _index in responses.indexes:
    if _index.name == "ix_responses_previous_response_id":
        _index.dialect_options["postgresql"]["where"] = CONTINUATIONS
    elif _index.name == "ix_responses_owner_stored_bytes":
        _index.dialect_options["postgresql"]["where"] = KEYED


class PostgresDatabase:
    def __init__(self, url: str) -> None:
        self.engine = create_async_engine(
            url,
            json_serializer=lambda value: orjson.dumps(value).decode(),
            json_deserializer=orjson.loads,
            pool_size=20,
            max_overflow=20,
            pool_pre_ping=True,
        )
        self._writes: set[asyncio.Task[object]] = set()

    async def read(self, job: Callable[[sa.Connection], T]) -> T:
        async with self.engine.connect() as connection:
            await connection.execution_options(postgresql_readonly=True)
            return await connection.run_sync(job)

    async def transact(self, job: Callable[[sa.Connection], T], *, inline: bool = True) -> T:
        """`job` in a write transaction, to its end even if the caller is cancelled meanwhile
        (`inline` is the SQLite writer's; every job here awaits its statements)."""
        task: asyncio.Task[T] = asyncio.get_running_loop().create_task(self._transact(job))
        self._writes.add(task)
        task.add_done_callback(_forget(self._writes))
        return await asyncio.shield(task)

    async def _transact(self, job: Callable[[sa.Connection], T]) -> T:
        async with self.engine.begin() as connection:
            return await connection.run_sync(job)

    def listener(self, on_notify: Callable[[str], None]) -> Listener:
        return Listener(self.engine, on_notify)

    async def close(self) -> None:
        """Wait for the writes under way, then close the pool."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        await self.engine.dispose()


def _forget(tasks: set[asyncio.Task[object]]) -> Callable[[asyncio.Task[object]], None]:
    def done(task: asyncio.Task[object]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # retrieved here: a caller that was cancelled meanwhile never reads it
            log.debug("a write whose caller had gone failed", exc_info=task.exception())

    return done
