"""API keys for `toolwire serve`: created and revoked with `toolwire keys`, stored hashed.

A key is `tw-` followed by 43 URL-safe characters (256 random bits). Only its SHA-256 is
stored: keys carry full entropy, so a slow password hash would add nothing but latency. The
key's `id` (`key_…`) is what the `owner` columns of responses and conversations hold.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from functools import partial

import sqlalchemy as sa

from toolwire.store.engine import Database, rowcount
from toolwire.store.quota_terms import PERIODS, KeyLimits
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
    operator: bool = False
    limits: KeyLimits = field(default_factory=KeyLimits)


@dataclass(slots=True, frozen=True)
class ActiveKey:
    """What the server needs to check a presented key: its hash and whose it is."""

    id: str
    hash: str
    operator: bool = False


class KeyNameTaken(Exception):
    """An unrevoked key already has this name."""


class BadLimit(ValueError):
    """A limit that is not a positive integer, or an unknown budget period."""


#: `update(..., rpm=CLEAR)` removes that limit.
CLEAR = -1


def _limit_values(limits: dict[str, int | str | None]) -> dict[str, int | str | None]:
    """The columns to set: None leaves a limit as it is, CLEAR (or 0) removes it."""
    values: dict[str, int | str | None] = {}
    for name, value in limits.items():
        if value is None:
            continue
        if name == "budget_period":
            if value not in PERIODS:
                raise BadLimit(f"budget period must be one of {', '.join(PERIODS)}")
            values[name] = value
            continue
        if not isinstance(value, int) or value < CLEAR:
            raise BadLimit(f"{name} must be a positive integer (0 removes it)")
        values[name] = None if value in (CLEAR, 0) else value
    return values


class KeyStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(
        self,
        name: str,
        *,
        operator: bool = False,
        rpm: int | None = None,
        tpm: int | None = None,
        budget: int | None = None,
        budget_period: str | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key: its record, and the key itself (shown once, never stored). An
        `operator` key sees every tenant in /ui and reads /metrics; limits are per key."""
        values = _limit_values(
            {"rpm": rpm, "tpm": tpm, "budget": budget, "budget_period": budget_period}
        )
        key = new_key()
        record = ApiKey(
            id="key_" + secrets.token_hex(12),
            name=name,
            prefix=key[: len(KEY_PREFIX) + 4],
            created_at=int(time.time()),
            operator=operator,
        )

        def insert(connection: sa.Connection) -> None:
            taken = connection.execute(
                sa.select(api_keys.c.id).where(
                    api_keys.c.name == name, api_keys.c.revoked_at.is_(None)
                )
            ).first()
            if taken is not None:
                raise KeyNameTaken(name)
            connection.execute(
                api_keys.insert().values(
                    id=record.id,
                    name=name,
                    prefix=record.prefix,
                    hash=hash_key(key),
                    created_at=record.created_at,
                    operator=operator,
                    **values,
                )
            )

        await self.database.transact(insert)
        return record, key

    async def update(
        self,
        name: str,
        *,
        operator: bool | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        budget: int | None = None,
        budget_period: str | None = None,
    ) -> int:
        """Change the active key's limits (None: leave as is; 0: no limit) or role; how many
        keys changed (0: no active key of that name). Running servers see it within seconds."""
        values: dict[str, object] = dict(
            _limit_values(
                {"rpm": rpm, "tpm": tpm, "budget": budget, "budget_period": budget_period}
            )
        )
        if operator is not None:
            values["operator"] = operator
        if not values:
            return 0
        return await self.database.transact(
            partial(
                rowcount,
                api_keys.update()
                .where(api_keys.c.name == name, api_keys.c.revoked_at.is_(None))
                .values(**values),
            )
        )

    async def ever_used(self) -> bool:
        """Whether this database has ever had a key (revoked ones count): such a server keeps
        asking for one, even with every key revoked (see server/gate/auth.py)."""
        query = sa.select(api_keys.c.id).limit(1)
        found = await self.database.read(lambda connection: connection.execute(query).first())
        return found is not None

    async def listing(self, *, include_revoked: bool = True) -> list[ApiKey]:
        query = sa.select(
            api_keys.c.id,
            api_keys.c.name,
            api_keys.c.prefix,
            api_keys.c.created_at,
            api_keys.c.revoked_at,
            api_keys.c.operator,
            api_keys.c.rpm,
            api_keys.c.tpm,
            api_keys.c.budget,
            api_keys.c.budget_period,
        ).order_by(api_keys.c.created_at, api_keys.c.name)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        rows = await self.database.read(lambda connection: connection.execute(query).all())
        return [
            ApiKey(
                r.id,
                r.name,
                r.prefix,
                r.created_at,
                r.revoked_at,
                bool(r.operator),
                KeyLimits(r.rpm, r.tpm, r.budget, r.budget_period),
            )
            for r in rows
        ]

    async def revoke(self, name: str) -> int:
        """Revoke every unrevoked key with this name; how many were revoked."""
        return await self.database.transact(
            partial(
                rowcount,
                api_keys.update()
                .where(api_keys.c.name == name, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=int(time.time())),
            )
        )

    async def active(self) -> list[ActiveKey]:
        query = sa.select(api_keys.c.id, api_keys.c.hash, api_keys.c.operator).where(
            api_keys.c.revoked_at.is_(None)
        )
        rows = await self.database.read(lambda connection: connection.execute(query).all())
        return [ActiveKey(r.id, r.hash, bool(r.operator)) for r in rows]
