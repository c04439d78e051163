"""API keys for `toolwire serve`: created and revoked with `toolwire keys`, stored hashed.

A key is `tw-` followed by 43 URL-safe characters (256 random bits). Only its SHA-256 is
stored: keys carry full entropy, so a slow password hash would add nothing but latency. The
key's `id` (`key_…`) is what the `owner` columns of responses and conversations hold.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwire.store.tables import api_keys

KEY_PREFIX = "tw-"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(slots=True, frozen=True)
class ApiKey:
    id: str
    name: str
    prefix: str
    created_at: int
    revoked_at: int | None = None


@dataclass(slots=True, frozen=True)
class ActiveKey:
    """What the server needs to check a presented key: its hash and whose it is."""

    id: str
    hash: str


class KeyNameTaken(Exception):
    """An unrevoked key already has this name."""


class KeyStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, name: str) -> tuple[ApiKey, str]:
        """A new key: its record, and the key itself (shown once, never stored)."""
        key = new_key()
        record = ApiKey(
            id="key_" + secrets.token_hex(12),
            name=name,
            prefix=key[: len(KEY_PREFIX) + 4],
            created_at=int(time.time()),
        )
        async with self.engine.begin() as connection:
            taken = (
                await connection.execute(
                    sa.select(api_keys.c.id).where(
                        api_keys.c.name == name, api_keys.c.revoked_at.is_(None)
                    )
                )
            ).first()
            if taken is not None:
                raise KeyNameTaken(name)
            await connection.execute(
                api_keys.insert().values(
                    id=record.id,
                    name=name,
                    prefix=record.prefix,
                    hash=hash_key(key),
                    created_at=record.created_at,
                )
            )
        return record, key

    async def listing(self, *, include_revoked: bool = True) -> list[ApiKey]:
        query = sa.select(
            api_keys.c.id,
            api_keys.c.name,
            api_keys.c.prefix,
            api_keys.c.created_at,
            api_keys.c.revoked_at,
        ).order_by(api_keys.c.created_at, api_keys.c.name)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [ApiKey(r.id, r.name, r.prefix, r.created_at, r.revoked_at) for r in rows]

    async def revoke(self, name: str) -> int:
        """Revoke every unrevoked key with this name; how many were revoked."""
        async with self.engine.begin() as connection:
            result = await connection.execute(
                api_keys.update()
                .where(api_keys.c.name == name, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=int(time.time()))
            )
        return int(result.rowcount)

    async def active(self) -> list[ActiveKey]:
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(
                    sa.select(api_keys.c.id, api_keys.c.hash).where(api_keys.c.revoked_at.is_(None))
                )
            ).all()
        return [ActiveKey(r.id, r.hash) for r in rows]
