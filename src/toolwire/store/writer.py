"""The SQLite writer: a write job in one step, on the event loop when the file is free, else on
a thread of its own, group-committed. Every write of the store comes here (`Store.transact`).

A job is a plain function of a synchronous `sqlalchemy.Connection` (SQLAlchemy Core
statements, the hot ones compiled once: `store/prepared.py`), run on connections of the
database's one engine (`store/sqlite.py`). Through an async driver (aiosqlite) every statement
of a transaction was a round trip to its thread and back through a greenlet: a response's final
write (its row, its item index, its run row, its timeline: four statements and a commit) cost
several times what the statements themselves cost (`benchmarks/db_write.py`).

Inline first: when no batch is under way on the thread, the job runs right away on the event
loop's thread, on a connection whose busy timeout is zero. A small transaction in WAL mode (no
fsync at commit with `synchronous=NORMAL`) takes a fraction of a millisecond, less than the two
thread hops it saves, and a thread hop also waits for the GIL while the loop is busy. If another
process holds the file's write lock (`--workers 2`, replicas on one file), the inline attempt
fails at once with "database is locked" and the job goes to the thread, which waits out the
busy timeout there, never on the loop. Nor does the inline connection ever checkpoint the WAL
(the fsync happens there): the thread does, every `CHECKPOINT_EVERY` inline commits, and
once more with this process's writes held, so that the WAL starts over (`_catch_up`).

On the thread, jobs that arrive while a commit is under way wait for the next one and share it
(group commit): each runs in a savepoint of its own, so a job that fails (an id taken, say) is
rolled back alone and the others commit. While a batch is under way no job runs inline (it
would race the thread for the file's lock), so this process never waits on itself; the inline
path cannot be entered meanwhile either (nothing awaits in between).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa

from toolwire.store.sqlite import begin, connect

log = logging.getLogger("toolwire.store")

T = TypeVar("T")
Job = Callable[[sa.Connection], T]
"""A unit of work on the database: a function of a synchronous connection, run in one
transaction (`Store.read` / `Store.transact`, `store/engine.py`)."""


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


class _Busy:
    """The file was locked by another process: no inline write this time."""


def _locked(exc: BaseException) -> bool:
    """SQLite's "the file is being written by someone else" (SQLITE_BUSY / SQLITE_LOCKED), as
    SQLAlchemy wraps it or as the driver raises it (the BEGIN goes to the driver)."""
    original = exc.orig if isinstance(exc, sa.exc.OperationalError) else exc
    return isinstance(original, sqlite3.OperationalError) and "locked" in str(original)


@dataclass
class SqliteWriter:
    """Runs write jobs on a SQLite file through `engine` (the database's one): inline when the
    file is free, else on one thread with its own connection."""

    engine: sa.Engine
    _connection: sa.Connection | None = field(init=False, default=None)
    _inline: sa.Connection | None = field(init=False, default=None)
    _inline_commits: int = field(init=False, default=0)
    _thread: ThreadPoolExecutor = field(init=False)
    _queue: list[_Pending] = field(init=False, default_factory=list)
    _flushing: asyncio.Task[None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwire-writer")

    async def open(self) -> None:
        """Both connections, opened on the thread: opening one may wait for another process
        (the journal's set-up), which the event loop never does."""
        loop = asyncio.get_running_loop()
        self._inline = await loop.run_in_executor(self._thread, connect, self.engine, "inline")
        await loop.run_in_executor(self._thread, self._thread_connection)

    async def run(self, job: Job[T], *, inline: bool = True) -> T:
        """Run `job` in a transaction (inline, or shared with the jobs queued beside it on the
        thread); its result, or its exception. A caller cancelled while waiting does not cancel
        the write: a final write goes in even if the one who asked for it is gone. `inline`:
        False for a long job (the schema's migration), which never runs on the event loop."""
        if inline and self._flushing is None:
            result = self._run_inline(job)
            if not isinstance(result, _Busy):
                return result
        loop = asyncio.get_running_loop()
        pending = _Pending(job, loop.create_future())
        self._queue.append(pending)
        if self._flushing is None:
            self._flushing = loop.create_task(self._flush())
        return await asyncio.shield(pending.future)

    async def _flush(self, *, checkpoint: bool = False) -> None:
        """Commit what is queued, batch after batch, until the queue is empty; `checkpoint`:
        a WAL checkpoint first (`_catch_up`)."""
        try:
            if checkpoint:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._checkpoint)
                self._commit_held_inline()
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
        connection = self._inline
        if connection is None:  # not opened (or closed): the thread takes it
            return _Busy()
        # Begun and committed on the driver: SQLAlchemy's transaction (its events, its
        # bookkeeping) cost more than SQLite's BEGIN and COMMIT. A job's statement through
        # SQLAlchemy joins this transaction (`store/sqlite.py`), which SQLAlchemy then ends.
        pooled = connection.connection
        driver = pooled.driver_connection
        assert driver is not None
        try:
            begin(pooled, "inline")
            try:
                result = job(connection)
                _end(connection, driver, commit=True)
            except BaseException:
                _end(connection, driver, commit=False)
                raise
        except (sa.exc.OperationalError, sqlite3.OperationalError) as exc:
            if not _locked(exc):
                raise
            return _Busy()
        self._inline_commits += 1
        if self._inline_commits >= CHECKPOINT_EVERY:
            self._inline_commits = 0
            checkpoint = asyncio.get_running_loop().run_in_executor(self._thread, self._checkpoint)
            checkpoint.add_done_callback(self._catch_up)
        return result

    def _catch_up(self, _checkpoint: object) -> None:
        """After a checkpoint that ran beside inline writes: another, which finishes the job,
        with this process's writes queued meanwhile (a flush that begins with it).

        SQLite starts the WAL over from its beginning only when a write finds every frame
        checkpointed. A checkpoint beside a steady stream of inline writes never catches up
        with them, so the WAL grew for as long as the writes went on (37 MB after 1,200
        responses, file and wal-index), and each commit appended past its end, ~15 us more
        than a write over a reused WAL. The catch-up copies only the frames written during the
        first, so writes wait for a short checkpoint, not for the whole one."""
        if self._flushing is None and self._inline is not None:  # not closing
            self._flushing = asyncio.get_running_loop().create_task(self._flush(checkpoint=True))

    def _commit_held_inline(self) -> None:
        """The writes held during a catch-up, committed inline, one by one, as they would have
        been without it (on the thread, their batch would fill that connection's page cache
        too: ~4 MB more RSS under load); one that finds the file locked, and those after it,
        stay queued for the thread."""
        queue = self._queue
        while queue:
            outcome = _Outcome(queue[0])
            try:
                result = self._run_inline(outcome.pending.job)
            except Exception as exc:  # the job's own failure is its caller's
                outcome.error = exc
            else:
                if isinstance(result, _Busy):
                    return
                outcome.result = result
            queue.pop(0)
            _settle(outcome)

    def _thread_connection(self) -> sa.Connection:
        """On the thread: its connection, opened again after a transaction that failed."""
        connection = self._connection
        if connection is None:
            connection = self._connection = connect(self.engine, "write")
        return connection

    def _checkpoint(self) -> None:
        """On the thread: move the WAL's pages into the database file (the fsync is here)."""
        try:
            # on the driver's connection: SQLAlchemy would open a transaction first, and a
            # checkpoint cannot run inside one
            driver = self._thread_connection().connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # SQLite checkpoints at its next chance; nothing is lost
            log.warning("WAL checkpoint failed", exc_info=True)

    def _commit(self, batch: list[_Pending]) -> list[_Outcome]:
        """On the writer thread: one transaction, a savepoint per job."""
        connection = self._thread_connection()
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
            connection.close()
            raise
        return outcomes

    async def close(self) -> None:
        """Wait for queued writes, then close the connections and the thread."""
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        inline, self._inline = self._inline, None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._disconnect, inline)
        self._thread.shutdown(wait=True)

    def _disconnect(self, inline: sa.Connection | None) -> None:
        if inline is not None:
            inline.close()
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _end(connection: sa.Connection, driver: sqlite3.Connection, *, commit: bool) -> None:
    """End an inline transaction: through SQLAlchemy if a statement of the job went through it
    (it then holds the transaction as its own), else on the driver. A rollback when nothing
    is open does nothing (a failed BEGIN, a failed COMMIT that SQLite already undid)."""
    if connection.in_transaction():
        if commit:
            connection.commit()
        else:
            connection.rollback()
    elif commit:
        driver.commit()
    else:
        driver.rollback()


def _settle(outcome: _Outcome) -> None:
    future = outcome.pending.future
    if future.done():
        return
    if outcome.error is not None:
        future.set_exception(outcome.error)
    else:
        future.set_result(outcome.result)
