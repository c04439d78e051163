"""The one way into a database: `read(job)` and `transact(job)`, on one engine per database.

A job is a plain function of a synchronous `sqlalchemy.Connection` (as Datasette's
`execute_fn` / `execute_write_fn`): the store's modules write their SQL once, synchronously,
for both databases, and the database decides where the job runs.

- A SQLite file (`SqliteFile`): one synchronous engine (`store/sqlite.py`). Writes go through
  the writer (`store/writer.py`: inline on the event loop when the file is free, else on its
  thread, group-committed); reads on a few reader threads (`store/readers.py`), read-only.
- An in-memory SQLite database (`SqliteMemory`, tests and one-off library use): its one
  connection, every job inline on the event loop (no other thread can share it safely).
- PostgreSQL (`store/postgres.py`): one async engine (asyncpg), every job through `run_sync`.

Nothing outside these modules opens a connection (`tests/unit/test_store_access.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa

from toolwire.store.files import sqlite_path
from toolwire.store.notify import Listener
from toolwire.store.readers import READERS, Readers
from toolwire.store.sqlite import connect, sqlite_engine
from toolwire.store.writer import Job as Job
from toolwire.store.writer import SqliteWriter

T = TypeVar("T")

Connection = sa.Connection
"""What a job is given: a connection in its transaction, to hand to the store's functions
(`add_items_in`, `TimelineStore.save_in`, ...), never kept."""


def execute(statement: sa.Executable, connection: sa.Connection) -> None:
    """A job of one statement (its result unread): `transact(partial(execute, statement))`."""
    connection.execute(statement)


def rowcount(statement: sa.Executable, connection: sa.Connection) -> int:
    """A job of one statement: how many rows it changed."""
    return int(connection.execute(statement).rowcount)


def scalar(query: sa.Executable, connection: sa.Connection) -> Any:
    """A job of one query: the first column of its first row (None: no row)."""
    return connection.scalar(query)


class Database(Protocol):
    async def read(self, job: Job[T]) -> T:
        """`job` in a read-only transaction, off the event loop where the database allows."""
        ...

    async def transact(self, job: Job[T], *, inline: bool = True) -> T:
        """`job` in a write transaction; committed when this returns. `inline=False`: a long
        job (a migration) that must not run on the event loop."""
        ...

    def listener(self, on_notify: Callable[[str], None]) -> Listener:
        """Wake-ups from other replicas (PostgreSQL's `LISTEN`; none elsewhere)."""
        ...

    async def close(self) -> None: ...


class SqliteFile:
    def __init__(self, url: str) -> None:
        self.engine = sqlite_engine(url, memory=False, connections=READERS + 2)
        self.writer = SqliteWriter(self.engine)
        self.readers = Readers(self.engine)
        # the writer's own method: every write of a response passes here, one call less
        self.transact = self.writer.run

    async def read(self, job: Job[T]) -> T:
        return await self.readers.run(job)

    def listener(self, on_notify: Callable[[str], None]) -> Listener:
        return Listener(None, on_notify)

    async def close(self) -> None:
        try:
            await self.writer.close()
            await self.readers.close()
        finally:
            self.engine.dispose()


class SqliteMemory:
    """One connection, two roles on it (`store/sqlite.py`), every job on the event loop."""

    def __init__(self, url: str) -> None:
        self.engine = sqlite_engine(url, memory=True, connections=1)
        self._writes = connect(self.engine, "write")
        self._reads = connect(self.engine, "read")

    async def read(self, job: Job[T]) -> T:
        with self._reads.begin():
            return job(self._reads)

    async def transact(self, job: Job[T], *, inline: bool = True) -> T:
        with self._writes.begin():
            return job(self._writes)

    def listener(self, on_notify: Callable[[str], None]) -> Listener:
        return Listener(None, on_notify)

    async def close(self) -> None:
        self._writes.close()
        self._reads.close()
        self.engine.dispose()


async def open_database(url: str) -> Database:
    """The database at `url` (SQLAlchemy's form, `store/urls.py`), its engine made."""
    if url.startswith("postgresql"):
        # here, not at the top: SQLAlchemy's asyncio extension imports its ORM (~6 MB a SQLite
        # server would carry unused)
        from toolwire.store.postgres import PostgresDatabase

        return PostgresDatabase(url)
    if sqlite_path(url) is None:
        return SqliteMemory(url)
    database = SqliteFile(url)
    try:
        await database.writer.open()
    except BaseException:
        await database.close()
        raise
    return database
