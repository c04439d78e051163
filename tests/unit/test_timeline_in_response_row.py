"""Schema 9: a run's `/ui` timeline is a column of its response's row (one row written, not
two); the migration copies the stored timelines into it and keeps their table for replicas
still on schema 8 (their writes go on), and its downgrade copies the new ones back."""

from __future__ import annotations

from pathlib import Path

import orjson
import sqlalchemy as sa
from alembic import command

from toolwire.store import migrate
from toolwire.store.database import Store

ENTRIES = [{"type": "run_started", "t": 0.0}, {"type": "finished", "t": 0.5}]


async def test_the_timeline_is_stored_in_the_response_row(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 't.db'}")
    try:
        for response_id, timeline in (
            ("resp_a", orjson.Fragment(orjson.dumps(ENTRIES))),
            ("resp_b", None),
        ):
            await store.save_response(
                {"id": response_id, "created_at": 1, "status": "completed", "output": []},  # type: ignore[typeddict-item]
                input_items=[],
                conversation_id=None,
                fresh=True,
                timeline=timeline,
            )
        timelines = await store.read(
            lambda c: c.execute(sa.text("SELECT count(*) FROM run_timelines")).scalar()
        )
        assert timelines == 0  # the row's column, not the old table
        assert await store.ui.timeline("resp_a") == ENTRIES
        assert await store.ui.timeline("resp_b") is None
        assert await store.ui.timeline("resp_missing") is None
        record = await store.get_response_record("resp_a")
        assert record is not None and "timeline" not in record  # `/ui` reads it alone
    finally:
        await store.close()


def test_the_migration_moves_the_timelines_and_back(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    row = "INSERT INTO responses (id, created_at, status, body, input_items) VALUES"
    with engine.begin() as connection:
        migrate.upgrade(connection, "0008")
        connection.execute(sa.text(f"{row} ('resp_a', 1, 'completed', '{{}}', '[]')"))
        connection.execute(sa.text(f"{row} ('resp_b', 2, 'completed', '{{}}', '[]')"))
        connection.execute(
            sa.text("INSERT INTO run_timelines VALUES ('resp_a', 1, :entries)"),
            {"entries": orjson.dumps(ENTRIES).decode()},
        )
        migrate.upgrade(connection, "0009")
        # a replica still on schema 8 writes its timelines here while the others restart
        connection.execute(
            sa.text("INSERT INTO run_timelines VALUES ('resp_c', 3, :entries)"),
            {"entries": orjson.dumps(ENTRIES[:1]).decode()},
        )
        moved = connection.execute(sa.text("SELECT id, timeline FROM responses ORDER BY id"))
        assert [(r.id, r.timeline and orjson.loads(r.timeline)) for r in moved] == [
            ("resp_a", ENTRIES),
            ("resp_b", None),
        ]
        connection.execute(sa.text("UPDATE responses SET timeline = 'null' WHERE id = 'resp_b'"))
        connection.execute(sa.text(f"{row} ('resp_d', 4, 'completed', '{{}}', '[]')"))
        connection.execute(
            sa.text("UPDATE responses SET timeline = :entries WHERE id = 'resp_d'"),
            {"entries": orjson.dumps(ENTRIES).decode()},
        )
        command.downgrade(migrate._config(connection), "0008")
        back = connection.execute(
            sa.text("SELECT response_id, entries FROM run_timelines ORDER BY response_id")
        )
        assert [(r.response_id, orjson.loads(r.entries)) for r in back] == [
            ("resp_a", ENTRIES),
            ("resp_c", ENTRIES[:1]),
            ("resp_d", ENTRIES),
        ]
        columns = [c["name"] for c in sa.inspect(connection).get_columns("responses")]
        assert "timeline" not in columns
    engine.dispose()
