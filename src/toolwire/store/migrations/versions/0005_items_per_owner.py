"""Schema 5: item ids unique per owner, an index of where each response item lives, and the
sealed MCP credentials of responses awaiting approval (`sealed_tools`).

`conversation_items.id` was unique across the database, so one key could learn another's item
ids (a `duplicate_item_id` answer) and take its next one first. It becomes unique per owner:
the table gets an `owner` column (the conversation's owner, "" without keys) and a unique
constraint on (owner, id). The table is rebuilt from a given definition (batch mode,
`recreate="always"`) so that the old unnamed constraint goes the same way on SQLite and
PostgreSQL. `item_index` maps (owner, item id) to the newest response holding the item and
is filled from the stored responses.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: Item ids longer than this are not indexed (as in store/tables.py at schema 5).
_ID_LENGTH = 200


def _items_table(*, unique_id: bool) -> sa.Table:
    """conversation_items as schema 4 left it (with or without the global unique id)."""
    metadata = sa.MetaData()
    sa.Table("conversations", metadata, sa.Column("id", sa.String(80), primary_key=True))
    return sa.Table(
        "conversation_items",
        metadata,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(80), nullable=False, unique=unique_id),
        sa.Column(
            "conversation_id",
            sa.String(80),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.Integer, nullable=False),
        sa.Column("item", sa.JSON, nullable=False),
        sa.Index("ix_conversation_items_conversation_id", "conversation_id"),
    )


def _item_ids(items: list[Any]) -> list[str]:
    return [
        item["id"]
        for item in items
        if isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and len(item["id"]) <= _ID_LENGTH
        and item.get("type") != "item_reference"
    ]


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table(
        "conversation_items", recreate="always", copy_from=_items_table(unique_id=False)
    ) as batch:
        batch.add_column(sa.Column("owner", sa.String(40), nullable=False, server_default=""))
        batch.create_unique_constraint("uq_conversation_items_owner_id", ["owner", "id"])
    op.execute(
        "UPDATE conversation_items SET owner = COALESCE((SELECT conversations.owner FROM "
        "conversations WHERE conversations.id = conversation_items.conversation_id), '')"
    )
    index = op.create_table(
        "item_index",
        sa.Column("owner", sa.String(40), primary_key=True),
        sa.Column("item_id", sa.String(_ID_LENGTH), primary_key=True),
        sa.Column("response_id", sa.String(80), nullable=False),
    )
    op.create_index("ix_item_index_response_id", "item_index", ["response_id"])
    op.create_table(
        "sealed_tools",
        sa.Column("response_id", sa.String(80), primary_key=True),
        sa.Column("owner", sa.String(40), nullable=False),
        sa.Column("sealed", sa.Text, nullable=False),
    )
    responses = sa.table(
        "responses",
        sa.column("id", sa.String),
        sa.column("owner", sa.String),
        sa.column("status", sa.String),
        sa.column("created_at", sa.Integer),
        sa.column("body", sa.JSON),
        sa.column("input_items", sa.JSON),
    )
    where: dict[tuple[str, str], str] = {}  # the newest response wins
    rows = bind.execute(
        sa.select(responses)
        .where(responses.c.status != "deleted")
        .order_by(responses.c.created_at, responses.c.id)
    )
    for row in rows:
        owner = row.owner or ""
        output = (row.body or {}).get("output") or []
        for item_id in _item_ids([*output, *(row.input_items or [])]):
            where[(owner, item_id)] = row.id
    if where:
        op.bulk_insert(
            index,
            [
                {"owner": owner, "item_id": item_id, "response_id": response_id}
                for (owner, item_id), response_id in where.items()
            ],
        )


def downgrade() -> None:
    op.drop_table("sealed_tools")
    op.drop_index("ix_item_index_response_id", table_name="item_index")
    op.drop_table("item_index")
    with op.batch_alter_table(
        "conversation_items", recreate="always", copy_from=_items_table(unique_id=True)
    ):
        pass
