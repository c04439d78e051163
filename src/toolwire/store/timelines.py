"""Run timelines (`observe/timeline.py`): their table and their write, in a response's final
transaction. `/ui` reads them (`store/ui_queries.py`).

Its own table on the shared metadata (created with the others by `Store.open`), so the
responses table and its writes stay as they are.
"""

from __future__ import annotations

import orjson
import sqlalchemy as sa

from toolwire.store.prepared import Prepared
from toolwire.store.tables import metadata
from toolwire.wire.timeline import TimelineEntry

run_timelines = sa.Table(
    "run_timelines",
    metadata,
    sa.Column("response_id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("entries", sa.JSON, nullable=False),
)


_INSERT = Prepared(run_timelines.insert())  # compiled once: `store/prepared.py`


class TimelineStore:
    """A run's timeline, written by the response recorder in its final transaction."""

    @staticmethod
    def save_in(
        connection: sa.Connection,
        response_id: str,
        created_at: int,
        entries: list[TimelineEntry] | orjson.Fragment,
        *,
        fresh: bool = False,
    ) -> None:
        """In the caller's transaction (the response's final write): the run's timeline
        (`entries`, or their JSON already serialized: written as it is); `fresh`: no timeline
        was stored for this response yet (one insert)."""
        values = {"response_id": response_id, "created_at": created_at, "entries": entries}
        if fresh:
            _INSERT.run(connection, values)
            return
        updated = connection.execute(
            run_timelines.update()
            .where(run_timelines.c.response_id == response_id)
            .values(**values)
        )
        if updated.rowcount == 0:
            connection.execute(run_timelines.insert().values(**values))
