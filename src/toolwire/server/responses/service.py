"""`/v1/responses`: prepare a request (`server/responses/prepare/preparer.py`) and run it one of
three ways: JSON, SSE (or WebSocket messages), or in the background (`server/responses/durable.py`).
The driver runs it; the Responses stream (`server/responses/stream.py`) is the only producer of wire
events; the recorder (`server/responses/record.py`) is the only writer of the stored response.
Nothing here decides how a run goes: the driver does.

Durability (`server/responses/durable.py`): a stored response that runs holds a lease (its row in
`runs` names this replica) from `RunStarted` to `LoopFinished`. A background response is a durable
job: queued in the database, claimed by any replica, checkpointed at each step (before and after
server-side tools run), resumed from its last step if its process dies, cancellable from any
replica. A stream's terminal event goes out only once the final write is done; a write that fails
(after retries) makes the response `failed`, never a stream that just ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson

from toolwire.errors import RunStatus
from toolwire.loop.pump import pump_batches
from toolwire.loop.state import Cancellation, RunOutcome
from toolwire.observe.setup import compose
from toolwire.observe.timeline import Timeline
from toolwire.runtime import Runtime
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.durable import (
    BackgroundQueue,
    DurabilitySettings,
    Replica,
    new_replica_id,
)
from toolwire.server.responses.prepare.preparer import LocalResponse, Prepared, Preparer, Resumption
from toolwire.server.responses.record import ResponseRecorder
from toolwire.server.responses.stream import ResponseStream
from toolwire.upstream.base import ensure_served, routes_models
from toolwire.wire.items import ResponseObject, StreamEvent
from toolwire.wire.sse import FramedEvent, encode_event

__all__ = ["LocalResponse", "Prepared", "ResponsesService"]


class ResponsesService:
    """The `/v1/responses` runs of one app, on the composed `Runtime` (the driver, the store,
    the codecs and settings every door shares)."""

    def __init__(self, runtime: Runtime, durability: DurabilitySettings | None = None) -> None:
        self.runtime = runtime
        self.driver = runtime.driver
        self.store = runtime.store
        self.timelines = runtime.timelines  # observe/: run timelines for /ui
        self.preparer = Preparer(
            store=runtime.store,
            signer=runtime.signer,
            compaction=runtime.compaction,
            default_model=runtime.default_model,
            server_tools=runtime.server_tools,
            loop_settings=runtime.loop_settings,
            mcp_servers=runtime.mcp_servers,
            mcp_pool=runtime.mcp_pool,
            mcp_call_timeout=runtime.mcp_call_timeout,
            web_search=runtime.web_search,
            routes=routes_models(runtime.upstream),
        )
        replica_id = new_replica_id()
        self.recorder = ResponseRecorder(
            runtime.store, replica_id, runtime.timelines, runtime.compaction
        )
        # the sweep of dead replicas' runs finalizes them through the one writer
        self.replica = Replica(
            runtime.store, durability, replica_id=replica_id, finalize=self.recorder.finalize
        )
        self.queue = BackgroundQueue(
            runtime.store, self.replica, self.recorder, prepare=self.prepare, run=self._run_job
        )
        self.background = self.queue.background
        """Background responses running in this process."""

    async def start(self) -> None:
        """Join the replicas on this database: finalize what dead ones left, take jobs."""
        await self.replica.start(self.queue)

    async def stop(self) -> None:
        """Shut down: background runs here go back to the queue (another replica, or this
        one restarted, resumes them), then the lease is given up."""
        await self.queue.stop()
        await self.replica.stop()

    async def prepare(
        self,
        body: Any,
        *,
        owner: str | None = None,
        local: LocalResponse | None = None,
        resume: Resumption | None = None,
        session: str | None = None,
        raw: bytes | None = None,
    ) -> Prepared:
        """`local`: a response the caller holds (WebSocket mode), found by
        `previous_response_id` before the store is asked; `resume`: a queued job;
        `session`: the client's session id, a routing hint (`upstream/fleet/affinity.py`)."""
        prepared = await self.preparer.prepare(
            body, owner=owner, local=local, resume=resume, session=session, raw=raw
        )
        ensure_served(self.driver.upstream, prepared.loop_request.model)
        return prepared

    # -- the three ways to run ------------------------------------------------------------

    async def _run(
        self,
        prepared: Prepared,
        draft: ResponseDraft,
        *,
        streamed: bool = False,
        cancellation: Cancellation | None = None,
    ) -> RunOutcome:
        """The run's events go to the sink (wire events) and the timeline (kept with the
        record); none comes back into this module."""
        timeline = Timeline(prepared.loop_request)  # observe/: an observer of the run's events
        response_id = prepared.response_id
        await self.replica.join()  # a service never `start()`ed still holds a lease
        self.replica.active.add(response_id)
        try:
            state = await self.driver.run(
                prepared.loop_request,
                compose(draft, timeline),
                checkpoint=self.recorder.checkpoint(
                    prepared, draft, streamed=streamed, timeline=timeline
                ),
                cancellation=cancellation,
                services=prepared.services,
            )
        finally:
            self.replica.active.discard(response_id)
        assert state.outcome is not None
        return state.outcome

    async def create(self, prepared: Prepared) -> ResponseObject | orjson.Fragment:
        """Non-streaming: the finished response (the JSON its write stored, when stored), or
        the error if the run failed (stored as failed either way)."""
        draft = ResponseDraft(prepared.header)
        finished = await self._run(prepared, draft)
        if finished.status is RunStatus.FAILED and finished.error is not None:
            raise finished.error  # a failed final write included (`STORE_ERROR`)
        return draft.answer()

    async def stream(self, prepared: Prepared) -> AsyncIterator[bytes]:
        """Streaming over SSE: `batches`, framed; what is ready goes out in one write."""
        dumps = orjson.dumps
        async with contextlib.aclosing(self.batches(prepared)) as batches:
            async for batch in batches:
                if len(batch) == 1:
                    event = batch[0]
                    yield (
                        event.frame
                        if type(event) is FramedEvent
                        else encode_event(dumps(event), event["type"])
                    )
                else:
                    yield b"".join(
                        [
                            event.frame
                            if type(event) is FramedEvent
                            else encode_event(dumps(event), event["type"])
                            for event in batch
                        ]
                    )

    async def events(self, prepared: Prepared) -> AsyncGenerator[StreamEvent, None]:
        """The stream events one by one (the WebSocket door sends each as a message)."""
        async with contextlib.aclosing(self.batches(prepared)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def batches(self, prepared: Prepared) -> AsyncGenerator[list[StreamEvent], None]:
        """The stream events of a run, in batches of what was ready together, as the SSE and
        WebSocket doors send them: `response.created` goes out before the upstream is even
        called; the terminal event only once the final write is done. Closing this early
        cancels the run."""

        async def run(emit: Any) -> None:
            stream = ResponseStream(prepared.header, emit)
            await self._run(prepared, ResponseDraft(prepared.header, stream), streamed=True)

        async with contextlib.aclosing(pump_batches(run)) as batches:
            async for batch in batches:
                yield batch

    async def _run_job(
        self, prepared: Prepared, draft: ResponseDraft, cancellation: Cancellation
    ) -> RunOutcome:
        return await self._run(prepared, draft, cancellation=cancellation)

    async def start_background(self, prepared: Prepared, body: Any | None = None) -> ResponseObject:
        """Queue the response (`server/responses/durable.py`); it starts here at once if there is
        room."""
        return await self.queue.start_background(prepared, body)

    async def cancel(self, response_id: str, *, owner: str | None = None) -> ResponseObject:
        """Cancel a background response wherever it runs (idempotent)."""
        return await self.queue.cancel(response_id, owner=owner)
