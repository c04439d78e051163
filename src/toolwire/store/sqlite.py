"""The one engine of a SQLite database, and the roles its connections play.

One synchronous `Engine` (the stdlib driver, pysqlite) per database. Its connections serve the
writer's two (inline on the event loop, and the writer thread: `store/writer.py`) and the
reader threads' (`store/readers.py`); what a connection may do is its role, an execution option
set when it is opened, and the `begin` hook below sets it up before each transaction (the
writer's inline transactions call `begin` itself, on the driver: `store/writer.py`):

- `read` (the default, so a connection opened any other way reads only): `PRAGMA query_only`
  makes SQLite refuse any write ("attempt to write a readonly database"), and its transaction
  is a plain (deferred) `BEGIN`: a snapshot in WAL mode, which never waits for the writer.
- `write` (the writer thread): `BEGIN IMMEDIATE` takes the file's write lock up front, so a
  transaction never fails halfway upgrading a read lock; the busy timeout waits out another
  process holding it.
- `inline` (the event loop's own write connection): the same, with a busy timeout of zero (a
  locked file fails at once and the job goes to the thread) and no automatic WAL checkpoint
  (the fsync happens on the thread, never on the loop).

A role's pragmas are set when a connection takes it, remembered in the connection's pool record
(cleared when the driver connection is replaced), so a transaction costs one `BEGIN` more than
the driver's own. An in-memory database has one driver connection (`StaticPool`) that every
role shares, on the event loop's thread only (`store/engine.py`).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

import orjson
import sqlalchemy as sa
from sqlalchemy import event

Role = Literal["read", "write", "inline"]
#: The execution option naming a connection's role.
ROLE = "toolwire_role"

#: SQLite's settings on every connection, after its busy timeout.
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)
BUSY_TIMEOUT_MS = 30_000
#: SQLite's own default: a checkpoint once the WAL holds this many pages.
AUTOCHECKPOINT_PAGES = 1000

_SETUP: dict[Role, tuple[str, ...]] = {
    "read": ("PRAGMA query_only=1",),
    "write": (
        "PRAGMA query_only=0",
        f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
        f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}",
    ),
    "inline": ("PRAGMA query_only=0", "PRAGMA busy_timeout=0", "PRAGMA wal_autocheckpoint=0"),
}
_BEGIN: dict[Role, str] = {"read": "BEGIN", "write": "BEGIN IMMEDIATE", "inline": "BEGIN IMMEDIATE"}

# A `None` parameter is bound as NULL either way, but with no adapter of its own the driver
# first looks for `__adapt__` and `__conform__` on it: ~3k instructions a parameter, and a
# response's row binds five. Adapted to itself (an empty dict's `get`: None for any value,
# in C, no Python call), it goes straight to NULL. The driver's adapters are its module's.
_NOTHING: dict[object, None] = {}
sqlite3.register_adapter(type(None), _NOTHING.get)


def apply_pragmas(dbapi_connection: Any) -> None:
    """A new driver connection's settings: the busy timeout first (setting up the journal may
    wait for another process)."""
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    for pragma in PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def sqlite_engine(url: str, *, memory: bool, connections: int) -> sa.Engine:
    """The database's engine: `connections` pooled for a file (each held by one reader or
    writer for the store's life); for `memory`, the one connection every role shares."""
    options: dict[str, Any] = (
        {"poolclass": sa.pool.StaticPool, "connect_args": {"check_same_thread": False}}
        if memory
        else {"pool_size": connections, "max_overflow": 2}
    )
    engine = sa.create_engine(
        url,
        json_serializer=lambda value: orjson.dumps(value).decode(),
        json_deserializer=orjson.loads,
        **options,
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling off (it cannot nest savepoints): the `begin`
        # hook below starts each transaction, as the connection's role says.
        dbapi_connection.isolation_level = None
        apply_pragmas(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        role: Role = connection.get_execution_options().get(ROLE, "read")
        pooled = connection.connection
        driver = pooled.driver_connection
        if role == "inline" and driver is not None and driver.in_transaction:
            return  # the writer began it on the driver (`begin`): SQLAlchemy joins it
        begin(pooled, role)

    return engine


def begin(pooled: Any, role: Role) -> None:
    """Start `role`'s transaction on a pooled connection's driver (straight to it: SQLAlchemy's
    execution would cost more than the BEGIN), setting the role up if it is new there."""
    driver = pooled.driver_connection
    assert driver is not None
    if pooled.info.get(ROLE) != role:
        for pragma in _SETUP[role]:
            driver.execute(pragma)
        pooled.info[ROLE] = role
    driver.execute(_BEGIN[role])


def connect(engine: sa.Engine, role: Role) -> sa.Connection:
    """A connection of `engine` that plays `role` in every transaction it begins."""
    return engine.connect().execution_options(**{ROLE: role})
