"""Schema 6: the bytes each stored response and conversation item takes (`stored_bytes`), so
that a key's stored bytes are one indexed sum (`store/storage.py`: the per-key storage quota).

Rows written before schema 6 have none (null): they are not counted.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.add_column(sa.Column("stored_bytes", sa.BigInteger, nullable=True))
    with op.batch_alter_table("conversation_items") as batch:
        batch.add_column(sa.Column("stored_bytes", sa.Integer, nullable=True))
    op.create_index("ix_responses_owner_stored_bytes", "responses", ["owner", "stored_bytes"])
    op.create_index(
        "ix_conversation_items_owner_stored_bytes",
        "conversation_items",
        ["owner", "stored_bytes"],
    )


def downgrade() -> None:
    op.drop_index("ix_conversation_items_owner_stored_bytes", "conversation_items")
    op.drop_index("ix_responses_owner_stored_bytes", "responses")
    with op.batch_alter_table("conversation_items") as batch:
        batch.drop_column("stored_bytes")
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("stored_bytes")
