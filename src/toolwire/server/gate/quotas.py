"""Per-key limits at the server's edges (the counting itself is `store/quotas.py`).

Two hooks, so every door is covered without knowing the details:

- a door calls `await admit(store, owner, body, max_output)` once a request, after checking
  it and before running it: the request counts against the key's requests per minute and is
  refused (429, OpenAI's shape and `x-ratelimit-*` headers) when its estimate no longer fits
  the tokens per minute or the budget;
- `QuotaUpstream` wraps the upstream every run calls, so each model call reserves its worst
  case (prompt estimate + most output) before the upstream is called and settles on the
  usage the upstream reported after. Tool loops, compaction and every door share it.

The owner is the request's API key (`store.owner.current_owner`, set by the auth middleware
and inherited by the tasks a request starts).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from toolwire.store.database import Store
from toolwire.store.owner import current_owner
from toolwire.store.quotas import QuotaStore, Reservation
from toolwire.upstream.base import Sampling, TurnRequest, Upstream
from toolwire.upstream.events import ModelEvent, Usage

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
    """The one line a door calls before running a request: 429 when the key's limits refuse
    it. `body`: what the caller sent (for the estimate)."""
    await store.quotas.admit(owner, estimate(body, max_output))


async def admit_tokens(
    store: Store, owner: str | None, prompt_tokens: int, sampling: Sampling
) -> None:
    """`admit` for a door that has counted its prompt already (the Messages door counts it
    with the upstream's tokenizer to fit the window): the real count, not an estimate."""
    most = sampling.max_output_tokens or DEFAULT_OUTPUT_RESERVE
    await store.quotas.admit(owner, prompt_tokens + most)


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
        owner = current_owner.get()
        reservation = None
        if owner is not None:
            worst = estimate(_turn_size(request), request.sampling.max_output_tokens)
            reservation = await self.quotas.reserve(owner, worst)  # RateLimited: the run fails
        used = 0
        try:
            async for event in self.inner.stream_turn(request):
                if isinstance(event, Usage):
                    used += event.input_tokens + event.output_tokens
                yield event
        finally:
            if reservation is not None:
                self._settle(reservation, used)

    async def stream_turn_batches(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """`stream_turn` in the inner adapter's batches (`upstream/base.py`'s `turn_batches`),
        reserved and settled the same way: `__getattr__` must not hand the inner adapter's
        batches out past the quota."""
        batches = getattr(self.inner, "stream_turn_batches", None)
        if batches is None:
            async for event in self.stream_turn(request):
                yield [event]
            return
        owner = current_owner.get()
        reservation = None
        if owner is not None:
            worst = estimate(_turn_size(request), request.sampling.max_output_tokens)
            reservation = await self.quotas.reserve(owner, worst)  # RateLimited: the run fails
        used = 0
        try:
            async for batch in batches(request):
                for event in batch:
                    if isinstance(event, Usage):
                        used += event.input_tokens + event.output_tokens
                yield batch
        finally:
            if reservation is not None:
                self._settle(reservation, used)

    def _settle(self, reservation: Reservation, used: int) -> None:
        """Settled in a task of its own: a cancelled call (the client left) still gives its
        reservation back."""
        task = asyncio.get_running_loop().create_task(self.quotas.settle(reservation, used))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    async def list_models(self) -> list[dict[str, Any]]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        if self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)
        await self.inner.aclose()
