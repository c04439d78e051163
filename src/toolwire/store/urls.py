"""Database URLs as toolwire takes them (`--db`), as SQLAlchemy opens them, and as they are
shown."""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_dir

from toolwire.errors import ConfigError
from toolwire.store.files import private_directory

_SQLITE = "sqlite:///"


def default_database_url() -> str:
    directory = Path(user_data_dir("toolwire", appauthor=False))
    private_directory(directory)
    return f"{_SQLITE}{directory / 'toolwire.db'}"


def normalize_url(url: str) -> str:
    """`sqlite:///x.db` (also as `sqlite+aiosqlite:` or `sqlite+pysqlite:`, which earlier
    toolwires took) opens with the standard library's driver; `postgresql://…` with asyncpg."""
    for prefix in ("sqlite+aiosqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            return _SQLITE + url[len(prefix) :]
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+asyncpg://" + url.split("://", 1)[1]
    return url


def check_sqlite_directory(url: str) -> None:
    """A SQLite file in a directory that does not exist: say so, and what to do, rather than
    SQLAlchemy's "unable to open database file" under a long traceback."""
    if not url.startswith(_SQLITE):
        return
    path = Path(url[len(_SQLITE) :].split("?", 1)[0])
    if not path.name or path.name == ":memory:" or path.parent.is_dir():
        return
    raise ConfigError(
        f"the database's directory {path.parent} does not exist: create it "
        f"(mkdir -p {path.parent}) or pick another --db, e.g. sqlite:///toolwire.db"
    )


def shown_database(url: str) -> str:
    """A database URL fit to print: no password."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # a URL SQLAlchemy cannot parse is shown as given, less any password
        return url.split("@")[-1]
