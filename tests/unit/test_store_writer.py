"""The SQLite writer (`store/writer.py`) behind `Store.transact` and `save_response`: what a
caller of the store can notice. A write runs inline while the file is free; writes queued
together share a commit, a failing one is rolled back alone, a write lands even when its caller
is gone, what was written is read back at once (`Store.read`, on a reader thread), and a read
never waits for a write under way."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from toolwire.store import prepared, writer
from toolwire.store.database import Store
from toolwire.store.engine import SqliteFile, SqliteMemory
from toolwire.store.runs import RunChange
from toolwire.store.tables import conversations


async def _open(tmp_path: Path) -> Store:
    return await Store.open(f"sqlite:///{tmp_path / 'toolwire.db'}")


def _insert(conversation_id: str) -> Any:
    def job(connection: sa.Connection) -> str:
        connection.execute(
            conversations.insert().values(id=conversation_id, created_at=1, metadata={})
        )
        return conversation_id

    return job


async def _stored_ids(store: Store) -> set[str]:
    return await store.read(
        lambda connection: set(connection.scalars(sa.select(conversations.c.id)))
    )


def _file(store: Store) -> SqliteFile:
    assert isinstance(store.database, SqliteFile), "a SQLite file gets the writer thread"
    return store.database


def _count_commits(store: Store) -> list[int]:
    """The commits made on the writer's thread (not inline on the event loop)."""
    commits: list[int] = []

    def commit(_connection: Any) -> None:
        if threading.current_thread().name.startswith("toolwire-writer"):
            commits.append(1)

    event.listen(_file(store).engine, "commit", commit)
    return commits


class _OtherProcess:
    """A second writer of the same file (as another worker or replica would be), holding its
    write lock until `release`."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.connection.in_transaction:
            self.connection.execute("COMMIT")

    def close(self) -> None:
        self.release()
        self.connection.close()


async def test_writes_queued_together_share_one_commit_and_all_land(tmp_path: Path) -> None:
    """While another process holds the file's write lock, the writes that arrive queue on the
    thread and go in together once it is free."""
    store = await _open(tmp_path)
    other = _OtherProcess(tmp_path / "toolwire.db")
    try:
        commits = _count_commits(store)
        ids = [f"conv_{n}" for n in range(40)]
        writes = asyncio.gather(*(store.transact(_insert(i)) for i in ids))
        await asyncio.sleep(0.05)
        assert not writes.done()
        other.release()
        async with asyncio.timeout(10):
            results = await writes
        assert results == ids  # each caller gets its own job's result
        assert await _stored_ids(store) == set(ids)  # read back at once, on a reader thread
        assert 1 <= len(commits) < len(ids) // 4, commits  # grouped, not one commit each
    finally:
        other.close()
        await store.close()


async def test_a_write_runs_inline_when_the_file_is_free(tmp_path: Path) -> None:
    """Nothing else writing: the job has committed before `transact` first yields (no thread
    hop), and the writer thread has not committed anything."""
    store = await _open(tmp_path)
    try:
        commits = _count_commits(store)
        for n in range(5):
            assert await store.transact(_insert(f"conv_{n}")) == f"conv_{n}"
        assert commits == []
        assert len(await _stored_ids(store)) == 5
    finally:
        await store.close()


async def test_a_write_waiting_on_another_process_leaves_the_loop_free(tmp_path: Path) -> None:
    """Another process holds the file's write lock (as a second worker on the same file
    would): the write waits for it on the thread, the event loop goes on, and the write lands
    once the lock is let go."""
    store = await _open(tmp_path)
    other = _OtherProcess(tmp_path / "toolwire.db")
    try:
        write = asyncio.create_task(store.transact(_insert("conv_waited")))
        ticks = 0
        started = time.perf_counter()
        while time.perf_counter() - started < 0.3:
            await asyncio.sleep(0.01)
            ticks += 1
        assert not write.done()
        assert ticks >= 3  # the loop kept turning while the write waited (not one long block)
        other.release()
        async with asyncio.timeout(10):
            assert await write == "conv_waited"
        assert await store.transact(_insert("conv_after")) == "conv_after"  # inline again
        assert await _stored_ids(store) == {"conv_waited", "conv_after"}
    finally:
        other.close()
        await store.close()


async def _checkpoints_done(store: Store) -> None:
    """Wait for the checkpoints asked of the writer's one thread so far (it runs in order)."""
    await asyncio.get_running_loop().run_in_executor(_file(store).writer._thread, lambda: None)


