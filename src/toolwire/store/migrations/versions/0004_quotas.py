"""Schema 4: per-key limits and budgets, operator keys, and the usage they are counted in
(`store/quotas.py`).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(
            sa.Column("operator", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("rpm", sa.Integer, nullable=True))
        batch.add_column(sa.Column("tpm", sa.Integer, nullable=True))
        batch.add_column(sa.Column("budget", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("budget_period", sa.String(10), nullable=True))
    op.create_table(
        "quota_usage",
        sa.Column("key_id", sa.String(40), primary_key=True),
        sa.Column("scope", sa.String(10), primary_key=True),
        sa.Column("starts", sa.BigInteger, primary_key=True),
        sa.Column("requests", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("quota_usage")
    with op.batch_alter_table("api_keys") as batch:
        for column in ("budget_period", "budget", "tpm", "rpm", "operator"):
            batch.drop_column(column)
