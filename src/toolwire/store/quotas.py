"""Per-key rate limits and token budgets, counted in the database so every replica and worker
shares them, and served from leases held in memory so a limited key's request does no database
work in the common case.

A key may have a requests-per-minute limit (`rpm`), a tokens-per-minute limit (`tpm`) and a
token budget per period (`budget`, `budget_period`: hour, day, week or month, in UTC). Each is
counted in a `quota_usage` row (the key, `minute` or `budget`, the window's start): the row
holds what every process has *taken* from the limit.

**Leases.** A process takes capacity from a row in blocks (a lease) with one conditional
UPDATE, `... SET tokens = tokens + :n WHERE ... AND tokens + :n <= :limit`, whose returned row
says whether it was granted: the database serializes writers of one row (PostgreSQL re-checks
the WHERE on the row it waited for; SQLite has one writer), so two takers can never both get
the last of a limit. It then serves requests from the lease in memory (no await, so no race on
the event loop's one thread):

- `count_request` (the gate, once a request that writes or runs a model, and once a WebSocket
  message): one request from the minute's `rpm` lease;
- `admit` (a door, once a request): checks that its token estimate fits the `tpm` and budget
  leases plus what the database had left at the last take (a check, not a reservation); only
  when that does not fit is the database read, and only that read refuses;
- `reserve` (each model call): takes the call's worst case from the `tpm` and budget leases,
  all or nothing;
- `settle` (after the call): gives what the call did not use back to the lease (or takes what
  it used beyond the estimate: from the lease, else written to the row as it is: the call
  already happened).

When a lease is short, the request takes what it needs plus a new block from the row, on its
own path, under the key's lock (one refill a key at a time; requests the lease can serve do not
wait). The block adapts: at most a quarter of what the row had left after the request's need,
at most an eighth of the limit, and at most 64 times the request's need (for a minute's
counters, doubled with each block taken in that minute, so a busy key refills rarely); near the
limit it is 0, so the last requests and tokens are taken one request at a time from the row,
exactly. A take that cannot get the block is retried for the need alone, and what the
process's own lease held is used first.

**Giving back.** Every `FLUSH_SECONDS` (0.5 s) a background task writes, in one transaction,
coalesced per row: the settlements that could not go to a lease, the leases of windows that
rolled over (a new minute, a new budget period), the leases not used since the previous flush,
and whatever a lease holds beyond an eighth of its limit. `flush()` gives every lease back now;
`close()` (the Store's, after the upstream stack settled its calls: `Runtime.aclose`) flushes
last. A write that fails is kept and retried at the next flush.

Guarantees:

- across replicas and workers, the total granted in a window never exceeds a limit: every
  grant comes from a conditional UPDATE, and a lease is only ever spent once, in memory (a
  settlement beyond a call's estimate is charged as it is, as before: the call happened);
- a request is refused only when neither this process's lease nor the database has room (the
  refusal's headers come from the row, less this process's unused lease). Another replica's
  unused lease is not available to this one until it is given back (within a flush of that
  replica going idle on the key, or at once when it closes);
- a replica that dies loses at most its unused leases: they stay counted as spent until their
  window ends (conservative: a limit is never passed, a key may be refused a little early);
- concurrent requests overspend a budget by at most what one call used beyond its estimate (as
  before: tokens in flight are always counted, through their reservation);
- `usage()` (`/ui`) flushes this process's leases first, then reads the rows: what it reports
  is what was used, plus the unused leases other processes hold (never less than what was
  used). `toolwire keys list` runs in a process of its own, so leases of running servers show
  as taken there until they are given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from toolwire.store.engine import Database
from toolwire.store.quota_rows import count_in, ensure_row, refusal, usage_row
from toolwire.store.quota_terms import (
    Cell,
    Counter,
    KeyLimits,
    KeyUsage,
    Need,
    Reservation,
    Window,
    period_bounds,
)
from toolwire.store.tables import api_keys, quota_usage

log = logging.getLogger("toolwire.store")

#: How often unused leases and pending settlements are written back (seconds).
FLUSH_SECONDS = 0.5
#: A new block is at most 1/LEASE_SHARE of what the row has left after the need, ...
LEASE_SHARE = 4
#: ... at most 1/LEASE_CEILING of the limit (a flush also gives back what a lease holds past
#: that), ...
LEASE_CEILING = 8
#: ... and at most this many times the need of the request that takes it.
LEASE_REQUESTS = 64


@dataclass(slots=True)
class Lease:
    """What this process took from one counter of a key's window (its `quota_usage` row's
    `requests` or `tokens`) and has not used yet."""

    window: int
    limit: int
    available: int = 0
    left: int | None = None
    """What the row had left after this process's last take (None: not taken yet)."""
    touched: bool = True
    """Used since the last flush."""
    refills: int = 0
    """Blocks taken in this window (a minute's block doubles with each: `_block`)."""


