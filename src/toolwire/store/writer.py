"""The SQLite writer: a response's writes in one step, on the event loop when the file is free,
else on a thread of its own, group-committed.

Through the async engine (aiosqlite) every statement of a transaction is a round trip to
aiosqlite's thread and back through a greenlet: a response's final write (its row, its item
index, its run row, its timeline: four statements and a commit) cost several times what the
statements themselves cost (`benchmarks/db_write.py`). Here the same SQLAlchemy Core statements
run on a synchronous engine; a job is a plain function of a `sqlalchemy.Connection`.

Inline first: when nothing else of this process is writing, the job runs right away on the
event loop's thread, on a connection whose busy timeout is zero. A small transaction in WAL
mode (no fsync at commit with `synchronous=NORMAL`) takes a fraction of a millisecond, less
than the two thread hops it saves, and a thread hop also waits for the GIL while the loop is
busy. If another process holds the file's write lock (`--workers 2`, replicas on one file), the
inline attempt fails at once with "database is locked" and the job goes to the thread, which
waits out the busy timeout there, never on the loop. Nor does the inline connection ever
checkpoint the WAL (the fsync happens there): the thread does, every `CHECKPOINT_EVERY` inline
commits.

On the thread, jobs that arrive while a commit is under way wait for the next one and share it
(group commit): each runs in a savepoint of its own, so a job that fails (an id taken, say) is
rolled back alone and the others commit.

The Store's other writes still go through the async engine, one at a time under the Store's
write lock: an inline write runs only while that lock is free (it cannot be taken meanwhile:
nothing awaits in between), and a batch on the thread holds it while it commits, so this
process never races itself for SQLite's file lock. `BEGIN IMMEDIATE` takes the write lock up
front, so a transaction never fails halfway upgrading a read lock.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
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

#: SQLite's settings on every connection of the store (the async engine's too), after its
#: busy timeout.
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)
BUSY_TIMEOUT_MS = 30_000


def apply_pragmas(dbapi_connection: Any, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """The busy timeout first: with 0 (the inline connection) even setting up the journal never
    waits for another process."""
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
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


#: Inline commits between two WAL checkpoints (on the thread). SQLite's own automatic
#: checkpoint comes at 1,000 pages; a response's write is a few pages.
CHECKPOINT_EVERY = 200


def _engine(url: str, *, inline: bool) -> sa.Engine:
    engine = sa.create_engine(
        url,
        json_serializer=lambda value: orjson.dumps(value).decode(),
        json_deserializer=orjson.loads,
        poolclass=sa.pool.NullPool,  # one connection each, held below
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling off (it cannot nest savepoints): the
        # `begin` hook below starts each transaction, taking the write lock at once.
        dbapi_connection.isolation_level = None
        # inline: never wait, never checkpoint on the event loop's thread
        apply_pragmas(dbapi_connection, busy_timeout_ms=0 if inline else BUSY_TIMEOUT_MS)
        if inline:
            dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        # straight to the driver: SQLAlchemy's execution would cost more than the BEGIN
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.execute("BEGIN IMMEDIATE")

    return engine


class _Busy:
    """The file was locked by another process: no inline write this time."""


def _locked(exc: BaseException) -> bool:
    """SQLite's "the file is being written by someone else" (SQLITE_BUSY / SQLITE_LOCKED), as
    SQLAlchemy wraps it or as the driver raises it (the BEGIN goes to the driver)."""
    original = exc.orig if isinstance(exc, sa.exc.OperationalError) else exc
    return isinstance(original, sqlite3.OperationalError) and "locked" in str(original)


@dataclass
class SqliteWriter:
    """Runs write jobs on the SQLite file `url` (`sqlite:///path`): inline when the file is
    free, else on one thread with its own connection, under `lock` (the Store's write lock)
    while a batch commits."""

    url: str
    lock: asyncio.Lock
    _engine: sa.Engine = field(init=False)
    _inline_engine: sa.Engine = field(init=False)
    _connection: sa.Connection | None = field(init=False, default=None)
    _inline: sa.Connection | None = field(init=False, default=None)
    _inline_commits: int = field(init=False, default=0)
    _thread: ThreadPoolExecutor = field(init=False)
    _queue: list[_Pending] = field(init=False, default_factory=list)
    _flushing: asyncio.Task[None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._engine = _engine(self.url, inline=False)
        self._inline_engine = _engine(self.url, inline=True)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwire-writer")

    async def run(self, job: Job[T]) -> T:
        """Run `job` in a transaction (inline, or shared with the jobs queued beside it on the
        thread); its result, or its exception. A caller cancelled while waiting does not cancel
        the write: a final write goes in even if the one who asked for it is gone."""
        if self._flushing is None and not self.lock.locked():
            result = self._run_inline(job)
            if not isinstance(result, _Busy):
                return result
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

    def _run_inline(self, job: Job[T]) -> T | _Busy:
        """`job`'s result once it committed here; `_Busy` when another process holds the
        file: the thread takes it. Its own exceptions are raised."""
        try:
            connection = self._inline
            if connection is None:
                connection = self._inline = self._inline_engine.connect()
            with connection.begin():
                result = job(connection)
        except (sa.exc.OperationalError, sqlite3.OperationalError) as exc:
            if not _locked(exc):
                raise
            return _Busy()
        self._inline_commits += 1
        if self._inline_commits >= CHECKPOINT_EVERY:
            self._inline_commits = 0
            asyncio.get_running_loop().run_in_executor(self._thread, self._checkpoint)
        return result

    def _checkpoint(self) -> None:
        """On the thread: move the WAL's pages into the database file (the fsync is here)."""
        try:
            connection = self._connection
            if connection is None:
                connection = self._connection = self._engine.connect()
            # on the driver's connection: SQLAlchemy would open a transaction first, and a
            # checkpoint cannot run inside one
            driver = connection.connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # SQLite checkpoints at its next chance; nothing is lost
            log.warning("WAL checkpoint failed", exc_info=True)

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
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        self._engine.dispose()
        self._inline_engine.dispose()

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
