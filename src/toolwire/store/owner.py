"""Who owns a stored row: the id of the API key that created it, or None (no keys in use).

Every store method that reads, lists, changes or deletes responses and conversations takes an
`owner` argument and only sees rows of exactly that owner: another key's rows do not exist for
it (404, never 403). Rows created while the server ran without keys have owner None and stay
with the anonymous principal.

The argument defaults to `INHERIT`: the owner of the request being served, which the server's
auth middleware sets in `current_owner` for the duration of each request (tasks the request
starts inherit it). Code outside any request (the CLI, the library) is the anonymous owner.
Pass `owner` explicitly wherever the caller knows it.
"""

from __future__ import annotations

import enum
from contextvars import ContextVar

import sqlalchemy as sa


class Inherit(enum.Enum):
    INHERIT = "inherit"


INHERIT = Inherit.INHERIT

Owner = str | None
OwnerArg = str | None | Inherit

current_owner: ContextVar[Owner] = ContextVar("toolwire_owner", default=None)


def resolve(owner: OwnerArg) -> Owner:
    return current_owner.get() if owner is INHERIT else owner


def owned_by(
    column: sa.ColumnElement[str] | sa.Column[str], owner: Owner
) -> sa.ColumnElement[bool]:
    """`column = owner`, where None matches only rows without an owner."""
    return column.is_(None) if owner is None else column == owner


def owner_key(owner: Owner) -> str:
    """The owner as a non-null key for per-owner unique constraints: the key id, or "" for
    rows stored without keys (SQL unique constraints treat nulls as all distinct, so null
    could not keep the anonymous owner's item ids unique)."""
    return owner or ""
