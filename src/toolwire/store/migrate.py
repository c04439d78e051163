"""Schema migrations (Alembic, run in process; the scripts are in `store/migrations/`).

`ensure_schema` is what `Store.open` runs, a write job on the database's one engine (off the
event loop): an empty database gets the current schema at once (created from
`tables.metadata`, stamped at the head revision); an older one is upgraded (or, with
`migrate=False`, refused with the command that upgrades it). On PostgreSQL the check runs
under an advisory lock, so replicas starting together migrate once.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from toolwire.errors import ConfigError
from toolwire.store.tables import metadata

# Alembic is imported only when the schema must change (or `toolwire db` runs): a database
# already at the head revision is recognized with one query, and alembic is ~22 MB of every
# server's memory for the rest of its life.
if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

_LOCATION = str(Path(__file__).parent / "migrations")
_ADVISORY_LOCK = 0x746F6F6C  # "tool"


def _config(connection: sa.Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", _LOCATION)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


@lru_cache(maxsize=1)
def head() -> str:
    """The head revision, read from the scripts' `revision` / `down_revision` assignments (the
    one revision no other script revises); alembic's own answer if they are not that plain."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in Path(_LOCATION, "versions").glob("*.py"):
        found: dict[str, object] = {}
        for node in ast.parse(script.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                try:
                    found[target.id] = ast.literal_eval(value)
                except ValueError:
                    found[target.id] = ...
        if not found:
            continue  # not a revision script (the package's __init__.py)
        down = found.get("down_revision")
        plain = down is None or isinstance(down, str)
        if not isinstance(found.get("revision"), str) or not plain:
            return _alembic_head()
        revisions.add(str(found["revision"]))
        if isinstance(down, str):
            revised.add(down)
    heads = revisions - revised
    return heads.pop() if len(heads) == 1 else _alembic_head()


def _alembic_head() -> str:
    revision = _script().get_current_head()
    assert revision is not None
    return revision


def current(connection: sa.Connection) -> str | None:
    """The database's revision; None for an empty database or one from before migrations."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    return rows[0][0] if len(rows) == 1 else _alembic_current(connection)


def _alembic_current(connection: sa.Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def ensure_schema(connection: sa.Connection, *, migrate: bool = True) -> str | None:
    """A write job (`Store.open` runs it off the event loop): the schema brought to the head
    revision; the revision it was at (None: an empty database, or one from before
    migrations)."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))
    revision = current(connection)
    if revision == head():
        return revision
    if revision is None and not sa.inspect(connection).get_table_names():
        metadata.create_all(connection)
        _stamp_head(connection)
        return None
    if not migrate:
        raise ConfigError(
            f"the database schema is at revision {revision or '(before migrations)'}, this "
            f"toolwire needs {head()}: run `toolwire db upgrade` (or start without --no-migrate)"
        )
    upgrade(connection)
    return revision


def _stamp_head(connection: sa.Connection) -> None:
    """Record the head revision in a new database as Alembic's `stamp` does (its version table,
    as Alembic creates it), without importing Alembic: a server started on a fresh database
    would otherwise hold it (~8 MB of its RSS, benchmarks/STACK.md) for the rest of its life."""
    version = sa.Table(
        "alembic_version",
        sa.MetaData(),
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )
    version.create(connection)
    connection.execute(version.insert().values(version_num=head()))


def upgrade(connection: sa.Connection, target: str = "head") -> None:
    from alembic import command

    command.upgrade(_config(connection), target)
