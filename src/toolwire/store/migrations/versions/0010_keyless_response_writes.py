"""Schema 10: two B-tree pages fewer in a response's write (each is one more WAL frame for the
commit, and one more page for its checkpoint):

- `ix_responses_owner_stored_bytes` holds only a key's rows (`owner IS NOT NULL`): every
  lookup through it is by a key's id (the storage quota's sum, a key's responses), which both
  databases answer from a partial index; a response stored without a key no longer writes
  a page of it. A query for the rows without an owner reads the table, as it in effect did
  (those rows were all one entry of the index);
- on SQLite `item_index` is a `WITHOUT ROWID` table: its rows are its primary key's B-tree,
  where a rowid table kept them twice (the table and the key's own index). PostgreSQL has no
  such option; its table is unchanged.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_KEYED = sa.text("owner IS NOT NULL")
_ITEM_INDEX = """CREATE TABLE {name} (
    owner VARCHAR(40) NOT NULL,
    item_id VARCHAR(200) NOT NULL,
    response_id VARCHAR(80) NOT NULL,
    PRIMARY KEY (owner, item_id)
){options}"""


def _owner_index(where: sa.TextClause | None) -> None:
    op.drop_index("ix_responses_owner_stored_bytes", table_name="responses")
    op.create_index(
        "ix_responses_owner_stored_bytes",
        "responses",
        ["owner", "stored_bytes"],
        sqlite_where=where,
        postgresql_where=where,
    )


def _rebuild_item_index(options: str) -> None:
    """SQLite cannot change a table's rowid: the rows go to a new table of that kind."""
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(_ITEM_INDEX.format(name="item_index_new", options=options))
    op.execute(
        "INSERT INTO item_index_new (owner, item_id, response_id) "
        "SELECT owner, item_id, response_id FROM item_index"
    )
    op.execute("DROP TABLE item_index")
    op.execute("ALTER TABLE item_index_new RENAME TO item_index")


def upgrade() -> None:
    _owner_index(_KEYED)
    _rebuild_item_index(" WITHOUT ROWID")


def downgrade() -> None:
    _rebuild_item_index("")
    _owner_index(None)
