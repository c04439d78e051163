"""Schema 10: a response stored without a key writes no page of the storage quota's index (it
holds a key's rows only, and the quota's sum still reads it alone), and on SQLite the item
index is its key's B-tree (`WITHOUT ROWID`), its rows kept once."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import command

from toolwire.store import migrate
from toolwire.store.database import Store


def _definition(connection: sa.Connection, name: str) -> str:
    """A table's or index's definition as the database keeps it."""
    query = (
        "SELECT sql FROM sqlite_master WHERE name = :name"
        if connection.dialect.name == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
    )
    return str(connection.execute(sa.text(query), {"name": name}).scalar_one())


def _quota_plan(connection: sa.Connection) -> str:
    query = "EXPLAIN QUERY PLAN SELECT sum(stored_bytes) FROM responses WHERE owner = 'key_a'"
    return " ".join(str(row[-1]) for row in connection.execute(sa.text(query)))


async def test_only_a_key_s_responses_are_in_the_quota_s_index(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        index = await store.read(lambda c: _definition(c, "ix_responses_owner_stored_bytes"))
        assert "owner IS NOT NULL" in index
        if database_url.startswith("sqlite"):
            # the quota's sum is answered from the index alone
            assert "COVERING INDEX ix_responses_owner_stored_bytes" in await store.read(_quota_plan)
            assert "WITHOUT ROWID" in await store.read(lambda c: _definition(c, "item_index"))
        for owner in (None, "key_a"):
            await store.save_response(
                {"id": f"resp_{owner}", "created_at": 1, "status": "completed", "output": []},  # type: ignore[typeddict-item]
                input_items=[],
                conversation_id=None,
                owner=owner,
            )
        assert await store.storage.used("key_a") > 0
    finally:
        await store.close()


def test_the_migration_s_downgrade_rebuilds_the_item_index_with_its_rows(tmp_path: Any) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    with engine.begin() as connection:
        migrate.upgrade(connection, "0010")
        connection.execute(sa.text("INSERT INTO item_index VALUES ('', 'msg_a', 'resp_a')"))
        command.downgrade(migrate._config(connection), "0009")
        assert "WITHOUT ROWID" not in _definition(connection, "item_index")
        assert "WHERE" not in _definition(connection, "ix_responses_owner_stored_bytes")
        rows = connection.execute(sa.text("SELECT owner, item_id, response_id FROM item_index"))
        assert [tuple(row) for row in rows] == [("", "msg_a", "resp_a")]
        migrate.upgrade(connection, "0010")
        assert "WITHOUT ROWID" in _definition(connection, "item_index")
    engine.dispose()