class QuotaStore:
    def __init__(self, database: Database, ttl: float = 2.0) -> None:
        self.database = database
        self.ttl = ttl
        self.clock: Callable[[], float] = time.time
        self._limits: dict[str, KeyLimits] = {}
        self._expires = 0.0
        self._rows: set[Window] = set()
        """Window rows known to exist (they are never deleted while current): no insert."""
        self._leases: dict[Counter, Lease] = {}
        self._pending: dict[Cell, int] = {}
        """Deltas to write to rows: settlements no lease took, leases given back (negative)."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._flushing: asyncio.Lock | None = None

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
        now = self.clock()
        need: Need = ((key_id, "minute", "requests"), int(now) // 60 * 60, limits.rpm, 1)
        if not self._spend([need]):
            await self._take(key_id, limits, now, [need], "requests")

    async def admit(self, key_id: str | None, estimate: int) -> None:
        """A door's check, once a request, before it runs: refuses (RateLimited) when its
        token estimate no longer fits what is left of `tpm` or the budget (a check, not a
        reservation: each model call reserves)."""
        limits = await self.limits(key_id)
        if limits is None or key_id is None or (limits.tpm is None and limits.budget is None):
            return
        now = self.clock()
        needs = _token_needs(key_id, limits, now, estimate)
        leases = [self._lease(counter, window, limit) for counter, window, limit, _ in needs]
        if all(
            lease.available >= estimate
            or (lease.left is not None and lease.available + lease.left >= estimate)
            for lease in leases
        ):
            return

        def check(connection: sa.Connection) -> None:
            for (counter, window, limit, _), lease in zip(needs, leases, strict=True):
                taken = count_in(connection, counter, window)
                lease.left = max(limit - taken, 0)
                if lease.available + limit - taken < estimate:
                    own = self._own(key_id, limits, now)
                    raise refusal(connection, key_id, limits, now, estimate, counter[1], own)

        await self.database.read(check)

    async def reserve(self, key_id: str | None, tokens: int) -> Reservation | None:
        """A model call's worst case, taken from `tpm` and the budget at once or not at all
        (RateLimited); None when the key has no token limits."""
        limits = await self.limits(key_id)
        if limits is None or key_id is None or (limits.tpm is None and limits.budget is None):
            return None
        now = self.clock()
        needs = _token_needs(key_id, limits, now, tokens)
        if not self._spend(needs):
            await self._take(key_id, limits, now, needs, "tokens")
        windows = {counter[1]: window for counter, window, _, _ in needs}
        return Reservation(key_id, windows.get("minute"), windows.get("budget"), tokens)

    async def settle(self, reservation: Reservation, used: int) -> None:
        """The call is over and used `used` tokens: the difference from what it reserved goes
        back to the lease (or, beyond the estimate, is taken from it, else written as it is:
        the call already happened)."""
        beyond = self.settle_in_memory(reservation, used)
        if beyond:
            await self.write_beyond(beyond)

    def settle_in_memory(self, reservation: Reservation, used: int) -> dict[Cell, int]:
        """`settle` without awaiting: what must still be written (`write_beyond`) when the call
        used more than its estimate and its lease hold ({} in the common case)."""
        beyond: dict[Cell, int] = {}
        if reservation.settled:
            return beyond
        reservation.settled = True
        delta = used - reservation.tokens
        if delta == 0:
            return beyond
        for scope, window in (
            ("minute", reservation.minute),
            ("budget", reservation.budget_window),
        ):
            if window is None:
                continue
            counter = (reservation.key_id, scope, "tokens")
            lease = self._leases.get(counter)
            if lease is not None and lease.window == window and lease.available >= delta:
                lease.available -= delta
                lease.touched = True
            elif delta < 0:
                self._add((*counter, window), delta)
            else:  # used beyond the estimate and the lease: written now, as every take sees it
                beyond[(*counter, window)] = delta
        return beyond

    async def write_beyond(self, beyond: dict[Cell, int]) -> None:
        """What `settle_in_memory` could not settle, written at once (kept for the next flush
        if the write fails)."""
        try:
            await self._write(beyond)
        except Exception:
            for cell, more in beyond.items():
                self._add(cell, more)
            raise

    # -- leases ----------------------------------------------------------------------------

    def _lease(self, counter: Counter, window: int, limit: int) -> Lease:
        """The counter's lease in `window`; one of an earlier window is given back."""
        lease = self._leases.get(counter)
        if lease is None or lease.window != window:
            if lease is not None:
                self._add((*counter, lease.window), -lease.available)
            lease = self._leases[counter] = Lease(window, limit)
        lease.limit = limit
        return lease

    def _spend(self, needs: list[Need]) -> bool:
        """Each need from its lease, all or none (in memory: no await)."""
        if len(needs) == 1:  # the common shapes, without the lists
            counter, window, limit, amount = needs[0]
            lease = self._lease(counter, window, limit)
            if lease.available < amount:
                return False
            lease.available -= amount
            lease.touched = True
            return True
        leases = [self._lease(counter, window, limit) for counter, window, limit, _ in needs]
        for lease, need in zip(leases, needs, strict=True):
            if lease.available < need[3]:
                return False
        for lease, need in zip(leases, needs, strict=True):
            lease.available -= need[3]
            lease.touched = True
        return True

    def _give(self, counter: Counter, lease: Lease, amount: int) -> None:
        """`amount` back to `lease`, or to its row if the lease was replaced meanwhile."""
        if amount == 0:
            return
        if self._leases.get(counter) is lease:
            lease.available += amount
        else:
            self._add((*counter, lease.window), -amount)

    def _add(self, cell: Cell, delta: int) -> None:
        if delta:
            self._pending[cell] = self._pending.get(cell, 0) + delta
            self._start_ticker()

    def _own(self, key_id: str, limits: KeyLimits, now: float) -> dict[str, int]:
        """What this process's leases of the key's current windows hold unused, by
        `scope:column` (for a refusal's headers: taken from the rows, not used)."""
        windows = {"minute": int(now) // 60 * 60}
        if limits.budget is not None:
            windows["budget"] = period_bounds(limits.budget_period or "month", now)[0]
        return {
            f"{counter[1]}:{counter[2]}": lease.available
            for counter, lease in self._leases.items()
            if counter[0] == key_id and windows.get(counter[1]) == lease.window
        }

    async def _take(
        self, key_id: str, limits: KeyLimits, now: float, needs: list[Need], kind: str
    ) -> None:
        """The needs the leases cannot serve: what the leases hold, the rest (plus a new
        block) from the rows in one transaction, all or nothing (RateLimited)."""
        async with self._lock(key_id):
            if self._spend(needs):  # refilled while this one waited
                return
            leases = [self._lease(counter, window, limit) for counter, window, limit, _ in needs]
            held = [
                min(lease.available, need[3]) for lease, need in zip(leases, needs, strict=True)
            ]
            for lease, have in zip(leases, held, strict=True):
                lease.available -= have
                lease.touched = True
            asks = [
                (need, need[3] - have, _block(lease, need[3] - have, need[3], need[0][1]))
                for lease, need, have in zip(leases, needs, held, strict=True)
            ]

            def take(connection: sa.Connection) -> tuple[list[Window], list[tuple[int, int]]]:
                ensured: list[Window] = []
                got: list[tuple[int, int]] = []
                for (counter, window, limit, need), short, block in asks:
                    if short <= 0:
                        got.append((0, -1))
                        continue
                    self._ensure(connection, counter[0], counter[1], window, ensured)
                    column = quota_usage.c[counter[2]]
                    for amount in (short + block, short) if block > 0 else (short,):
                        row = connection.execute(
                            usage_row(counter[0], counter[1], window)
                            .where(column + amount <= limit)
                            .values({counter[2]: column + amount})
                            .returning(column)
                        ).first()
                        if row is not None:
                            got.append((amount - short, limit - int(row[0])))
                            break
                    else:
                        own = self._own(key_id, limits, now)
                        for (c, _, _, _), have in zip(needs, held, strict=True):
                            cell = f"{c[1]}:{c[2]}"
                            own[cell] = own.get(cell, 0) + have
                        scope = "requests" if kind == "requests" else counter[1]
                        raise refusal(connection, key_id, limits, now, need, scope, own)
                return ensured, got

            try:
                ensured, got = await self.database.transact(take)
            except BaseException:
                for (counter, _, _, _), lease, have in zip(needs, leases, held, strict=True):
                    self._give(counter, lease, have)
                raise
            self._remember(ensured)
            for (counter, _, _, _), lease, (extra, left) in zip(needs, leases, got, strict=True):
                if left >= 0:
                    lease.left = left
                    lease.refills += 1
                self._give(counter, lease, extra)
            self._start_ticker()

    def _lock(self, key_id: str) -> asyncio.Lock:
        self._bind()
        lock = self._locks.get(key_id)
        if lock is None:
            if len(self._locks) > 10_000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            lock = self._locks[key_id] = asyncio.Lock()
        return lock

    def _bind(self) -> None:
        """Locks and the flush task belong to the running loop (a new loop: new ones)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._locks = {}
            self._ticker = None
            self._stop = asyncio.Event()
            self._flushing = asyncio.Lock()

    def _start_ticker(self) -> None:
        self._bind()
        if self._ticker is None or self._ticker.done():
            assert self._stop is not None
            if self._stop.is_set():  # closing: close() flushes what is left
                return
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        stop = self._stop
        assert stop is not None
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), FLUSH_SECONDS)
            if stop.is_set():
                return
            try:
                await self._flush(everything=False)
            except Exception:
                log.warning(
                    "could not write back quota leases (kept for the next flush)", exc_info=True
                )
            if not self._leases and not self._pending:
                return

    async def flush(self) -> None:
        """Give every lease back and write every pending settlement now."""
        self._bind()
        await self._flush(everything=True)

    async def close(self) -> None:
        """Stop the flush task and give everything back (the Store's close)."""
        if self._loop is not None and self._loop is asyncio.get_running_loop():
            assert self._stop is not None
            self._stop.set()
            if self._ticker is not None:
                await asyncio.gather(self._ticker, return_exceptions=True)
        if self._leases or self._pending:
            self._bind()
            await self._flush(everything=True)

    async def _flush(self, *, everything: bool) -> None:
        assert self._flushing is not None
        async with self._flushing:
            for counter, lease in list(self._leases.items()):
                give = 0
                if everything or not lease.touched:
                    give = lease.available
                    del self._leases[counter]
                elif lease.available > max(lease.limit // LEASE_CEILING, 0):
                    give = lease.available - lease.limit // LEASE_CEILING
                    lease.available -= give
                lease.touched = False
                if give:
                    cell = (*counter, lease.window)
                    self._pending[cell] = self._pending.get(cell, 0) - give
            writes = {cell: delta for cell, delta in self._pending.items() if delta}
            self._pending = {}
            if not writes:
                return

            try:
                await self._write(writes)
            except BaseException:
                for cell, delta in writes.items():
                    self._pending[cell] = self._pending.get(cell, 0) + delta
                raise

    async def _write(self, writes: dict[Cell, int]) -> None:
        """Add each delta to its row (never below 0), in one transaction."""

        def write(connection: sa.Connection) -> None:
            sqlite = connection.dialect.name == "sqlite"
            for (key_id, scope, name, window), delta in sorted(writes.items()):
                column = quota_usage.c[name]
                value = column + delta
                connection.execute(
                    usage_row(key_id, scope, window).values(
                        {name: sa.func.max(value, 0) if sqlite else sa.func.greatest(value, 0)}
                    )
                )

        await self.database.transact(write)

    def _ensure(
        self, connection: sa.Connection, key_id: str, scope: str, starts: int, ensured: list[Window]
    ) -> None:
        """The window's row exists; added to `ensured`, remembered once the transaction
        committed (`_remember`: a refusal rolls back the insert too)."""
        row = (key_id, scope, starts)
        if row in self._rows:
            return
        ensure_row(connection, key_id, scope, starts)
        ensured.append(row)

    def _remember(self, rows: Iterable[Window]) -> None:
        if len(self._rows) > 10_000:
            self._rows.clear()
        self._rows.update(rows)

    async def usage(self) -> dict[str, KeyUsage]:
        """Each key's spending in its current windows (for `toolwire keys list` and /ui):
        this process's leases are given back first; other processes' unused leases count as
        taken (see the module docstring)."""
        if self._leases or self._pending:
            await self.flush()
        now = self.clock()
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


def _token_needs(key_id: str, limits: KeyLimits, now: float, tokens: int) -> list[Need]:
    needs: list[Need] = []
    if limits.tpm is not None:
        needs.append(((key_id, "minute", "tokens"), int(now) // 60 * 60, limits.tpm, tokens))
    if limits.budget is not None:
        start = period_bounds(limits.budget_period or "month", now)[0]
        needs.append(((key_id, "budget", "tokens"), start, limits.budget, tokens))
    return needs


def _block(lease: Lease, short: int, need: int, scope: str) -> int:
    """The new block a take asks for beyond the `short` it lacks of a request's `need` (see
    the module docstring): a minute's doubles with each refill in the minute."""
    if short <= 0:
        return 0
    left = lease.left if lease.left is not None else lease.limit
    most = need * LEASE_REQUESTS
    if scope == "minute":
        most <<= min(lease.refills, 10)
    return max(min((left - short) // LEASE_SHARE, lease.limit // LEASE_CEILING, most), 0)
