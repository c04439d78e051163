"""Read jobs on a SQLite file: a few threads, each with a read-only connection of its own.

A read is a job like a write (a plain function of a synchronous `sqlalchemy.Connection`), run
whole on a reader thread: one thread hop per read, however many statements it makes, where an
async driver (aiosqlite) hopped once per statement and once per fetch. Never on the event loop:
a history can be a long chain of responses (`MAX_CHAIN`), and reading it must not hold every
other request. In WAL mode a reader works on a snapshot and never blocks the writer, nor the
writer it; each job is one (deferred) transaction, so it sees one state of the database, and
ends it, so the WAL can be checkpointed behind it. The connections refuse writes
(`store/sqlite.py`: role `read`): every write goes through `Store.transact`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import sqlalchemy as sa

from toolwire.store.sqlite import connect

T = TypeVar("T")

#: Reader threads per process (each holds one connection). Reads are short; a few let a slow
#: one (a long history, a /ui overview) run beside the others.
READERS = 4


class Readers:
    def __init__(self, engine: sa.Engine, threads: int = READERS) -> None:
        self.engine = engine
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="toolwire-reader")
        self._local = threading.local()
        self._opened: list[sa.Connection] = []
        self._lock = threading.Lock()

    async def run(self, job: Callable[[sa.Connection], T]) -> T:
        """`job`'s result, read on one snapshot on a reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, job)

    def _run(self, job: Callable[[sa.Connection], T]) -> T:
        connection: sa.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = connect(self.engine, "read")
            with self._lock:
                self._opened.append(connection)
        with connection.begin():
            return job(connection)

    async def close(self) -> None:
        """Let the reads under way end, then close the threads' connections."""
        await asyncio.to_thread(self._pool.shutdown, True)
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
