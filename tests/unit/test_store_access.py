"""One way into the database (`store/engine.py`): every write through `Store.transact`, every
read through `Store.read`, one engine per database.

Checked two ways. In the code: SQL and connections stay in `store/` (nothing else imports
SQLAlchemy or the tables, or reaches for the store's engine), and inside `store/` only the
modules that run jobs open connections or transactions. At run time: a read job that tries to
write is refused by the database itself, and a store, however it is used (reads on several
threads at once, inline writes, writes queued on the writer thread, migrations), opens
connections from one engine only.
"""

from __future__ import annotations

import ast
import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from toolwire.store.database import Store
from toolwire.store.tables import conversations

SRC = Path(__file__).resolve().parents[2] / "src" / "toolwire"
STORE = SRC / "store"
#: The modules that open connections and transactions: where jobs run.
RUN_JOBS = {"engine.py", "sqlite.py", "writer.py", "readers.py", "postgres.py", "notify.py"}
#: Calls that open an engine, a connection or a transaction, or run a job on one.
OPENING = {
    "connect",
    "begin",
    "begin_nested",
    "run_sync",
    "create_engine",
    "create_async_engine",
    "raw_connection",
    "get_raw_connection",
}
#: Outside `store/`: names the CLI's error messages for database errors (no SQL).
SQLALCHEMY_ALLOWED = {SRC / "cli_errors.py"}


def _python_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imported(tree: ast.AST) -> set[str]:
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            named.add(node.module)
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
    return named


def _names_store(node: ast.expr) -> bool:
    """`store`, `self.store`, `runtime.store`: a Store, by its usual names."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("store", "_store")


def test_sql_and_connections_stay_in_the_store() -> None:
    """Outside `store/`, no module imports SQLAlchemy or the tables, nor touches the store's
    engine or database object: the server calls store methods."""
    found = []
    for path in _python_files(SRC):
        if STORE in path.parents:
            continue
        tree = ast.parse(path.read_text())
        where = path.relative_to(SRC)
        for name in _imported(tree):
            if name.split(".")[0] == "sqlalchemy" and path not in SQLALCHEMY_ALLOWED:
                found.append(f"{where} imports {name}")
            if name.startswith(("toolwire.store.tables", "toolwire.store.prepared")):
                found.append(f"{where} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (
                node.attr == "engine" or (node.attr == "database" and _names_store(node.value))
            ):
                found.append(f"{where}:{node.lineno} reaches for .{node.attr}")
    assert found == []


def test_only_the_job_runners_open_connections() -> None:
    """Inside `store/`, connections and transactions are opened only where jobs run; every
    other module writes jobs (functions of a connection) and hands them to `read` /
    `transact`."""
    found = []
    for path in _python_files(STORE):
        if path.name in RUN_JOBS or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in OPENING:
                    found.append(f"store/{path.name}:{node.lineno} calls {name}")
    assert found == []


def _insert(conversation_id: str) -> Any:
    def job(connection: sa.Connection) -> None:
        connection.execute(
            conversations.insert().values(id=conversation_id, created_at=1, metadata={})
        )

    return job


async def _ids(store: Store) -> set[str]:
    query = sa.select(conversations.c.id)
    return await store.read(lambda connection: set(connection.scalars(query)))


async def test_a_read_job_cannot_write(database_url: str) -> None:
    """A write that bypasses `transact` (here: handed to `read`) is refused by the database
    (SQLite: `query_only`; PostgreSQL: a `READ ONLY` transaction) and leaves nothing."""
    store = await Store.open(database_url)
    try:
        with pytest.raises(sa.exc.DBAPIError, match=r"(?i)read-?only"):
            await store.read(_insert("conv_sneaked"))
        await store.transact(_insert("conv_written"))
        assert await _ids(store) == {"conv_written"}
    finally:
        await store.close()


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
async def test_one_engine_per_database(database_url: str, tmp_path: Path) -> None:
    """Opening (with its migration), reads on several threads at once, inline writes, writes
    queued behind another process's lock: every connection comes from one engine."""
    engines: set[int] = set()

    def opened(connection: sa.Connection) -> None:
        engines.add(id(connection.engine))

    event.listen(sa.Engine, "engine_connect", opened)
    try:
        store = await Store.open(database_url)
        try:
            await asyncio.gather(*(store.transact(_insert(f"conv_{n}")) for n in range(5)))
            ids = [f"conv_{n}" for n in range(8)]
            if database_url.startswith("sqlite"):
                path = database_url.removeprefix("sqlite:///")
                other = sqlite3.connect(path, isolation_level=None)
                other.execute("BEGIN IMMEDIATE")
                queued = asyncio.gather(*(store.transact(_insert(i)) for i in ids[5:]))
                await asyncio.sleep(0.05)
                other.execute("COMMIT")
                other.close()
                await queued
            found = await asyncio.gather(*(store.get_conversation(i) for i in ids))
            assert sum(row is not None for row in found) == (
                8 if database_url.startswith("sqlite") else 5
            )
            await store.keys.create("team")
            assert await store.keys.ever_used()
        finally:
            await store.close()
    finally:
        event.remove(sa.Engine, "engine_connect", opened)
    assert len(engines) == 1, engines


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_on_postgresql_a_write_lands_when_its_caller_is_cancelled(
    database_url: str,
) -> None:
    """As on SQLite's writer: a caller gone mid-write (a client that left) does not roll its
    write back."""
    store = await Store.open(database_url)
    try:

        def slow_insert(connection: sa.Connection) -> None:
            connection.execute(sa.text("SELECT pg_sleep(0.2)"))
            _insert("conv_kept")(connection)

        write = asyncio.create_task(store.transact(slow_insert))
        await asyncio.sleep(0.05)
        write.cancel()
        with pytest.raises(asyncio.CancelledError):
            await write
    finally:
        await store.close()  # waits for the write under way
    reopened = await Store.open(database_url)
    try:
        assert await _ids(reopened) == {"conv_kept"}
    finally:
        await reopened.close()
