"""The SQLite writer: a response's writes in one hop to a thread of its own, group-committed.

Through the async engine (aiosqlite) every statement of a transaction is a round trip to
aiosqlite's thread and back through a greenlet: a response's final write (its row, its item
index, its run row, its timeline: four statements and a commit) cost 1.6 ms of CPU and 3.4 ms of
wall time in `benchmarks/`-style measurements, most of a `/v1/responses` request's overhead.
Here the same SQLAlchemy Core statements run on a synchronous engine in one dedicated thread:
a job is a plain function of a `sqlalchemy.Connection`, the whole transaction is one hop.
Jobs that arrive while a commit is under way wait for the next one and share it (group
commit): each runs in a savepoint of its own, so a job that fails (an id taken, say) is rolled
back alone and the others commit. 5.7x less wall time per write than the async engine
sequentially, 17x with 16 writes at a time (`/tmp`-style microbenchmark in `benchmarks/`
`db_write.py`).

The Store's other writes still go through the async engine, one at a time under the Store's
write lock: a batch here holds the same lock while it commits, so this process never races
itself for SQLite's file lock. Another process on the same file (`--workers 2`, replicas)
waits at `busy_timeout`, as before; `BEGIN IMMEDIATE` takes the write lock up front, so a
transaction never fails halfway upgrading a read lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy import event

log = logging.getLogger("toolwire.store")

T = TypeVar("T")
Job = Callable[[sa.Connection], T]

#: SQLite's settings on every connection of the store (the async engine's too).
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
)


def apply_pragmas(dbapi_connection: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


@dataclass(slots=True)
class _Pending:
    job: Job[Any]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _Outcome:
    """A job's result or its exception, set on its future back on the event loop."""

    pending: _Pending
    result: Any = None
    error: BaseException | None = None


@dataclass
class SqliteWriter:
    """Runs write jobs on one thread with its own connection to the SQLite file `url`
    (`sqlite:///path`), under `lock` (the Store's write lock) while a batch commits."""

    url: str
    lock: asyncio.Lock
    _engine: sa.Engine = field(init=False)
    _connection: sa.Connection | None = field(init=False, default=None)
    _thread: ThreadPoolExecutor = field(init=False)
    _queue: list[_Pending] = field(init=False, default_factory=list)
    _flushing: asyncio.Task[None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._engine = sa.create_engine(
            self.url,
            json_serializer=lambda value: orjson.dumps(value).decode(),
            json_deserializer=orjson.loads,
            poolclass=sa.pool.NullPool,  # one connection, held by the thread below
        )

        @event.listens_for(self._engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            # The driver's own transaction handling off (it cannot nest savepoints): the
            # `begin` hook below starts each transaction, taking the write lock at once.
            dbapi_connection.isolation_level = None
            apply_pragmas(dbapi_connection)

        @event.listens_for(self._engine, "begin")
        def _begin(connection: sa.Connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwire-writer")

    async def run(self, job: Job[T]) -> T:
        """Run `job` in a transaction (shared with the jobs queued beside it); its result, or
        its exception. A caller cancelled while waiting does not cancel the write: a final
        write goes in even if the one who asked for it is gone."""
        loop = asyncio.get_running_loop()
        pending = _Pending(job, loop.create_future())
        self._queue.append(pending)
        if self._flushing is None:
            self._flushing = loop.create_task(self._flush())
        return await asyncio.shield(pending.future)

    async def _flush(self) -> None:
        """Commit what is queued, batch after batch, until the queue is empty."""
        try:
            async with self.lock:
                while self._queue:
                    batch, self._queue = self._queue, []
                    loop = asyncio.get_running_loop()
                    try:
                        outcomes = await loop.run_in_executor(self._thread, self._commit, batch)
                    except BaseException as exc:  # the whole batch failed (commit, disk)
                        outcomes = [_Outcome(pending, error=exc) for pending in batch]
                    for outcome in outcomes:
                        _settle(outcome)
        finally:
            self._flushing = None
            if self._queue:  # queued after the loop above ended, e.g. during a cancel
                self._flushing = asyncio.get_running_loop().create_task(self._flush())

    def _commit(self, batch: list[_Pending]) -> list[_Outcome]:
        """On the writer thread: one transaction, a savepoint per job."""
        connection = self._connection
        if connection is None:
            connection = self._connection = self._engine.connect()
        outcomes: list[_Outcome] = []
        try:
            with connection.begin() as transaction:
                if len(batch) == 1:  # alone: its failure rolls back the whole transaction
                    outcome = _Outcome(batch[0])
                    try:
                        outcome.result = batch[0].job(connection)
                    except Exception as exc:
                        outcome.error = exc
                        transaction.rollback()
                    return [outcome]
                for pending in batch:
                    outcome = _Outcome(pending)
                    try:
                        with connection.begin_nested():
                            outcome.result = pending.job(connection)
                    except Exception as exc:
                        outcome.error = exc
                    outcomes.append(outcome)
        except BaseException:
            # The transaction itself failed: start afresh on a new connection next time.
            self._connection = None
            connection.invalidate()
            raise
        return outcomes

    async def close(self) -> None:
        """Wait for queued writes, then close the connection and the thread."""
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._disconnect)
        self._thread.shutdown(wait=True)
        self._engine.dispose()

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _settle(outcome: _Outcome) -> None:
    future = outcome.pending.future
    if future.done():
        return
    if outcome.error is not None:
        future.set_exception(outcome.error)
    else:
        future.set_result(outcome.result)
