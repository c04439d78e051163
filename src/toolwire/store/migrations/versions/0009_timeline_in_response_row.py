"""Schema 9: a run's `/ui` timeline is a column of its response's row, not a row of its own
table (`run_timelines`): the response's final write then inserts one row, not two, and its
commit writes two B-tree pages fewer (that table's leaf and its primary key's). A JSON
`/v1/responses` answer: 21.9 -> 19.2 pwrite calls (WAL frames), ~-1.8% instructions.

`run_timelines` stays, emptied and unread: a replica still on schema 8 during a rolling
restart writes a response's timeline there in the response's own transaction, which would
fail (and lose the response) were the table gone. Its timelines written then are not shown
by `/ui` (they are diagnostics, not the response); a later schema drops the table.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("responses", sa.Column("timeline", sa.JSON, nullable=True))
    op.execute(
        "UPDATE responses SET timeline = (SELECT entries FROM run_timelines"
        " WHERE run_timelines.response_id = responses.id)"
        " WHERE id IN (SELECT response_id FROM run_timelines)"
    )
    op.execute("DELETE FROM run_timelines")  # one copy of each timeline: the row's


def downgrade() -> None:
    op.execute(
        "INSERT INTO run_timelines (response_id, created_at, entries)"
        " SELECT id, created_at, timeline FROM responses"
        " WHERE timeline IS NOT NULL AND CAST(timeline AS TEXT) != 'null'"
        " AND id NOT IN (SELECT response_id FROM run_timelines)"
    )
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("timeline")
