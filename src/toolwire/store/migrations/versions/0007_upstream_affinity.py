"""Schema 7: which model server served a response, and a conversation's last turn
(`upstream`), so that a continuation goes back to the server holding its prompt prefix, on
whichever toolwire replica it arrives (docs/fleet.md). Null for rows written before, and for
a gateway that fronts a single upstream.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: As in store/tables.py at schema 7.
_NAME_LENGTH = 200


def upgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.add_column(sa.Column("upstream", sa.String(_NAME_LENGTH), nullable=True))
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("upstream", sa.String(_NAME_LENGTH), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("upstream")
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("upstream")
