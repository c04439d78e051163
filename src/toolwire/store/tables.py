"""The schema: one SQLAlchemy Core metadata for SQLite (default) and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

#: Longer item ids (only a plain response's input may carry them) are not indexed.
ITEM_INDEX_ID_LENGTH = 200
#: A model server's name as stored (longer ones are cut: they are only routing hints).
UPSTREAM_NAME_LENGTH = 200

#: The rows `ix_responses_previous_response_id` holds (schema 8).
CONTINUATIONS = sa.text("previous_response_id IS NOT NULL")
#: The rows `ix_responses_owner_stored_bytes` holds (schema 10): those of a key.
KEYED = sa.text("owner IS NOT NULL")

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
    # Schema 1 copied every item the model had seen into each response (quadratic growth);
    # since schema 2 it is null and history is by reference: the chain of
    # `previous_response_id`s, each response holding only its own input and output items,
    # ending at a schema-1 row (whose copy is kept) or at the first `conversation_items`
    # items of its conversation.
    sa.Column("history", sa.JSON, nullable=True),
    # the id of the API key that created it; null when the server ran without keys (a
    # key's rows found by `ix_responses_owner_stored_bytes`, whose first column it is:
    # schema 8 dropped its own index)
    sa.Column("owner", sa.String(40), nullable=True),
    # how many of its conversation's items came before it (responses in a conversation)
    sa.Column("conversation_items", sa.Integer, nullable=True),
    # schema 6: the bytes of its JSON (body, input items, history), for the owner's storage
    # quota (`store/storage.py`: a sum over this index); null on rows from before
    sa.Column("stored_bytes", sa.BigInteger, nullable=True),
    # schema 7: the model server that served it, when toolwire routes over several
    # (upstream/fleet/): a continuation goes back there
    sa.Column("upstream", sa.String(UPSTREAM_NAME_LENGTH), nullable=True),
    # schema 9: the run's `/ui` timeline (`observe/timeline.py`), written with the row by its
    # final write (its own table cost that write a statement and two B-tree pages); null
    # until the run ends, or when none was kept
    sa.Column("timeline", sa.JSON, nullable=True),
    # schema 8: partial, only continuations are in it (a lookup by a response's id is an
    # equality, which both databases read from a partial index; a first response costs no
    # index write). PostgreSQL's spelling is added by `store/postgres.py`: naming it here
    # would import that dialect into every SQLite server.
    sa.Index(
        "ix_responses_previous_response_id",
        "previous_response_id",
        sqlite_where=CONTINUATIONS,
    ),
    # schema 10: partial, only a key's rows are in it (each lookup is by a key's id, an
    # equality both databases read from it; a server without keys writes no page of it)
    sa.Index("ix_responses_owner_stored_bytes", "owner", "stored_bytes", sqlite_where=KEYED),
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("owner", sa.String(40), nullable=True, index=True),
    # schema 7: the model server that served the conversation's last response (fleet)
    sa.Column("upstream", sa.String(UPSTREAM_NAME_LENGTH), nullable=True),
)

conversation_items = sa.Table(
    "conversation_items",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(80), nullable=False),
    sa.Column(
        "conversation_id",
        sa.String(80),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("item", sa.JSON, nullable=False),
    # schema 5: the conversation's owner (`store/owner.py` owner_key: "" without keys). Item
    # ids are unique per owner, not across the database: another key's ids neither collide
    # nor can be probed.
    sa.Column("owner", sa.String(40), nullable=False, server_default=""),
    # schema 6: the item's JSON bytes, for the owner's storage quota (`store/storage.py`)
    sa.Column("stored_bytes", sa.Integer, nullable=True),
    sa.UniqueConstraint("owner", "id", name="uq_conversation_items_owner_id"),
    sa.Index("ix_conversation_items_owner_stored_bytes", "owner", "stored_bytes"),
)

item_index = sa.Table(
    "item_index",
    metadata,
    sa.Column("owner", sa.String(40), primary_key=True),  # owner_key: "" without keys
    sa.Column("item_id", sa.String(ITEM_INDEX_ID_LENGTH), primary_key=True),
    # the newest of the owner's responses holding the item (in its input or output); not
    # indexed since schema 8: a deleted response's entries are found by its own items' ids
    sa.Column("response_id", sa.String(80), nullable=False),
    # schema 10: on SQLite the rows are the key's B-tree (no rowid table beside it: one page
    # less a response's write); PostgreSQL has no such option
    sqlite_with_rowid=False,
)
"""Schema 5: where each of an owner's response items lives, so that `item_reference`
resolution (`store/items.py`) is one indexed query instead of a search through the owner's
stored responses. Written in the transaction that writes the response row. Conversation
items need no entry: `conversation_items` is itself indexed on (owner, id)."""

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("approval_request_id", sa.String(80), primary_key=True),
    sa.Column("response_id", sa.String(80), nullable=False),
    sa.Column("approve", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
)


api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # "key_…": what `owner` columns hold
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("prefix", sa.String(20), nullable=False),  # shown by `keys list`, never enough to use
    sa.Column("hash", sa.String(64), nullable=False, unique=True),  # SHA-256 hex of the key
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("revoked_at", sa.Integer, nullable=True),
    # schema 4 (store/quotas.py): an operator key sees every tenant in /ui and reads /metrics;
    # null limits are no limit
    sa.Column("operator", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("rpm", sa.Integer, nullable=True),  # requests per minute
    sa.Column("tpm", sa.Integer, nullable=True),  # tokens per minute
    sa.Column("budget", sa.BigInteger, nullable=True),  # tokens per budget period
    sa.Column("budget_period", sa.String(10), nullable=True),  # hour | day | week | month
)

quota_usage = sa.Table(
    "quota_usage",
    metadata,
    sa.Column("key_id", sa.String(40), primary_key=True),
    sa.Column("scope", sa.String(10), primary_key=True),  # minute | budget
    sa.Column("starts", sa.BigInteger, primary_key=True),  # the window's start, Unix seconds
    sa.Column("requests", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
)
"""What each key spent in its current minute and budget period (`store/quotas.py`): one row a
key and window, changed only by conditional UPDATEs, so replicas share it."""

server_secrets = sa.Table(
    "server_secrets",
    metadata,
    sa.Column("name", sa.String(80), primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
)
"""Secrets every replica shares (the key approval request ids are signed with)."""

replicas = sa.Table(
    "replicas",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    # hostname and PID namespace: a replica on the same host whose pid is gone is dead at once
    sa.Column("host", sa.String(300), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
)
"""The live processes (`toolwire serve` replicas) on this database and their heartbeats."""

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("response_id", sa.String(80), primary_key=True),
    sa.Column("kind", sa.String(20), nullable=False),  # foreground | background
    sa.Column("state", sa.String(20), nullable=False),  # queued | running
    # the replica whose lease (its heartbeat in `replicas`) keeps the run alive
    sa.Column("replica_id", sa.String(40), nullable=True, index=True),
    # background: the request body and its owner, so that any replica can run it
    sa.Column("request", sa.JSON, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Index("ix_runs_state_created_at", "state", "created_at"),
)
"""Every response running or queued: its owner (a replica) and, for background responses,
the durable job (see `store/runs.py`)."""

sealed_tools = sa.Table(
    "sealed_tools",
    metadata,
    sa.Column("response_id", sa.String(80), primary_key=True),
    sa.Column("owner", sa.String(40), nullable=False),  # owner_key: "" without keys
    sa.Column("sealed", sa.Text, nullable=False),
)
"""Schema 5: the credentialed MCP tools of a response that asked for approval, sealed
(`server/responses/prepare/approval_tools.py`), so that approving from `/ui` continues with the real
credentials, not the redacted echo, for the same owner only."""

#: Schema 3-8's place for timelines, kept (empty, unread) so that a replica still on schema 8
#: during a rolling restart can write its responses: their timelines there are not shown by
#: `/ui`. A later schema drops it; a new database has it too, as a migrated one does.
run_timelines = sa.Table(
    "run_timelines",
    metadata,
    sa.Column("response_id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("entries", sa.JSON, nullable=False),
)
