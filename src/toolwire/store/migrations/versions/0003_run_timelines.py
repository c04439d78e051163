"""Schema 3: run timelines for the `/ui` page (`store/timelines.py`).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_timelines",
        sa.Column("response_id", sa.String(80), primary_key=True),
        sa.Column("created_at", sa.Integer, nullable=False),
        sa.Column("entries", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_timelines")
