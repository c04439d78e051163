"""One replica's health: a circuit breaker fed by its calls (passive) and by a periodic probe
(active), with the error rate and latency shown in `/metrics`, the start-up summary and `/ui`.

    closed ──(failure_threshold failures in a row)──► open ──(cooldown)──► half-open
       ▲                                               ▲                      │
       └──────────────(the trial call succeeds)────────┴──(the trial fails)───┘

An open circuit takes no calls; after `cooldown` one trial call may test it (half-open): its
success closes the circuit, its failure opens it again. A failed probe keeps an open circuit
open for another cooldown; a probe that answers lets the trial happen at once. A 429 or 503
with `Retry-After` keeps the replica out for that long, whatever the circuit says.

Every call is numbered (`begin` returns its number) and reports its verdict with it: once
the circuit has opened, only the trial call's verdict moves it. A call sent before the
circuit opened and ending after says nothing of the replica now (its success must not close
an open circuit, its failure must not reopen a half-open one), and a call that ends without
a verdict frees the trial slot only if it was the trial.
"""

from __future__ import annotations

from collections import deque
from enum import StrEnum

from toolwire.upstream.fleet.settings import HealthSettings

#: `Retry-After` longer than this is capped: a replica asks, it does not decide alone.
MAX_RETRY_AFTER = 60.0
#: Calls kept for the error rate, at most (the window is also bounded in time).
_WINDOW_CALLS = 512
#: Weight of the newest sample in the time-to-first-token moving average.
_EWMA = 0.2


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


STATE_VALUES = {CircuitState.CLOSED: 0, CircuitState.HALF_OPEN: 1, CircuitState.OPEN: 2}
"""How `/metrics` encodes the state (`toolwire_upstream_state`)."""


class Health:
    """Mutated only on the event loop's thread: no lock."""

    __slots__ = (
        "_serial",
        "_window",
        "busy_until",
        "calls",
        "consecutive",
        "failures",
        "last_error",
        "opened_at",
        "settings",
        "state",
        "trial",
        "ttft",
    )

    def __init__(self, settings: HealthSettings) -> None:
        self.settings = settings
        self.state = CircuitState.CLOSED
        self.consecutive = 0
        self.opened_at = 0.0
        self.trial: int | None = None
        """The number of the half-open trial call in flight (no other call until it ends)."""
        self._serial = 0
        self.busy_until = 0.0
        self.calls = 0
        self.failures = 0
        self.ttft: float | None = None
        """Seconds to first token, moving average of successful calls."""
        self.last_error: str | None = None
        self._window: deque[tuple[float, bool]] = deque(maxlen=_WINDOW_CALLS)

    def admits(self, now: float) -> bool:
        """Whether a call may go to the replica now (moves open to half-open on time)."""
        if now < self.busy_until:
            return False
        state = self.state
        if state is CircuitState.CLOSED:
            return True
        if state is CircuitState.OPEN:
            if now - self.opened_at < self.settings.cooldown:
                return False
            self.state = CircuitState.HALF_OPEN
            self.trial = None
        return self.trial is None

    def begin(self) -> int:
        """A call is sent: its number, for its verdict. In half-open it is the trial."""
        self._serial += 1
        if self.state is CircuitState.HALF_OPEN and self.trial is None:
            self.trial = self._serial
        return self._serial

    def _judges(self, call: int | None) -> bool:
        """Whether a call's verdict moves the circuit: any call's while it is closed, only
        the trial's once it has opened. `None`: the trial, if one is in flight (callers
        that do not number their calls)."""
        if self.state is CircuitState.CLOSED:
            return True
        return self.trial is not None and call in (None, self.trial)

    def succeeded(self, now: float, ttft: float | None = None, call: int | None = None) -> None:
        self.calls += 1
        self._window.append((now, True))
        if ttft is not None:
            self.ttft = ttft if self.ttft is None else self.ttft + _EWMA * (ttft - self.ttft)
        if not self._judges(call):
            return  # sent before the circuit opened: it says nothing of the replica now
        self.consecutive = 0
        self.state = CircuitState.CLOSED
        self.trial = None

    def failed(
        self, now: float, why: str, retry_after: float | None = None, call: int | None = None
    ) -> None:
        """The replica failed a call (refused, timed out, 502/503/504, 429, a cut stream)."""
        self.calls += 1
        self.failures += 1
        self._window.append((now, False))
        self.last_error = why
        if self._judges(call) or self.state is CircuitState.OPEN:
            self._fault(now, why)
        if retry_after is not None:
            self.busy_until = max(self.busy_until, now + min(retry_after, MAX_RETRY_AFTER))

    def released(self, call: int | None = None) -> None:
        """A call ended without a verdict on the replica (the client left, a bad request):
        if it was the trial, another call may be the trial."""
        if call is None or call == self.trial:
            self.trial = None

    def probe_answered(self, now: float) -> None:
        if self.state is CircuitState.OPEN:
            # it answers again: let the trial call happen now rather than after the cooldown
            self.opened_at = now - self.settings.cooldown

    def probe_failed(self, now: float, why: str) -> None:
        self._fault(now, why)
        if self.state is CircuitState.OPEN:
            self.opened_at = now  # still down: another cooldown before a trial

    def _fault(self, now: float, why: str) -> None:
        self.last_error = why
        self.consecutive += 1
        if self.state is CircuitState.HALF_OPEN or (
            self.state is CircuitState.CLOSED
            and self.consecutive >= self.settings.failure_threshold
        ):
            self.state = CircuitState.OPEN
            self.opened_at = now
        self.trial = None

    def error_rate(self, now: float) -> float:
        """Failed calls over calls, in the last `error_window` seconds (0 without calls)."""
        since = now - self.settings.error_window
        recent = [ok for when, ok in self._window if when >= since]
        return 0.0 if not recent else recent.count(False) / len(recent)
