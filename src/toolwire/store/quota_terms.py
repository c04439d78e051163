"""The words of per-key limits (their periods, the refusal, a call's reservation, a key's
usage), apart from the store that counts them (`store/quotas.py`): the CLI, the gate and `/ui`
read them without the leases."""

from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass

from toolwire.errors import ToolwireError

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


#: The last bounds computed for each period (the hot path asks for the same ones).
_BOUNDS: dict[str, tuple[int, int]] = {}


def period_bounds(period: str, now: float) -> tuple[int, int]:
    """The start and end (Unix seconds, UTC) of the budget period holding `now`. Weeks start
    on Monday; months are calendar months."""
    last = _BOUNDS.get(period)
    if last is not None and last[0] <= now < last[1]:
        return last
    bounds = _period_bounds(period, now)
    _BOUNDS[period] = bounds
    return bounds


def _period_bounds(period: str, now: float) -> tuple[int, int]:
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


#: A counter: (key id, scope, column): `minute` `requests` or `tokens`, `budget` `tokens`.
Counter = tuple[str, str, str]


#: A counter in one window: (key id, scope, column, window start).
Cell = tuple[str, str, str, int]


#: What one take asks of a counter: (counter, window, limit, need).
Need = tuple[Counter, int, int, int]
