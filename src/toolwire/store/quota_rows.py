"""The `quota_usage` rows in SQL: a window's row made sure of, read, and a refusal worded
from it (the leases above them: `store/quotas.py`)."""

from __future__ import annotations

import math
import time
from typing import Any

import sqlalchemy as sa

from toolwire.store.quota_terms import (
    Counter,
    KeyLimits,
    RateLimited,
    duration,
    period_bounds,
)
from toolwire.store.tables import quota_usage


def count_in(connection: sa.Connection, counter: Counter, window: int) -> int:
    column = quota_usage.c[counter[2]]
    row = connection.execute(
        sa.select(column).where(
            quota_usage.c.key_id == counter[0],
            quota_usage.c.scope == counter[1],
            quota_usage.c.starts == window,
        )
    ).first()
    return int(row[0]) if row is not None else 0


def usage_row(key_id: str, scope: str, starts: int) -> Any:
    return quota_usage.update().where(
        quota_usage.c.key_id == key_id,
        quota_usage.c.scope == scope,
        quota_usage.c.starts == starts,
    )


def ensure_row(connection: sa.Connection, key_id: str, scope: str, starts: int) -> None:
    """The window's row exists (INSERT … ON CONFLICT DO NOTHING, which both databases spell
    alike); a new minute clears the key's older minutes."""
    dialect: Any
    if connection.dialect.name == "postgresql":  # imported here: a SQLite server never needs it
        from sqlalchemy.dialects import postgresql as dialect
    else:
        from sqlalchemy.dialects import sqlite as dialect
    inserted = connection.execute(
        dialect.insert(quota_usage)
        .values(key_id=key_id, scope=scope, starts=starts, requests=0, tokens=0)
        .on_conflict_do_nothing()
    )
    if inserted.rowcount == 1 and scope == "minute":
        connection.execute(
            quota_usage.delete().where(
                quota_usage.c.key_id == key_id,
                quota_usage.c.scope == "minute",
                quota_usage.c.starts < starts,
            )
        )


def tokens_in(connection: sa.Connection, key_id: str, scope: str, starts: int) -> int:
    row = connection.execute(
        sa.select(quota_usage.c.tokens).where(
            quota_usage.c.key_id == key_id,
            quota_usage.c.scope == scope,
            quota_usage.c.starts == starts,
        )
    ).first()
    return int(row.tokens) if row is not None else 0


def refusal(
    connection: sa.Connection,
    key_id: str,
    limits: KeyLimits,
    now: float,
    requested: int,
    scope: str,
    own: dict[str, int] | None = None,
) -> RateLimited:
    """The 429 for a refused request, with OpenAI's `x-ratelimit-*` headers from the key's
    current windows (their rows, less `own`: what this process's leases hold unused)."""
    own = own or {}
    minute = int(now) // 60 * 60
    row = connection.execute(
        sa.select(quota_usage.c.requests, quota_usage.c.tokens).where(
            quota_usage.c.key_id == key_id,
            quota_usage.c.scope == "minute",
            quota_usage.c.starts == minute,
        )
    ).first()
    requests, tokens = (int(row.requests), int(row.tokens)) if row is not None else (0, 0)
    requests = max(requests - own.get("minute:requests", 0), 0)
    tokens = max(tokens - own.get("minute:tokens", 0), 0)
    minute_reset = max(minute + 60 - now, 0.001)
    headers: dict[str, str] = {}
    if limits.rpm is not None:
        headers["x-ratelimit-limit-requests"] = str(limits.rpm)
        headers["x-ratelimit-remaining-requests"] = str(max(limits.rpm - requests, 0))
        headers["x-ratelimit-reset-requests"] = duration(minute_reset)
    if limits.tpm is not None:
        headers["x-ratelimit-limit-tokens"] = str(limits.tpm)
        headers["x-ratelimit-remaining-tokens"] = str(max(limits.tpm - tokens, 0))
        headers["x-ratelimit-reset-tokens"] = duration(minute_reset)
    if scope == "budget":
        assert limits.budget is not None
        start, end = period_bounds(limits.budget_period or "month", now)
        used = max(tokens_in(connection, key_id, "budget", start) - own.get("budget:tokens", 0), 0)
        headers["retry-after"] = str(math.ceil(end - now))
        error = RateLimited(
            f"You exceeded your current quota: this key's budget of {limits.budget} tokens a "
            f"{limits.budget_period or 'month'} has {max(limits.budget - used, 0)} left and "
            f"this request needs up to {requested}. It renews at "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(end))}.",
            code="insufficient_quota",
            error_type="insufficient_quota",
            retryable=False,
        )
    else:
        on_requests = scope == "requests"
        headers["retry-after"] = str(math.ceil(minute_reset))
        if on_requests:
            what = f"requests per min (RPM): Limit {limits.rpm}, Used {requests}, Requested 1"
        else:
            what = f"tokens per min (TPM): Limit {limits.tpm}, Used {tokens}, Requested {requested}"
        error = RateLimited(
            f"Rate limit reached for this key on {what}. Please try again in "
            f"{duration(minute_reset)}.",
            code="rate_limit_exceeded",
            error_type="requests" if on_requests else "tokens",
        )
    error.headers = headers
    return error