async def test_inline_writes_keep_the_wal_from_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inline connection never checkpoints itself; the thread does, so the WAL is reused
    instead of growing with every write."""
    monkeypatch.setattr(writer, "CHECKPOINT_EVERY", 20)
    store = await _open(tmp_path)
    wal = tmp_path / "toolwire.db-wal"
    try:
        for n in range(40):
            await store.transact(_insert(f"conv_a{n}"))
        await _checkpoints_done(store)
        after_40 = wal.stat().st_size
        for n in range(200):
            await store.transact(_insert(f"conv_b{n}"))
            if n % 20 == 19:
                await _checkpoints_done(store)
        assert wal.stat().st_size <= after_40 * 2, (wal.stat().st_size, after_40)
        assert len(await _stored_ids(store)) == 240
    finally:
        await store.close()


async def test_the_wal_starts_over_while_inline_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no quiet moment for the checkpoint (writes keep coming while it runs), the WAL
    still starts over from its beginning instead of growing with every write."""
    monkeypatch.setattr(writer, "CHECKPOINT_EVERY", 20)
    store = await _open(tmp_path)
    wal = tmp_path / "toolwire.db-wal"
    page = "x" * 4000  # a page and more a write
    sizes = []
    try:
        for n in range(400):
            await store.transact(
                lambda connection, n=n: connection.execute(
                    conversations.insert().values(
                        id=f"conv_{n}", created_at=1, metadata={"page": page}
                    )
                )
            )
            await asyncio.sleep(0)  # the loop's turn: no wait for the thread
            sizes.append(wal.stat().st_size)
        # the WAL of the writes before the first checkpoint; it grew to 16 times that before
        assert sizes[-1] < sizes[18] * 8, (sizes[18], sizes[-1])
        assert len(await _stored_ids(store)) == 400
    finally:
        await store.close()


