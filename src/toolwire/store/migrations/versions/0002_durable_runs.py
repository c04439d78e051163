"""Schema 2: durable runs and history by reference.

- `replicas` (live processes and their heartbeats) and `runs` (each running or queued response:
  its owner replica; for background responses the durable job);
- `responses.history` becomes nullable: new rows keep only their own items and link to what
  they continue; schema-1 rows keep their full copy, which the chain walk stops at;
- `responses.conversation_items`: how many of its conversation's items came before it;
- an index on `responses.previous_response_id` for the chain walk.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.alter_column("history", existing_type=sa.JSON, nullable=True)
        batch.add_column(sa.Column("conversation_items", sa.Integer, nullable=True))
    op.create_index("ix_responses_previous_response_id", "responses", ["previous_response_id"])
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("host", sa.String(300), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("response_id", sa.String(80), primary_key=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("replica_id", sa.String(40), nullable=True),
        sa.Column("request", sa.JSON, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_runs_replica_id", "runs", ["replica_id"])
    op.create_index("ix_runs_state_created_at", "runs", ["state", "created_at"])


def downgrade() -> None:
    op.drop_table("runs")
    op.drop_table("replicas")
    op.drop_index("ix_responses_previous_response_id", "responses")
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("conversation_items")
