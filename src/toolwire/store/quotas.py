"""Per-key rate limits and token budgets, counted in the database so every replica and worker
shares them.

A key may have a requests-per-minute limit (`rpm`), a tokens-per-minute limit (`tpm`) and a
token budget per period (`budget`, `budget_period`: hour, day, week or month, in UTC). Each is
counted in a `quota_usage` row (the key, `minute` or `budget`, the window's start). Every
change is one conditional UPDATE, `... SET tokens = tokens + :n WHERE ... AND tokens + :n <=
:limit`, whose row count says whether it was granted: the database serializes writers of one
row (PostgreSQL re-checks the WHERE on the row it waited for; SQLite has one writer), so two
requests can never both take the last of a limit.

- `count_request` (the gate, once a request that writes or runs a model, and once a WebSocket
  message): counts it against `rpm`;
- `admit` (a door, once a request): checks that its token estimate fits what is left of `tpm`
  and the budget (a check, not a reservation: the model call reserves);
- `reserve` (each model call): takes the call's worst case (prompt estimate + most output)
  from `tpm` and the budget, or refuses;
- `settle` (after the call): gives back what the call did not use (or takes what it used
  beyond the estimate).

So the tokens in flight are always counted, and concurrent requests overspend a budget by at
most what one call used beyond its estimate.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from toolwire.errors import ToolwireError
from toolwire.store.engine import Database
from toolwire.store.tables import api_keys, quota_usage

PERIODS = ("hour", "day", "week", "month")
_SECONDS = {"hour": 3600, "day": 86400, "week": 7 * 86400}


@dataclass(slots=True, frozen=True)
class KeyLimits:
    rpm: int | None = None
    tpm: int | None = None
    budget: int | None = None
    budget_period: str | None = None

    @property
    def any(self) -> bool:
        return self.rpm is not None or self.tpm is not None or self.budget is not None


def period_bounds(period: str, now: float) -> tuple[int, int]:
    """The start and end (Unix seconds, UTC) of the budget period holding `now`. Weeks start
    on Monday; months are calendar months."""
    if period == "month":
        t = time.gmtime(now)
        start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0))
        year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        return start, calendar.timegm((year, month, 1, 0, 0, 0))
    length = _SECONDS[period]
    offset = 3 * 86400 if period == "week" else 0  # 1970-01-01 was a Thursday
    start = int(now + offset) // length * length - offset
    return start, start + length


def duration(seconds: float) -> str:
    """A reset time as OpenAI writes it in `x-ratelimit-reset-*`: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    minutes, rest = divmod(math.ceil(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m{rest}s"


class RateLimited(ToolwireError):
    """A key's limit or budget refuses the request: 429 in OpenAI's shape and headers
    (`rate_limit_exceeded`, type `requests` or `tokens`; `insufficient_quota` for a spent
    budget, which retrying soon cannot help: `x-should-retry: false`)."""

    status = 429


@dataclass(slots=True)
class Reservation:
    """Tokens taken for one model call, to settle when it ends."""

    key_id: str
    minute: int | None
    budget_window: int | None
    tokens: int
    settled: bool = False


@dataclass(slots=True, frozen=True)
class KeyUsage:
    """What a key spent in its current minute and budget period."""

    requests_this_minute: int = 0
    tokens_this_minute: int = 0
    budget_used: int = 0
    budget_resets_at: int | None = None


#: A counting window's row: (key id, scope, start).
Window = tuple[str, str, int]


class QuotaStore:
    def __init__(self, database: Database, ttl: float = 2.0) -> None:
        self.database = database
        self.ttl = ttl
        self._limits: dict[str, KeyLimits] = {}
        self._expires = 0.0
        self._rows: set[Window] = set()
        """Window rows known to exist (they are never deleted while current): no insert."""

    async def limits(self, key_id: str | None) -> KeyLimits | None:
        """The key's limits (None: no key, or none set), read at most every `ttl` seconds: a
        change made with `toolwire keys update` reaches every replica within that time."""
        if key_id is None:
            return None
        if time.monotonic() >= self._expires:
            query = sa.select(
                api_keys.c.id,
                api_keys.c.rpm,
                api_keys.c.tpm,
                api_keys.c.budget,
                api_keys.c.budget_period,
            ).where(api_keys.c.revoked_at.is_(None))
            rows = await self.database.read(lambda connection: connection.execute(query).all())
            self._limits = {
                r.id: KeyLimits(r.rpm, r.tpm, r.budget, r.budget_period or "month") for r in rows
            }
            self._expires = time.monotonic() + self.ttl
        found = self._limits.get(key_id)
        return found if found is not None and found.any else None

    # -- the three steps -------------------------------------------------------------------

    async def count_request(self, key_id: str | None) -> None:
        """A request against the key's `rpm` (the gate, once a request that writes or runs a
        model, and once a WebSocket message): refused (RateLimited) when the minute's are
        spent."""
        limits = await self.limits(key_id)
        if limits is None or key_id is None or limits.rpm is None:
            return
        rpm = limits.rpm
        now = time.time()
        minute = int(now) // 60 * 60

        def count(connection: sa.Connection) -> list[Window]:
            ensured: list[Window] = []
            self._ensure(connection, key_id, "minute", minute, ensured)
            query = (
                _row(key_id, "minute", minute)
                .where(quota_usage.c.requests + 1 <= rpm)
                .values(requests=quota_usage.c.requests + 1)
            )
            if connection.execute(query).rowcount != 1:
                raise _refusal(connection, key_id, limits, now, 0, "requests")
            return ensured

        self._remember(await self.database.transact(count))

    async def admit(self, key_id: str | None, estimate: int) -> None:
        """A door's check, once a request, before it runs: refuses (RateLimited) when its
        token estimate no longer fits what is left of `tpm` or the budget (a check, not a
        reservation: each model call reserves)."""
        limits = await self.limits(key_id)
        if limits is None or key_id is None or (limits.tpm is None and limits.budget is None):
            return
        now = time.time()

        def check(connection: sa.Connection) -> None:
            if limits.tpm is not None:
                minute = int(now) // 60 * 60
                used = _tokens(connection, key_id, "minute", minute)
                if used + estimate > limits.tpm:
                    raise _refusal(connection, key_id, limits, now, estimate, "minute")
            if limits.budget is not None:
                start, _ = period_bounds(limits.budget_period or "month", now)
                used = _tokens(connection, key_id, "budget", start)
                if used + estimate > limits.budget:
                    raise _refusal(connection, key_id, limits, now, estimate, "budget")

        await self.database.read(check)

    async def reserve(self, key_id: str | None, tokens: int) -> Reservation | None:
        """A model call's worst case, taken from `tpm` and the budget at once or not at all
        (RateLimited); None when the key has no token limits."""
        limits = await self.limits(key_id)
        if limits is None or key_id is None or (limits.tpm is None and limits.budget is None):
            return None
        now = time.time()
        minute = int(now) // 60 * 60 if limits.tpm is not None else None
        budget_window = (
            period_bounds(limits.budget_period or "month", now)[0]
            if limits.budget is not None
            else None
        )

        def take(connection: sa.Connection) -> list[Window]:
            ensured: list[Window] = []
            if limits.tpm is not None and minute is not None:
                self._ensure(connection, key_id, "minute", minute, ensured)
                taken = connection.execute(
                    _row(key_id, "minute", minute)
                    .where(quota_usage.c.tokens + tokens <= limits.tpm)
                    .values(tokens=quota_usage.c.tokens + tokens)
                )
                if taken.rowcount != 1:
                    raise _refusal(connection, key_id, limits, now, tokens, "minute")
            if limits.budget is not None and budget_window is not None:
                self._ensure(connection, key_id, "budget", budget_window, ensured)
                taken = connection.execute(
                    _row(key_id, "budget", budget_window)
                    .where(quota_usage.c.tokens + tokens <= limits.budget)
                    .values(tokens=quota_usage.c.tokens + tokens)
                )
                if taken.rowcount != 1:
                    raise _refusal(connection, key_id, limits, now, tokens, "budget")
            return ensured

        self._remember(await self.database.transact(take))
        return Reservation(key_id, minute, budget_window, tokens)

    async def settle(self, reservation: Reservation, used: int) -> None:
        """The call is over and used `used` tokens: the difference from what it reserved goes
        back (or, beyond the estimate, is taken: the call already happened)."""
        if reservation.settled:
            return
        reservation.settled = True
        delta = used - reservation.tokens
        if delta == 0:
            return

        def give_back(connection: sa.Connection) -> None:
            for scope, window in (
                ("minute", reservation.minute),
                ("budget", reservation.budget_window),
            ):
                if window is not None:
                    connection.execute(
                        _row(reservation.key_id, scope, window).values(
                            tokens=sa.func.max(quota_usage.c.tokens + delta, 0)
                            if connection.dialect.name == "sqlite"
                            else sa.func.greatest(quota_usage.c.tokens + delta, 0)
                        )
                    )

        await self.database.transact(give_back)

    def _ensure(
        self, connection: sa.Connection, key_id: str, scope: str, starts: int, ensured: list[Window]
    ) -> None:
        """The window's row exists; added to `ensured`, remembered once the transaction
        committed (`_remember`: a refusal rolls back the insert too)."""
        row = (key_id, scope, starts)
        if row in self._rows:
            return
        _ensure(connection, key_id, scope, starts)
        ensured.append(row)

    def _remember(self, rows: Iterable[Window]) -> None:
        if len(self._rows) > 10_000:
            self._rows.clear()
        self._rows.update(rows)

    async def usage(self) -> dict[str, KeyUsage]:
        """Each key's spending in its current windows (for `toolwire keys list` and /ui)."""
        now = time.time()
        minute = int(now) // 60 * 60

        def read(connection: sa.Connection) -> tuple[list[Any], list[Any]]:
            keys = connection.execute(
                sa.select(api_keys.c.id, api_keys.c.budget_period).where(
                    api_keys.c.revoked_at.is_(None)
                )
            ).all()
            rows = connection.execute(
                sa.select(quota_usage).where(
                    quota_usage.c.key_id.in_([k.id for k in keys]),
                    sa.or_(
                        sa.and_(quota_usage.c.scope == "minute", quota_usage.c.starts == minute),
                        quota_usage.c.scope == "budget",
                    ),
                )
            ).all()
            return list(keys), list(rows)

        keys, rows = await self.database.read(read)
        out: dict[str, KeyUsage] = {}
        for key in keys:
            start, end = period_bounds(key.budget_period or "month", now)
            mine = [r for r in rows if r.key_id == key.id]
            this_minute = next((r for r in mine if r.scope == "minute"), None)
            budget = next((r for r in mine if r.scope == "budget" and r.starts == start), None)
            out[key.id] = KeyUsage(
                this_minute.requests if this_minute else 0,
                this_minute.tokens if this_minute else 0,
                budget.tokens if budget else 0,
                end,
            )
        return out


def _row(key_id: str, scope: str, starts: int) -> Any:
    return quota_usage.update().where(
        quota_usage.c.key_id == key_id,
        quota_usage.c.scope == scope,
        quota_usage.c.starts == starts,
    )


def _ensure(connection: sa.Connection, key_id: str, scope: str, starts: int) -> None:
    """The window's row exists (INSERT … ON CONFLICT DO NOTHING, which both databases spell
    alike); a new minute clears the key's older minutes."""
    from sqlalchemy.dialects import postgresql, sqlite

    dialect: Any = postgresql if connection.dialect.name == "postgresql" else sqlite
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


def _tokens(connection: sa.Connection, key_id: str, scope: str, starts: int) -> int:
    row = connection.execute(
        sa.select(quota_usage.c.tokens).where(
            quota_usage.c.key_id == key_id,
            quota_usage.c.scope == scope,
            quota_usage.c.starts == starts,
        )
    ).first()
    return int(row.tokens) if row is not None else 0


def _refusal(
    connection: sa.Connection,
    key_id: str,
    limits: KeyLimits,
    now: float,
    requested: int,
    scope: str,
) -> RateLimited:
    """The 429 for a refused request, with OpenAI's `x-ratelimit-*` headers from the key's
    current windows."""
    minute = int(now) // 60 * 60
    row = connection.execute(
        sa.select(quota_usage.c.requests, quota_usage.c.tokens).where(
            quota_usage.c.key_id == key_id,
            quota_usage.c.scope == "minute",
            quota_usage.c.starts == minute,
        )
    ).first()
    requests, tokens = (int(row.requests), int(row.tokens)) if row is not None else (0, 0)
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
        used = _tokens(connection, key_id, "budget", start)
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
