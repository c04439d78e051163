"""A `None` parameter goes to SQLite as NULL through its own adapter (`store/sqlite.py`), so
the driver does not look for `__adapt__` / `__conform__` on each one; what is stored is the
same NULL."""

from __future__ import annotations

import sqlite3

import toolwire.store.sqlite  # noqa: F401  (registers the adapter)


def test_none_has_its_own_adapter() -> None:
    assert (type(None), sqlite3.PrepareProtocol) in sqlite3.adapters


def test_a_none_parameter_is_stored_as_null() -> None:
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("CREATE TABLE t (a, b)")
        connection.execute("INSERT INTO t VALUES (?, ?)", (None, "x"))
        connection.executemany("INSERT INTO t VALUES (:a, :b)", [{"a": None, "b": None}])
        rows = connection.execute("SELECT typeof(a), typeof(b), a, b FROM t").fetchall()
        assert rows == [("null", "text", None, "x"), ("null", "null", None, None)]
    finally:
        connection.close()
