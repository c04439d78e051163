"""Alembic's environment for toolwire's store: always run in process, on the connection
`store/migrate.py` passes in `config.attributes["connection"]` (no alembic.ini)."""

from __future__ import annotations

from alembic import context

from toolwire.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,  # SQLite alters tables by copying them
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
