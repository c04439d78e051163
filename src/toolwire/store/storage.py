"""The bytes each API key keeps stored, and its storage quota.

Every stored response and conversation item records the bytes of its JSON (`stored_bytes`,
schema 6, written in the same statement as the row); a key's stored bytes are their sum, read
from the covering indexes on (owner, stored_bytes) without touching the rows themselves.

`check` is asked before a request stores anything (a response with `store` on, a conversation
created, items added): a key at or over `max_bytes` is refused (429 `storage_quota_exceeded`,
not retried: deleting responses or conversations makes room). The sum is read at most every
`ttl` seconds per key; in between, what this process let through is added to it, so a burst of
requests cannot pass the quota by more than one request per replica. A keyless server (owner
None) has no quota: it has one user.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import sqlalchemy as sa

from toolwire.errors import ToolwireError
from toolwire.store.engine import Database
from toolwire.store.tables import conversation_items, responses

GiB = 1 << 30
#: The default quota: what one key may keep stored (responses with their input items, and
#: conversation items). `max_stored_bytes_per_key` in the config; 0: no quota.
DEFAULT_MAX_BYTES = 1 * GiB


class StorageQuotaExceeded(ToolwireError):
    status = 429
    error_type = "insufficient_quota"


@dataclass(slots=True)
class StorageQuota:
    database: Database
    max_bytes: int = DEFAULT_MAX_BYTES
    ttl: float = 5.0
    _known: dict[str, tuple[float, int]] = field(default_factory=dict)
    """key -> (when the sum was read, monotonic; bytes: the sum plus what passed since)."""

    async def used(self, owner: str) -> int:
        """The key's stored bytes, summed in the database now."""

        def total(connection: sa.Connection) -> int:
            summed = 0
            for table in (responses, conversation_items):
                column = table.c.stored_bytes
                query = sa.select(sa.func.coalesce(sa.func.sum(column), 0)).where(
                    table.c.owner == owner
                )
                summed += int(connection.execute(query).scalar() or 0)
            return summed

        return await self.database.read(total)

    async def check(self, owner: str | None, incoming: int) -> None:
        """Before a request stores about `incoming` bytes: StorageQuotaExceeded when the key
        is at its quota already."""
        if owner is None or self.max_bytes <= 0:
            return
        now = time.monotonic()
        known = self._known.get(owner)
        if known is None or now - known[0] > self.ttl:
            if len(self._known) > 10_000:
                self._known.clear()
            known = (now, await self.used(owner))
        read_at, used = known
        if used >= self.max_bytes:
            self._known[owner] = known
            raise StorageQuotaExceeded(
                f"This API key keeps {used} bytes stored, and its storage quota is "
                f"{self.max_bytes} bytes (max_stored_bytes_per_key). Delete responses or "
                "conversations it no longer needs, or send store: false.",
                code="storage_quota_exceeded",
                retryable=False,
            )
        self._known[owner] = (read_at, used + incoming)
