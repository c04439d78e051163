"""When and how long to wait before retrying an upstream call.

Hand-written rather than tenacity: the policy is a dozen lines, and it must read the upstream's
`Retry-After` (seconds or an HTTP date), which tenacity would need a custom wait for anyway.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    max_retries: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float | None:
        """Seconds to wait before retry number `attempt` (0-based); None means give up."""
        if attempt >= self.max_retries:
            return None
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return hinted if hinted <= self.max_retry_after else None
        ceiling = min(self.max_backoff, self.initial_backoff * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
