"""The hot-path statements, compiled once, run on SQLite's own connection.

A response's writes (its row, its item index, its run row, its timeline) are the same few
statements every time. Through SQLAlchemy's execution each costs 50-100 µs of Python (cache
lookup, execution context, result set-up) around a statement SQLite itself runs in a few
microseconds, so a response's write cost more in SQLAlchemy than in SQLite
(`benchmarks/db_write.py`). A `Prepared` statement is a Core statement (the schema stays the
one in `tables.py`) compiled once for SQLite, with its parameters' order and which of them are
JSON; on SQLite it goes straight to the driver's cursor, inside the transaction SQLAlchemy
began; on another database it is an ordinary `connection.execute`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

_SQLITE = sqlite.dialect()


def _json(value: Any) -> str:
    """As the engines serialize JSON columns (`None` as JSON `null`, like SQLAlchemy)."""
    return orjson.dumps(value).decode()


class Prepared:
    """`statement` compiled for SQLite once; `run` / `run_many` on a `Store.transact` job's
    connection. Parameters are by bind name (a column's name, or a `bindparam`'s)."""

    __slots__ = ("json", "only", "order", "sql", "statement")

    def __init__(self, statement: sa.Executable, *, columns: Iterable[str] | None = None) -> None:
        """`columns`: an insert's or update's columns, when not all of the table's (each
        engine is then given only the parameters the statement binds)."""
        self.statement = statement
        keys = None if columns is None else list(columns)
        compiled = statement.compile(dialect=_SQLITE, column_keys=keys)  # type: ignore[attr-defined]
        self.sql: str = str(compiled)
        self.order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.only = keys is not None
        self.json = frozenset(
            name for name, bind in compiled.binds.items() if isinstance(bind.type, sa.JSON)
        )

    def _params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """For SQLAlchemy's execution, which sets every column it is given a value for."""
        return {name: params[name] for name in self.order} if self.only else dict(params)

    def _row(self, params: Mapping[str, Any]) -> list[Any]:
        json = self.json
        return [_json(params[name]) if name in json else params[name] for name in self.order]

    def run(self, connection: sa.Connection, params: Mapping[str, Any]) -> int:
        """Execute with `params`; the number of rows it changed."""
        driver = _sqlite3(connection)
        if driver is None:
            return connection.execute(self.statement, self._params(params)).rowcount
        return int(driver.execute(self.sql, self._row(params)).rowcount)

    def run_many(self, connection: sa.Connection, rows: Iterable[Mapping[str, Any]]) -> None:
        rows = list(rows)
        driver = _sqlite3(connection)
        if driver is None:
            connection.execute(self.statement, [self._params(row) for row in rows])
            return
        driver.executemany(self.sql, [self._row(row) for row in rows])


def _sqlite3(connection: sa.Connection) -> sqlite3.Connection | None:
    """The stdlib driver's connection under `connection` (a SQLite database's one engine,
    `store/sqlite.py`), or None: another database (PostgreSQL's `run_sync`)."""
    driver = connection.connection.driver_connection
    return driver if isinstance(driver, sqlite3.Connection) else None
