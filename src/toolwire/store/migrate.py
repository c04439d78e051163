"""Schema migrations (Alembic, run in process; the scripts are in `store/migrations/`).

`ensure_schema` is what `Store.open` runs: an empty database gets the current schema at once
(created from `tables.metadata`, stamped at the head revision); an older one is upgraded (or,
with `migrate=False`, refused with the command that upgrades it). On PostgreSQL the check runs
under an advisory lock, so replicas starting together migrate once.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from toolwire.errors import ConfigError
from toolwire.store.tables import metadata

_LOCATION = str(Path(__file__).parent / "migrations")
_ADVISORY_LOCK = 0x746F6F6C  # "tool"


def _config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", _LOCATION)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head() -> str:
    revision = _script().get_current_head()
    assert revision is not None
    return revision


def current(connection: sa.Connection) -> str | None:
    """The database's revision; None for an empty database or one from before migrations."""
    return MigrationContext.configure(connection).get_current_revision()


def ensure_schema(connection: sa.Connection, *, migrate: bool = True) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))
    revision = current(connection)
    if revision == head():
        return
    if revision is None and not sa.inspect(connection).get_table_names():
        metadata.create_all(connection)
        MigrationContext.configure(connection).stamp(_script(), "head")
        return
    if not migrate:
        raise ConfigError(
            f"the database schema is at revision {revision or '(before migrations)'}, this "
            f"toolwire needs {head()}: run `toolwire db upgrade` (or start without --no-migrate)"
        )
    upgrade(connection)


def upgrade(connection: sa.Connection, target: str = "head") -> None:
    command.upgrade(_config(connection), target)