async def test_writes_held_for_the_catch_up_are_committed_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes that wait for the catch-up checkpoint go on as inline commits, not as a
    batch on the thread (whose connection would fill a page cache of its own), and none is
    lost or answered twice."""
    monkeypatch.setattr(writer, "CHECKPOINT_EVERY", 5)
    thread_batches: list[int] = []
    commit = writer.SqliteWriter._commit

    def counted(self: writer.SqliteWriter, batch: list[Any]) -> Any:
        thread_batches.append(len(batch))
        return commit(self, batch)

    monkeypatch.setattr(writer.SqliteWriter, "_commit", counted)
    store = await _open(tmp_path)
    thread_batches.clear()  # the schema's set-up, which never runs inline
    try:
        ids = await asyncio.gather(*(store.transact(_insert(f"conv_{n}")) for n in range(60)))
        for n in range(60, 120):
            ids.append(await store.transact(_insert(f"conv_{n}")))
            await asyncio.sleep(0)
        assert ids == [f"conv_{n}" for n in range(120)]
        assert len(await _stored_ids(store)) == 120
        assert thread_batches == []
    finally:
        await store.close()


async def test_a_failing_write_is_rolled_back_alone(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        await store.transact(_insert("conv_taken"))

        def half_then_fail(connection: sa.Connection) -> None:
            connection.execute(
                conversations.insert().values(id="conv_half", created_at=1, metadata={})
            )
            _insert("conv_taken")(connection)  # the id is taken: IntegrityError

        outcomes = await asyncio.gather(
            store.transact(_insert("conv_a")),
            store.transact(half_then_fail),
            store.transact(_insert("conv_b")),
            return_exceptions=True,
        )
        assert outcomes[0] == "conv_a" and outcomes[2] == "conv_b"
        assert isinstance(outcomes[1], sa.exc.IntegrityError)
        # its first insert went with it; its neighbours in the same commit did not
        assert await _stored_ids(store) == {"conv_taken", "conv_a", "conv_b"}
    finally:
        await store.close()


async def test_a_write_alone_that_fails_leaves_nothing_and_the_next_one_lands(
    tmp_path: Path,
) -> None:
    store = await _open(tmp_path)
    try:
        await store.transact(_insert("conv_taken"))

        def half_then_fail(connection: sa.Connection) -> None:
            _insert("conv_half")(connection)
            _insert("conv_taken")(connection)

        with pytest.raises(sa.exc.IntegrityError):
            await store.transact(half_then_fail)
        assert await store.transact(_insert("conv_next")) == "conv_next"
        assert await _stored_ids(store) == {"conv_taken", "conv_next"}
    finally:
        await store.close()


_PREPARED_INSERT = prepared.Prepared(conversations.insert())


def _insert_prepared(conversation_id: str) -> Any:
    """A job of prepared statements only (on the driver, as a response's write is)."""

    def job(connection: sa.Connection) -> str:
        _PREPARED_INSERT.run(
            connection,
            {
                "id": conversation_id,
                "created_at": 1,
                "metadata": {},
                "owner": None,
                "upstream": None,
            },
        )
        return conversation_id

    return job


async def test_an_inline_write_on_the_driver_skips_sqlalchemys_transaction(
    tmp_path: Path,
) -> None:
    """A job of prepared statements is begun and committed on the driver (SQLAlchemy's
    transaction cost more than SQLite's BEGIN and COMMIT), and lands as any other."""
    store = await _open(tmp_path)
    try:
        begun: list[int] = []
        event.listen(_file(store).engine, "begin", lambda _connection: begun.append(1))
        for n in range(3):
            assert await store.transact(_insert_prepared(f"conv_{n}")) == f"conv_{n}"
        assert begun == []
        assert await _stored_ids(store) == {"conv_0", "conv_1", "conv_2"}
        assert await store.transact(_insert("conv_sa")) == "conv_sa"  # SQLAlchemy joins it
        assert await _stored_ids(store) == {"conv_0", "conv_1", "conv_2", "conv_sa"}
    finally:
        await store.close()


@pytest.mark.parametrize("through_sqlalchemy", [False, True])
async def test_an_inline_write_that_fails_on_the_driver_leaves_nothing(
    tmp_path: Path, through_sqlalchemy: bool
) -> None:
    """A failing job is rolled back whether its statements went to the driver or (some of
    them) through SQLAlchemy, and the connection is ready for the next write."""
    store = await _open(tmp_path)
    try:
        await store.transact(_insert_prepared("conv_taken"))

        def half_then_fail(connection: sa.Connection) -> None:
            _insert_prepared("conv_half")(connection)
            if through_sqlalchemy:
                _insert("conv_sa")(connection)
            _insert_prepared("conv_taken")(connection)

        with pytest.raises(sqlite3.IntegrityError):
            await store.transact(half_then_fail)
        driver = _file(store).writer._inline.connection.driver_connection  # type: ignore[union-attr]
        assert not driver.in_transaction
        assert await store.transact(_insert_prepared("conv_next")) == "conv_next"
        assert await store.transact(_insert("conv_last")) == "conv_last"
        assert await _stored_ids(store) == {"conv_taken", "conv_next", "conv_last"}
    finally:
        await store.close()


async def test_a_write_lands_when_its_caller_is_cancelled(tmp_path: Path) -> None:
    store = await _open(tmp_path)
    other = _OtherProcess(tmp_path / "toolwire.db")
    try:
        waiting = asyncio.create_task(store.transact(_insert("conv_kept")))  # queues
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        other.release()
    finally:
        other.close()
        await store.close()  # waits for what is queued
    reopened = await _open(tmp_path)
    try:
        assert await _stored_ids(reopened) == {"conv_kept"}
    finally:
        await reopened.close()


async def test_a_read_never_waits_for_a_write_under_way(tmp_path: Path) -> None:
    """Another process is halfway through a write (its lock held, its rows not committed): a
    read answers at once with what was committed, and writes and reads side by side, many of
    each, all land and answer (none fails with "database is locked")."""
    store = await _open(tmp_path)
    await store.transact(_insert("conv_before"))
    other = _OtherProcess(tmp_path / "toolwire.db")
    try:
        other.connection.execute(
            "INSERT INTO conversations (id, created_at, metadata) VALUES ('conv_half', 1, '{}')"
        )
        async with asyncio.timeout(2):  # far below the busy timeout a waiting read would take
            assert await _stored_ids(store) == {"conv_before"}
        writes = [store.transact(_insert(f"conv_t{n}")) for n in range(30)]
        reads = [_stored_ids(store) for _ in range(30)]
        both = asyncio.gather(*writes, *reads)
        await asyncio.sleep(0.05)
        other.connection.execute("ROLLBACK")
        async with asyncio.timeout(20):
            await both
        assert len(await _stored_ids(store)) == 31
    finally:
        other.close()
        await store.close()


async def test_a_read_runs_off_the_event_loop(tmp_path: Path) -> None:
    """A long read (a long history, a /ui overview) keeps the event loop turning: it runs on a
    reader thread, never on the loop's."""
    store = await _open(tmp_path)
    try:

        def slow(connection: sa.Connection) -> str:
            time.sleep(0.3)
            return threading.current_thread().name

        read = asyncio.create_task(store.read(slow))
        ticks = 0
        while not read.done():
            await asyncio.sleep(0.01)
            ticks += 1
        assert (await read).startswith("toolwire-reader")
        assert ticks >= 5
    finally:
        await store.close()


async def test_an_in_memory_store_runs_every_job_on_its_one_connection() -> None:
    """No file: no second connection can share the database, so reads and writes take turns
    on its one connection, on the event loop; a read still refuses to write."""
    store = await Store.open("sqlite:///:memory:")
    try:
        assert isinstance(store.database, SqliteMemory)
        assert await store.transact(_insert("conv_m")) == "conv_m"
        assert await _stored_ids(store) == {"conv_m"}
        with pytest.raises(sa.exc.OperationalError, match="readonly"):
            await store.read(_insert("conv_r"))
        assert await store.transact(_insert("conv_n")) == "conv_n"  # writable again
        assert await _stored_ids(store) == {"conv_m", "conv_n"}
    finally:
        await store.close()


async def _write_a_response_and_read_it_back(store: Store, owner: str | None) -> dict[str, Any]:
    """Start a response (row, lease), finish it (only while still running), and read
    everything back through the store's own readers."""
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_800_000_000,
        "status": "in_progress",
        "output": [],
        "unicode": "é ✓ \u2028",
        "nothing": None,
    }
    items = [{"type": "message", "id": "msg_in", "role": "user", "content": "hi"}]
    await store.save_response(
        body,  # type: ignore[arg-type]
        input_items=items,  # type: ignore[list-item]
        conversation_id=None,
        owner=owner,
        run=RunChange("hold", "replica_a"),
        fresh=True,
    )
    held = await store.runs.run_row("resp_1")
    final = {**body, "status": "completed", "output": [{"type": "message", "id": "msg_out"}]}
    landed = await store.save_response(
        final,  # type: ignore[arg-type]
        input_items=items,  # type: ignore[list-item]
        conversation_id=None,
        owner=owner,
        run=RunChange("release"),
        only_if_active=True,
    )
    again = await store.save_response(  # finished already: left alone
        {**final, "status": "failed"},  # type: ignore[arg-type]
        input_items=items,  # type: ignore[list-item]
        conversation_id=None,
        owner=owner,
        only_if_active=True,
    )
    record = await store.get_response_record("resp_1", owner=owner)
    found = await store.find_items({"msg_in", "msg_out"}, owner=owner)
    return {
        "held": None
        if held is None
        else {key: value for key, value in held.items() if not key.endswith("_at")},
        "landed": landed,
        "again": again,
        "record": record,
        "released": await store.runs.run_row("resp_1"),
        "found": sorted(found),
    }


