"""What a failed database call means to its caller: worth retrying, or a key already taken.

The drivers' and SQLAlchemy's exceptions stay in the store: the server asks these questions
instead of knowing them.
"""

from __future__ import annotations

import sqlalchemy as sa


def transient(exc: BaseException) -> bool:
    """A database failure that may pass (a server restarting, a lock held too long, a dropped
    connection), as opposed to a write the database refuses (a constraint) or a bug."""
    if isinstance(exc, sa.exc.DBAPIError):
        return exc.connection_invalidated or isinstance(
            exc, sa.exc.OperationalError | sa.exc.InterfaceError
        )
    return isinstance(exc, OSError | TimeoutError)


def duplicate_key(exc: BaseException) -> bool:
    """The database refused a row whose unique key is taken (an item id a concurrent request
    stored first, say)."""
    return isinstance(exc, sa.exc.IntegrityError)
