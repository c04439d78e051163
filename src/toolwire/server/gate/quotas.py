"""Per-key limits at the server's edges (the counting itself is `store/quotas.py`).

Two hooks, so every door is covered without knowing the details:

- a door calls `await admit(store, owner, body, max_output)` once a request, after checking
  it and before any upstream work for it: refused (429, OpenAI's shape and `x-ratelimit-*`
  headers) when its estimate no longer fits the tokens per minute or the budget (the request
  was counted against the requests per minute at the gate, `shares.py`); a request that
  stores also calls `admit_storage` (the key's storage quota);
- `QuotaUpstream` wraps the upstream every run calls, so each model call reserves its worst
  case (prompt estimate + most output) before the upstream is called and settles after, on
  what the call cost however it ended (`metering.py`: the usage the upstream reported, or
  what toolwire counted when it reported none, the stream was cut or the client left). Tool
  loops, compaction and every door share it.

The owner is the request's API key (`store.owner.current_owner`, set by the auth middleware
and inherited by the tasks a request starts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from toolwire.server.gate.metering import Meter
from toolwire.store.database import Store
from toolwire.store.owner import current_owner
from toolwire.store.quota_terms import Reservation
from toolwire.store.quotas import QuotaStore
from toolwire.upstream.base import TurnRequest, Upstream, one_by_one
from toolwire.upstream.events import ModelEvent

log = logging.getLogger("toolwire.server")

#: The output a request may produce when it does not say (`max_output_tokens` unset): what
#: is reserved for it. Its real usage is settled after, so this bounds only how far
#: concurrent requests can overrun a limit together.
DEFAULT_OUTPUT_RESERVE = 1024
#: Characters a token, for estimates (English prose and JSON average about 4; fewer
#: characters a token would reserve more).
CHARS_PER_TOKEN = 4


def estimate(content: Any, max_output: int | None) -> int:
    """A worst case in tokens: the serialized request's characters / 4, plus its most
    output."""
    try:
        size = len(orjson.dumps(content, default=repr))
    except TypeError:
        size = len(repr(content))
    return size // CHARS_PER_TOKEN + 1 + (max_output or DEFAULT_OUTPUT_RESERVE)


async def admit(store: Store, owner: str | None, body: Any, max_output: int | None) -> None:
    """The one line a door calls before running a request: 429 when its estimate no longer
    fits the key's tokens per minute or budget. `body`: what the caller sent (for the
    estimate). (The request itself was counted against the requests per minute at the gate:
    `shares.py`.) Without a key, or a key without token limits, nothing is estimated."""
    if owner is None:
        return
    limits = await store.quotas.limits(owner)
    if limits is None or (limits.tpm is None and limits.budget is None):
        return
    await store.quotas.admit(owner, estimate(body, max_output))


async def admit_storage(store: Store, owner: str | None, body: Any) -> None:
    """Before a request that stores what it sent (a response with `store` on, a conversation,
    items): 429 `storage_quota_exceeded` when the key's storage quota is spent
    (`store/storage.py`)."""
    if owner is not None and store.storage.max_bytes > 0:
        await store.storage.check(owner, len(orjson.dumps(body, default=repr)))


def _turn_size(request: TurnRequest) -> Any:
    """What a turn sends, for its estimate (the transcript and the tools on offer)."""
    return [request.transcript, request.tools]


class QuotaUpstream:
    """An `Upstream` that reserves each model call's worst case from the caller's key before
    the call and settles on the real usage after (see the module docstring)."""

    def __init__(self, inner: Upstream, quotas: QuotaStore) -> None:
        self.inner = inner
        self.quotas = quotas
        self.name = inner.name
        self._settling: set[asyncio.Task[None]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ModelEvent]:
        reservation = await self._reserve(request)
        if reservation is None:
            async for event in self.inner.stream_turn(request):
                yield event
            return
        meter = Meter()
        try:
            async for event in self.inner.stream_turn(request):
                meter.see(event)
                yield event
            meter.finished = True
        except BaseException as exc:
            meter.cancelled = not isinstance(exc, Exception)  # GeneratorExit, CancelledError
            raise
        finally:
            self._settle(reservation, meter, request)

    def stream_turn_batches(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """`stream_turn` in the inner adapter's batches (`upstream/base.py`'s `turn_batches`),
        reserved and settled the same way: `__getattr__` must not hand the inner adapter's
        batches out past the quota. A call without a key has nothing to count: the inner
        adapter's own batches, no generator around them."""
        batches = getattr(self.inner, "stream_turn_batches", None)
        if batches is None:
            return one_by_one(self.stream_turn(request))
        if current_owner.get() is None:
            return batches(request)  # type: ignore[no-any-return]
        return self._metered_batches(request, batches)

    async def _metered_batches(
        self,
        request: TurnRequest,
        batches: Callable[[TurnRequest], AsyncIterator[list[ModelEvent]]],
    ) -> AsyncIterator[list[ModelEvent]]:
        reservation = await self._reserve(request)
        if reservation is None:
            async for batch in batches(request):
                yield batch
            return
        meter = Meter()
        try:
            async for batch in batches(request):
                for event in batch:
                    meter.see(event)
                yield batch
            meter.finished = True
        except BaseException as exc:
            meter.cancelled = not isinstance(exc, Exception)  # GeneratorExit, CancelledError
            raise
        finally:
            self._settle(reservation, meter, request)

    async def _reserve(self, request: TurnRequest) -> Reservation | None:
        """The call's worst case, taken from the caller's key (None: nothing to count)."""
        owner = current_owner.get()
        if owner is None:
            return None
        worst = estimate(_turn_size(request), request.sampling.max_output_tokens)
        return await self.quotas.reserve(owner, worst)  # RateLimited: the run fails

    def _settle(self, reservation: Reservation, meter: Meter, request: TurnRequest) -> None:
        """Settled in a task of its own, on what the call cost however it ended
        (`metering.py`): a cancelled call (the client left) is charged too. A call that ran to
        its end with reported usage is settled here, in memory, unless it used more than its
        reservation and the key's lease hold (`store/quotas.py`)."""
        if meter.finished and meter.reported is not None:
            beyond = self.quotas.settle_in_memory(reservation, meter.reported)
            if not beyond:
                return
            task = asyncio.get_running_loop().create_task(self.quotas.write_beyond(beyond))
        else:
            task = asyncio.get_running_loop().create_task(self._charge(reservation, meter, request))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def _charge(self, reservation: Reservation, meter: Meter, request: TurnRequest) -> None:
        most = request.sampling.max_output_tokens or DEFAULT_OUTPUT_RESERVE
        try:
            used = await meter.charge(self.inner, request, reservation.tokens, most)
        except Exception:  # counting failed: charge the reservation, never nothing
            log.warning("could not count a model call's tokens", exc_info=True)
            used = reservation.tokens
        await self.quotas.settle(reservation, used)

    async def list_models(self) -> list[dict[str, Any]]:
        return await self.inner.list_models()

    async def settled(self) -> None:
        """Wait until every call that ended has been settled in the store."""
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)

    async def aclose(self) -> None:
        await self.settled()
        await self.inner.aclose()
