"""Any error escaping a CLI command, said in a line or two: what went wrong and what to do.
The traceback is for `toolwire --debug …` (or TOOLWIRE_DEBUG=1); a user who mistyped a path or
a password should not read 500 lines of SQLAlchemy to find out."""

from __future__ import annotations

import json

from pydantic import ValidationError

from toolwire.errors import ToolwireError

DEBUG_HINT = "(run with `toolwire --debug …` for the traceback)"


def describe(exc: BaseException) -> str:
    """The message for `exc`: ours as written, the common outside ones (database, files,
    JSON, config values) with their cause and a fix, anything else named with its type."""
    if isinstance(exc, ToolwireError):
        return exc.message
    database = _database_error(exc)
    if database:
        return database
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, FileNotFoundError):
        return f"no such file or directory: {exc.filename}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        return f"invalid {where}: {first['msg']}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text} {DEBUG_HINT}" if text else f"{type(exc).__name__}"


def _database_error(exc: BaseException) -> str | None:
    """SQLAlchemy's and the drivers' errors: the database's own first line, and the fix."""
    try:
        from sqlalchemy import exc as sa_exc
    except ImportError:  # pragma: no cover - SQLAlchemy is a dependency
        return None
    if isinstance(exc, sa_exc.ArgumentError | sa_exc.NoSuchModuleError):
        return (
            f"not a database URL toolwire can open ({exc}): use sqlite:///PATH or "
            "postgresql://USER:PASSWORD@HOST/DB"
        )
    cause: BaseException = exc
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        cause = exc.orig
    module = type(cause).__module__
    name = type(cause).__name__
    first = (str(cause).strip().splitlines() or [""])[0]
    if module.startswith("asyncpg"):
        if "password" in name.lower() or "password authentication" in first:
            return f"the database refused the login: {first} (check the user and password in --db)"
        if "catalog" in name.lower():
            return f"the database does not exist: {first} (create it: createdb NAME)"
        return f"database error: {first}"
    if isinstance(exc, sa_exc.DBAPIError):
        if "unable to open database file" in first:
            return (
                f"cannot open the SQLite database: {first} (does its directory exist, and may "
                "you write there? --db sqlite:///toolwire.db keeps it here)"
            )
        return f"database error: {first}"
    if isinstance(exc, OSError) and "connect" in str(exc).lower() and _in_database(exc):
        return f"cannot connect to the database: {first} (is it running? check --db)"
    return None


def _in_database(exc: BaseException) -> bool:
    """Whether `exc` was raised opening the database (a driver's frames in its traceback)."""
    frame = exc.__traceback__
    while frame is not None:
        name = frame.tb_frame.f_code.co_filename
        if "asyncpg" in name or "sqlalchemy" in name or "toolwire/store" in name:
            return True
        frame = frame.tb_next
    return False
