"""The response recorder: the one writer of stored responses. It keeps a run's record from
its checkpoints (the response when it starts, with its lease; each step of a background run;
the final write, with a conversation's new items and the run's `/ui` timeline in the same
transaction), queues background jobs, finalizes them, and sets a resumed run up after the
output an earlier process stored.

The driver awaits the final write before it announces the outcome: a write that fails (after
retries) raises `StoreError`, and the driver ends the run `STORE_ERROR`. Nothing here changes an
outcome; a shutdown (`CancelCause.SHUTDOWN`) only decides what is written: a background job goes
back to the queue with what it has done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

import orjson

from toolwire.errors import ConflictingWrite, StopReason, StoreError
from toolwire.loop.compaction import CompactionCodec
from toolwire.loop.driver import Checkpoint
from toolwire.loop.events import CancelCause, LoopEvent, LoopFinished, RunStarted, StepReached
from toolwire.observe.timeline import Timeline
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.prepare.approval_tools import asks_approval
from toolwire.server.responses.prepare.approval_tools import seal as seal_tools
from toolwire.server.responses.prepare.item_ids import is_duplicate_key, taken_item
from toolwire.server.responses.prepare.preparer import Prepared
from toolwire.store.database import Store, add_items_in
from toolwire.store.engine import Connection, Job
from toolwire.store.failures import transient
from toolwire.store.runs import RunChange
from toolwire.store.sealed_tools import keep_in as keep_sealed_in
from toolwire.store.timelines import TimelineStore
from toolwire.wire import responses as wire
from toolwire.wire.items import ErrorObject, Item, ResponseObject

log = logging.getLogger("toolwire.server")
T = TypeVar("T")

FINALIZED_ELSEWHERE = (
    "the response could not be stored: another replica finalized it first (it took this one "
    "for dead, or the response was cancelled there)"
)


class ResponseRecorder:
    def __init__(
        self, store: Store, replica_id: str, timelines: TimelineStore, compaction: CompactionCodec
    ) -> None:
        self.store = store
        self.replica_id = replica_id
        self.timelines = timelines
        self.compaction = compaction

    def checkpoint(
        self,
        prepared: Prepared,
        draft: ResponseDraft,
        *,
        streamed: bool = False,
        timeline: Timeline | None = None,
    ) -> Checkpoint:
        """Stores the response when the run starts (retrievable while it runs, with its lease),
        at each step of a background run (so another replica can resume it), and when it
        finishes, whatever ended it; a conversation gets the finished turn's items. The driver
        awaits the final write before it announces the outcome, so the terminal stream event
        follows it; a final write that fails raises `StoreError`, which the driver makes the
        outcome."""
        background = prepared.request.background
        kind: Any = "background" if background else "foreground"
        hold = RunChange("hold", self.replica_id, kind)
        # A non-streaming foreground response is stored once, when it ends: nobody can know
        # its id before the answer carries it (no stream, no job), so an `in_progress` row and
        # a lease would guard nothing, and a crash before the end loses nothing a client saw.
        # Streams and background jobs are stored when they start (their id is out at once).
        stored_at_start = streamed or background
        store = prepared.request.store
        started: list[bool] = []  # the start's write is done (a cancel may cut it short)

        async def record(event: LoopEvent) -> None:
            if isinstance(event, RunStarted):
                if store and stored_at_start:
                    body = draft.body("in_progress")
                    await self.persist(prepared, body, run=hold, fresh=not background)
                started.append(True)
            elif isinstance(event, StepReached):
                if background:
                    await self.persist(prepared, draft.body("in_progress"))
            elif isinstance(event, LoopFinished):
                prepared.served_by = event.upstream
                entries = None
                if timeline is not None and store:  # observe/: for /ui, in the same row
                    timeline(event)
                    entries = self.timelines.encode(prepared.response_id, timeline.entries)
                await self._finished(
                    prepared,
                    draft,
                    event,
                    stored=stored_at_start,
                    start_written=bool(started),
                    timeline=entries,
                )

        return record

    async def _write(
        self, write: Callable[[], Awaitable[T]], *, attempts: int = 3, backoff: float = 0.2
    ) -> T:
        """One database call, retried a few times with backoff when it failed transiently; a
        failure that stays is the run's `StoreError`."""
        for attempt in range(attempts):
            try:
                return await write()
            except asyncio.CancelledError:
                raise
            except StoreError:
                raise
            except Exception as exc:
                if attempt == attempts - 1 or not transient(exc):
                    raise StoreError(f"the response could not be stored: {exc}") from exc
                await asyncio.sleep(backoff * 3**attempt)
        raise AssertionError("unreachable: attempts must be at least 1")

    async def _finished(
        self,
        prepared: Prepared,
        draft: ResponseDraft,
        event: LoopFinished,
        *,
        stored: bool = True,
        start_written: bool = True,
        timeline: orjson.Fragment | None = None,
    ) -> None:
        """`stored`: the response was stored when it started (it holds a lease to release);
        else this is its first and only write. `start_written`: that first write finished; a
        run cancelled during it (a client gone right after `response.created`) may have no
        row yet, so its outcome is written whether or not a row is there. `timeline`: the
        run's `/ui` timeline (its JSON), stored with the response. A write that fails
        raises `StoreError`: the lease stays behind, and the sweep finalizes the stored
        response once the database is back."""
        response_id = prepared.response_id
        final = draft.settle(event)
        if prepared.request.background and event.cause is CancelCause.SHUTDOWN:
            # Shutting down: the job goes back to the queue with what it has done so far.
            partial_body = final.copy()
            partial_body["status"] = "in_progress"
            partial_body["completed_at"] = None
            partial_body["error"] = None
            with contextlib.suppress(Exception):
                await self.persist(prepared, partial_body)
                await self.store.runs.release(response_id, self.replica_id, time.time())
            return
        run = RunChange("release") if stored else None
        only_if_active = stored and start_written
        # serialized here, once: the same bytes are stored and, unchanged, answered
        final_json = orjson.dumps(final) if prepared.request.store else None
        try:
            landed = await self.persist(
                prepared,
                final,
                run=run,
                finished=only_if_active,
                fresh=not stored,
                timeline=timeline,
                body_json=final_json,
            )
        except StoreError as exc:
            if exc.__cause__ is None or not is_duplicate_key(exc.__cause__):
                raise
            # A concurrent request stored one of the conversation's new item ids first (the
            # check in `prepare` lost the race): nothing of the final transaction landed. The
            # response is stored failed, as the client is told: the request's 400.
            refused = ConflictingWrite(taken_item("input"))
            failed = draft.settle(
                replace(
                    event, reason=StopReason.STORE_ERROR, message=refused.message, error=refused
                )
            )
            landed = await self.persist(
                prepared,
                failed,
                run=run,
                finished=only_if_active,
                fresh=not stored,
                conversation=False,
            )
            if landed:
                raise refused from None
        if not landed:
            # Another replica finalized the response first (it took this one for dead, or it
            # was cancelled there): what is stored stands, and the client must not be told
            # an outcome other than the stored one.
            raise StoreError(FINALIZED_ELSEWHERE)
        if final_json is not None:
            draft.stored(final, final_json)

    async def persist(
        self,
        prepared: Prepared,
        body: ResponseObject,
        *,
        run: RunChange | None = None,
        finished: bool = False,
        fresh: bool = False,
        timeline: orjson.Fragment | None = None,
        conversation: bool = True,
        body_json: bytes | None = None,
    ) -> bool:
        """The response's write, in one transaction: its row (`fresh`: the first write, an
        insert), its run row (`run`), and once it has ended, a conversation's new items and the
        sealed credentials an approval needs, and the model server that served it (a fleet's:
        `prepared.served_by`); `timeline`: the run's `/ui` timeline, in the response's row;
        `body_json`: `body` serialized, when the caller has it.
        False: the response was finalized meanwhile and nothing was written. Only the database
        call is retried."""
        request = prepared.request
        output = body["output"]
        conversation_id = request.conversation_id
        ended = body["status"] not in ("queued", "in_progress")
        writes: list[Job[object]] = []
        if conversation and conversation_id is not None and ended:
            new_items = prepared.input_items + output
            writes.append(
                partial(
                    add_items_in,
                    conversation_id,
                    new_items,
                    wire.now(),
                    prepared.owner,
                    upstream=prepared.served_by,
                )
            )
        if request.store and body["status"] == "completed" and asks_approval(output):
            sealed = await seal_tools(self.store, request.tools)
            if sealed is not None:
                writes.append(partial(keep_sealed_in, body["id"], prepared.owner, sealed))

        def more(connection: Connection) -> None:
            for write in writes:
                write(connection)

        if not request.store:
            if writes:
                await self._write(lambda: self.store.transact(more))
            return True
        in_conversation = conversation_id is not None and not request.previous_response_id
        return await self._write(
            lambda: self.store.save_response(
                body,
                input_items=prepared.input_items,
                history=(
                    prepared.history_items + prepared.input_items + list(output)
                    if prepared.history_inline
                    else None
                ),
                conversation_id=conversation_id,
                conversation_items=len(prepared.history_items) if in_conversation else None,
                owner=prepared.owner,
                run=run,
                only_if_active=finished,
                fresh=fresh,
                also=more if writes else None,
                upstream=prepared.served_by,
                timeline=timeline,
                body_json=body_json,
            )
        )

    async def queue(self, prepared: Prepared, queued: ResponseObject, claim: RunChange) -> None:
        """A background response's first write: the response `queued`, its job in the queue."""
        await self.persist(prepared, queued, run=claim)

    async def finalize(
        self, response_id: str, status: str, error: ErrorObject | None = None, **run: Any
    ) -> None:
        """A job that ends without running (cancelled while queued, or unpreparable)."""
        await self.store.runs.finalize(response_id, status, error, wire.now(), **run)


INTERRUPTED = (
    "interrupted: the gateway process running this call stopped; the call may or may not have "
    "run, and it is not run again"
)


def resumable(output: list[Item]) -> list[Item]:
    """The stored `output` of an earlier attempt, ready for a run to go on after it: items
    left in progress are closed (a server call that had started is reported to the model as
    interrupted, never run again). Preparation (`Resumption`) lowers it with the history."""
    kept: list[Item] = []
    for original in output:
        item = original.copy()
        if item.get("status") == "in_progress":
            if item.get("type") == "mcp_call":
                item["status"] = "failed"
                item["error"] = INTERRUPTED
            else:
                item["status"] = "incomplete"
        kept.append(item)
    return kept
