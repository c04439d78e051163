"""Schema 1: the store as it was before migrations existed.

Databases made before Alembic come in two shapes: the first release (no `owner` columns, no
`api_keys`, no `server_secrets`) and the one with the security work (which `Store.open` used to
patch with an ad-hoc ADD COLUMN). This revision brings either, or an empty database, to
schema 1: it creates what is missing and adds the `owner` columns where they are absent.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    existing = set(sa.inspect(bind).get_table_names())
    if "responses" not in existing:
        op.create_table(
            "responses",
            sa.Column("id", sa.String(80), primary_key=True),
            sa.Column("created_at", sa.Integer, nullable=False),
            sa.Column("status", sa.String(20), nullable=False),
            sa.Column("previous_response_id", sa.String(80), nullable=True),
            sa.Column("conversation_id", sa.String(80), nullable=True),
            sa.Column("body", sa.JSON, nullable=False),
            sa.Column("input_items", sa.JSON, nullable=False),
            sa.Column("history", sa.JSON, nullable=False),
        )
    if "conversations" not in existing:
        op.create_table(
            "conversations",
            sa.Column("id", sa.String(80), primary_key=True),
            sa.Column("created_at", sa.Integer, nullable=False),
            sa.Column("metadata", sa.JSON, nullable=False),
        )
    if "conversation_items" not in existing:
        op.create_table(
            "conversation_items",
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("id", sa.String(80), nullable=False, unique=True),
            sa.Column(
                "conversation_id",
                sa.String(80),
                sa.ForeignKey("conversations.id", ondelete="CASCADE"),
                nullable=False,
            ),
            sa.Column("created_at", sa.Integer, nullable=False),
            sa.Column("item", sa.JSON, nullable=False),
        )
        op.create_index(
            "ix_conversation_items_conversation_id", "conversation_items", ["conversation_id"]
        )
    if "approvals" not in existing:
        op.create_table(
            "approvals",
            sa.Column("approval_request_id", sa.String(80), primary_key=True),
            sa.Column("response_id", sa.String(80), nullable=False),
            sa.Column("approve", sa.Boolean, nullable=False),
            sa.Column("created_at", sa.Integer, nullable=False),
        )
    for table in ("responses", "conversations"):
        columns = {column["name"] for column in sa.inspect(bind).get_columns(table)}
        if "owner" not in columns:
            with op.batch_alter_table(table) as batch:
                batch.add_column(sa.Column("owner", sa.String(40), nullable=True))
        indexes = {index["name"] for index in sa.inspect(bind).get_indexes(table)}
        if f"ix_{table}_owner" not in indexes:
            op.create_index(f"ix_{table}_owner", table, ["owner"])
    if "api_keys" not in existing:
        op.create_table(
            "api_keys",
            sa.Column("id", sa.String(40), primary_key=True),
            sa.Column("name", sa.String(200), nullable=False),
            sa.Column("prefix", sa.String(20), nullable=False),
            sa.Column("hash", sa.String(64), nullable=False, unique=True),
            sa.Column("created_at", sa.Integer, nullable=False),
            sa.Column("revoked_at", sa.Integer, nullable=True),
        )
    if "server_secrets" not in existing:
        op.create_table(
            "server_secrets",
            sa.Column("name", sa.String(80), primary_key=True),
            sa.Column("value", sa.LargeBinary, nullable=False),
        )


def downgrade() -> None:
    raise NotImplementedError("schema 1 is the oldest schema")
