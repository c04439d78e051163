"""Schema 8: fewer index pages in a response's write. Each index a row is in is one more
B-tree page for the commit to write (SQLite: one more WAL frame, and its checkpoint), and a
response's final write touched eleven to fifteen:

- `ix_item_index_response_id` is dropped: it served only a response's deletion, which now
  finds the response's entries by their key (its own items' ids), and it cost two pages a
  write (each entry's random place in it);
- `ix_responses_owner` is dropped: `ix_responses_owner_stored_bytes` begins with the same
  column and serves every lookup it did;
- `ix_responses_previous_response_id` holds only continuations (`previous_response_id IS
  NOT NULL`): it is read by equality, which both databases answer from a partial index.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_CONTINUATIONS = sa.text("previous_response_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_item_index_response_id", table_name="item_index")
    op.drop_index("ix_responses_owner", table_name="responses")
    op.drop_index("ix_responses_previous_response_id", table_name="responses")
    op.create_index(
        "ix_responses_previous_response_id",
        "responses",
        ["previous_response_id"],
        sqlite_where=_CONTINUATIONS,
        postgresql_where=_CONTINUATIONS,
    )


def downgrade() -> None:
    op.drop_index("ix_responses_previous_response_id", table_name="responses")
    op.create_index("ix_responses_previous_response_id", "responses", ["previous_response_id"])
    op.create_index("ix_responses_owner", "responses", ["owner"])
    op.create_index("ix_item_index_response_id", "item_index", ["response_id"])
