"""The sealed MCP credentials of responses awaiting approval (`sealed_tools`): kept in the
response's final transaction, read back when the same owner continues it
(`server/responses/prepare/approval_tools.py` seals and opens them)."""

from __future__ import annotations

from functools import partial

import sqlalchemy as sa

from toolwire.store.database import Store
from toolwire.store.engine import scalar
from toolwire.store.owner import Owner, owner_key
from toolwire.store.tables import sealed_tools


def keep_in(response_id: str, owner: Owner, sealed: str, connection: sa.Connection) -> None:
    """In the caller's transaction: the response's sealed tools, replacing any kept before."""
    connection.execute(sealed_tools.delete().where(sealed_tools.c.response_id == response_id))
    connection.execute(
        sealed_tools.insert().values(response_id=response_id, owner=owner_key(owner), sealed=sealed)
    )


async def read(store: Store, response_id: str, owner: Owner) -> str | None:
    """The owner's sealed tools of `response_id`, if any (another owner's are never found)."""
    query = sa.select(sealed_tools.c.sealed).where(
        sealed_tools.c.response_id == response_id,
        sealed_tools.c.owner == owner_key(owner),
    )
    token = await store.read(partial(scalar, query))
    return None if token is None else str(token)