@pytest.mark.parametrize("owner", [None, "key_team"])
async def test_the_prepared_statements_store_what_sqlalchemy_stores(
    tmp_path: Path, owner: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same writes as prepared statements on the driver (SQLite) and through SQLAlchemy's
    own execution (as on PostgreSQL) read back identically."""
    on_file = await _open(tmp_path)
    try:
        fast = await _write_a_response_and_read_it_back(on_file, owner)
    finally:
        await on_file.close()
    monkeypatch.setattr(prepared, "_sqlite3", lambda _connection: None)
    plain_store = await Store.open(f"sqlite:///{tmp_path / 'plain.db'}")
    try:
        plain = await _write_a_response_and_read_it_back(plain_store, owner)
    finally:
        await plain_store.close()
    assert fast == plain
    assert fast["held"] == {
        "response_id": "resp_1",
        "kind": "foreground",
        "state": "running",
        "replica_id": "replica_a",
        "request": None,
        "attempts": 0,
        "cancel_requested": False,
    }
    assert fast["landed"] is True and fast["again"] is False and fast["released"] is None
    assert fast["record"]["body"]["status"] == "completed"
    assert fast["record"]["body"]["unicode"] == "é ✓ \u2028"
    assert fast["found"] == ["msg_in", "msg_out"]


def test_a_responses_rewrite_leaves_the_indexes_of_what_cannot_change_alone() -> None:
    """The rewrite of a stored response (its final write) sets neither its id nor its owner
    (its WHERE holds them) nor its `previous_response_id`: SQLite then leaves their indexes
    alone (fewer pages in each commit)."""
    from toolwire.store.database import _UPDATE_RESPONSE

    for update in _UPDATE_RESPONSE.values():
        assigned = update.sql.split(" WHERE ")[0].removeprefix("UPDATE responses SET ")
        columns = {part.split("=")[0] for part in assigned.split(", ")}
        assert columns == {
            "created_at",
            "status",
            "conversation_id",
            "body",
            "input_items",
            "history",
            "conversation_items",
            "stored_bytes",
            "upstream",
            "timeline",
        }
