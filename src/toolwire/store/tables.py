"""The schema: one SQLAlchemy Core metadata for SQLite (default) and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

responses = sa.Table(
    "responses",
    metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("previous_response_id", sa.String(80), nullable=True),
    sa.Column("conversation_id", sa.String(80), nullable=True),
    sa.Column("body", sa.JSON, nullable=False),  # the response object as clients see it
    sa.Column("input_items", sa.JSON, nullable=False),
    # every item the model had seen when the response ended: what a continuation starts from
    sa.Column("history", sa.JSON, nullable=False),
    # the id of the API key that created it; null when the server ran without keys
    sa.Column("owner", sa.String(40), nullable=True, index=True),
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("owner", sa.String(40), nullable=True, index=True),
)

conversation_items = sa.Table(
    "conversation_items",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(80), nullable=False, unique=True),
    sa.Column(
        "conversation_id",
        sa.String(80),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("item", sa.JSON, nullable=False),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("approval_request_id", sa.String(80), primary_key=True),
    sa.Column("response_id", sa.String(80), nullable=False),
    sa.Column("approve", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
)

#: Columns added after the first release: `Store.open` adds them to older databases.
ADDED_COLUMNS: tuple[tuple[sa.Table, str], ...] = ((responses, "owner"), (conversations, "owner"))

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # "key_…": what `owner` columns hold
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("prefix", sa.String(20), nullable=False),  # shown by `keys list`, never enough to use
    sa.Column("hash", sa.String(64), nullable=False, unique=True),  # SHA-256 hex of the key
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("revoked_at", sa.Integer, nullable=True),
)

server_secrets = sa.Table(
    "server_secrets",
    metadata,
    sa.Column("name", sa.String(80), primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
)
"""Secrets every replica shares (the key approval request ids are signed with)."""
