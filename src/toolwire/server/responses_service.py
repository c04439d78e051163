"""`/v1/responses`: a validated request becomes one `LoopRequest` and runs through the driver;
the Responses sink translates its events, and a checkpoint stores the response at the run's
persistence events. Streaming, non-streaming and background share all of it. Nothing here
decides how a run goes: the driver does.

Durability (`server/durable.py`): a stored response that runs holds a lease (its row in `runs`
names this replica) from `RunStarted` to `LoopFinished`. A background response is a durable
job: queued in the database, claimed by any replica, checkpointed at each step (before and
after server-side tools run), resumed from its last step if its process dies, cancellable from
any replica. A stream's terminal event goes out only once the final write is done; a write that
fails (after retries) makes the response `failed`, never a stream that just ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import orjson

from toolwire.config import McpServerConfig, WebSearchConfig
from toolwire.errors import (
    MISSING_MODEL,
    InvalidRequestError,
    NotFoundError,
    RunStatus,
    StopReason,
    StoreError,
    ToolwireError,
)
from toolwire.loop.approvals import ApprovalSigner, approval_decisions
from toolwire.loop.compaction import CompactionCodec, ContextPolicy, expand_compactions
from toolwire.loop.driver import Checkpoint, LoopDriver
from toolwire.loop.events import LoopEvent, LoopFinished, RunStarted, StepReached
from toolwire.loop.items import (
    check_outputs_answer_calls,
    items_to_transcript,
    normalize_input,
    resolve_references,
)
from toolwire.loop.pump import pump_batches
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.observe.metrics import BACKGROUND_JOBS
from toolwire.observe.timeline import Timeline
from toolwire.sealed import SECRET_NAME as SEALED_SECRET
from toolwire.sealed import Sealer, SealError
from toolwire.server.durable import DurabilitySettings, Replica, retrying
from toolwire.server.item_ids import check_storable, check_unique, is_duplicate_key, taken_item
from toolwire.server.mcp_tools import McpServerUse
from toolwire.server.request_tools import RequestTools, request_tools
from toolwire.server.request_tools import tool_choice as choose_tool
from toolwire.server.requests import CreateResponse, parse_create
from toolwire.server.responses_sink import ResponseBuilder, ResponseHeader
from toolwire.store.database import Store
from toolwire.store.runs import TERMINAL, Job, RunChange
from toolwire.store.timelines import TimelineStore
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.mcp.toolset import McpToolset
from toolwire.upstream.base import Sampling, Upstream
from toolwire.wire import responses as wire
from toolwire.wire.sse import encode_event

log = logging.getLogger("toolwire.server")


@dataclass(slots=True)
class Prepared:
    request: CreateResponse
    header: ResponseHeader
    input_items: list[dict[str, Any]]
    history_items: list[dict[str, Any]]
    loop_request: LoopRequest
    client_tools: set[str] = field(default_factory=set)
    owner: str | None = None
    """The API key that owns the response (None when the server runs without keys)."""
    not_offered: list[str] = field(default_factory=list)
    """Requested tool types the model was not offered (`x-toolwire-tools-not-offered`)."""
    history_inline: bool = False
    """The history came from the caller's memory (`LocalResponse`), not the store: a stored
    response keeps a full copy, as its previous response may be stored nowhere."""

    @property
    def response_id(self) -> str:
        return self.header.response_id


@dataclass(slots=True, frozen=True)
class LocalResponse:
    """A finished response its caller holds in memory (WebSocket mode keeps the socket's last
    one): `previous_response_id` naming it continues from `history` without the store, so a
    `store: false` response can be continued on the socket that made it."""

    response_id: str
    history: list[dict[str, Any]]
    """Every item the model had seen when it ended: what a continuation starts from."""

    @classmethod
    def of(cls, prepared: Prepared, final: dict[str, Any]) -> LocalResponse:
        items = prepared.history_items + prepared.input_items + list(final.get("output") or [])
        return cls(final["id"], items)


class ResponsesService:
    def __init__(
        self,
        *,
        upstream: Upstream,
        store: Store,
        default_model: str | None = None,
        server_tools: list[Tool] | None = None,
        loop_settings: LoopSettings | None = None,
        mcp_servers: list[McpServerConfig] | None = None,
        mcp_pool: McpPool | None = None,
        mcp_call_timeout: float = 60.0,
        approval_secret: bytes | None = None,
        web_search: WebSearchConfig | None = None,
        durability: DurabilitySettings | None = None,
    ) -> None:
        self.driver = LoopDriver(upstream)
        # Without a secret from the store (shared by replicas, kept across restarts), requests
        # issued by this process can only be approved while it runs.
        secret = approval_secret or secrets.token_bytes(32)
        self.signer = ApprovalSigner(secret)
        self.compaction = CompactionCodec(secret)  # compaction items (loop/compaction.py)
        self.mcp_configs = {config.label: config for config in mcp_servers or []}
        self.web_search = web_search
        self.mcp_pool = mcp_pool or McpPool()
        self.mcp_call_timeout = mcp_call_timeout
        self.store = store
        self.timelines = TimelineStore(store.engine, store.write)  # observe/: run timelines for /ui
        self.default_model = default_model
        self.server_tools = server_tools or []
        self.loop_settings = loop_settings or LoopSettings()
        self.background: dict[str, asyncio.Task[None]] = {}
        """Background responses running in this process."""
        self.replica = Replica(store, durability)
        self._cancelling: set[str] = set()
        self._draining = False
        self._job_sealer: Sealer | None = None

    async def start(self) -> None:
        """Join the replicas on this database: finalize what dead ones left, take jobs."""
        await self.replica.start(self)

    async def stop(self) -> None:
        """Shut down: background runs here go back to the queue (another replica, or this
        one restarted, resumes them), then the lease is given up."""
        self._draining = True
        tasks = list(self.background.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.replica.stop()

    # -- preparing: HTTP body -> LoopRequest ----------------------------------------------

    async def prepare(
        self, body: Any, *, owner: str | None = None, local: LocalResponse | None = None
    ) -> Prepared:
        """`local`: a response the caller holds (WebSocket mode), found by
        `previous_response_id` before the store is asked."""
        request = parse_create(body)
        model = request.model or self.default_model
        if not model:
            raise InvalidRequestError(MISSING_MODEL, param="model")
        history: list[dict[str, Any]] = []
        conversation_id = request.conversation_id
        inline = local is not None and request.previous_response_id == local.response_id
        if local is not None and inline:
            history = list(local.history)
        elif request.previous_response_id:
            record = await self.store.get_response_record(request.previous_response_id, owner=owner)
            if record is None:
                raise NotFoundError(
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            history = list(record["history"])
        elif conversation_id is not None:
            if await self.store.get_conversation(conversation_id, owner=owner) is None:
                raise NotFoundError(
                    f"Conversation with id '{conversation_id}' not found.", param="conversation"
                )
            history = await self.store.list_items(conversation_id, owner=owner)
        input_items = normalize_input(request.input)
        check_unique(input_items, "input")
        if conversation_id is not None:
            await check_storable(self.store, input_items, "input")
        input_items = resolve_references(input_items, history)
        check_outputs_answer_calls(history, input_items)
        tools = self._request_tools(request.tools)
        tool_choice = self._tool_choice(request, tools)
        approvals = approval_decisions(history, input_items, self.signer, owner)
        header = ResponseHeader(
            wire.new_id("resp"),
            wire.now(),
            model,
            _echo(request, tools.echo),
            client_tools=tools.client,
            web_search=tools.web_search,
            include=frozenset(request.include or ()),
        )
        transcript = items_to_transcript(
            expand_compactions(history, input_items, self.compaction, owner),
            frozenset(approvals.decisions),
            tools.client,
        )
        loop_request = LoopRequest(
            model=model,
            input=transcript,
            resume_calls=approvals.calls,
            approvals=dict(approvals.decisions),
            ledger=self.store,
            approval_ids=partial(self.signer.issue, owner),
            context=self._context_policy(request, input_items, owner),
            run_id=header.response_id,
            instructions=request.instructions,
            tools=self.server_tools,
            toolsets=self._toolsets(tools.mcp_uses, history),
            client_tools=tools.specs,
            caller_tools=tools.client,
            tool_choice=tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            sampling=Sampling(
                temperature=request.temperature,
                top_p=request.top_p,
                max_output_tokens=request.max_output_tokens,
                response_format=_response_format(request),
                extra_body=request.sampling_extras() or None,
            ),
            settings=replace(self.loop_settings, max_tool_calls=request.max_tool_calls),
        )
        return Prepared(
            request=request,
            header=header,
            input_items=input_items,
            history_items=history,
            loop_request=loop_request,
            client_tools={spec.name for spec in tools.specs},
            owner=owner,
            not_offered=tools.not_offered,
            history_inline=inline,
        )

    def _context_policy(
        self, request: CreateResponse, input_items: list[dict[str, Any]], owner: str | None
    ) -> ContextPolicy | None:
        """`context_management` for the loop, or a `compaction_trigger` ending the input (only
        there, as OpenAI requires); compaction items are sealed for this key."""
        triggers = [i for i, item in enumerate(input_items) if item["type"] == "compaction_trigger"]
        if triggers and triggers[0] != len(input_items) - 1:
            raise InvalidRequestError(
                "A compaction_trigger item must be the final input item.",
                param=f"input[{triggers[0]}]",
                code="invalid_value",
            )
        entries = request.context_management or []
        if not entries and not triggers:
            return None
        thresholds = [e.compact_threshold for e in entries if e.compact_threshold is not None]
        codec = self.compaction
        return ContextPolicy(
            seal=lambda context: codec.seal(context, owner),
            compact_threshold=min(thresholds) if thresholds else None,
            compact_now=bool(triggers),
        )

    def _toolsets(
        self, uses: list[McpServerUse], history: list[dict[str, Any]]
    ) -> list[McpToolset]:
        """One toolset per MCP server; a server this history already listed is not listed
        again (its `mcp_list_tools` item is reused, as OpenAI does)."""
        known = {
            item.get("server_label"): item
            for item in history
            if item.get("type") == "mcp_list_tools" and not item.get("error")
        }
        toolsets = []
        for use in uses:
            listed = known.get(use.spec.label)
            toolsets.append(
                McpToolset(
                    use.spec,
                    self.mcp_pool,
                    use.rule,
                    use.allowed,
                    listing=list(listed.get("tools", [])) if listed is not None else None,
                    call_timeout=self.mcp_call_timeout,
                )
            )
        return toolsets

    def _request_tools(self, tools: list[dict[str, Any]]) -> RequestTools:
        taken = {tool.name for tool in self.server_tools}
        return request_tools(tools, self.mcp_configs, self.web_search, taken)

    def _tool_choice(self, request: CreateResponse, tools: RequestTools) -> str | dict[str, Any]:
        return choose_tool(request.tool_choice, tools, {t.name for t in self.server_tools})

    # -- persistence: driven by the run's events -----------------------------------------

    def checkpoint(
        self,
        prepared: Prepared,
        builder: ResponseBuilder,
        outbox: _Outbox | None = None,
        timeline: Timeline | None = None,
    ) -> Checkpoint:
        """Stores the response when the run starts (retrievable while it runs, with its lease),
        at each step of a background run (so another replica can resume it), and when it
        finishes, whatever ended it; a conversation gets the finished turn's items. The
        terminal stream event waits in `outbox` until the final write is done."""
        background = prepared.request.background
        kind: Any = "background" if background else "foreground"
        hold = RunChange("hold", self.replica.id, kind)
        # A non-streaming foreground response is stored once, when it ends: nobody can know
        # its id before the answer carries it (no stream, no job), so an `in_progress` row and
        # a lease would guard nothing, and a crash before the end loses nothing a client saw.
        # Streams and background jobs are stored when they start (their id is out at once).
        stored_at_start = outbox is not None or background
        store = prepared.request.store

        async def record(event: LoopEvent) -> None:
            if isinstance(event, RunStarted):
                if store and stored_at_start:
                    await self._write(
                        lambda: self.persist(
                            prepared, builder.body("in_progress"), run=hold, fresh=not background
                        )
                    )
            elif isinstance(event, StepReached):
                if background:
                    await self._write(lambda: self.persist(prepared, builder.body("in_progress")))
            elif isinstance(event, LoopFinished) and builder.final is not None:
                saved = (
                    partial(self._save_timeline, prepared, timeline, not background)
                    if timeline is not None and store  # observe/: for /ui, same transaction
                    else None
                )
                await self._finished(
                    prepared, builder, event, outbox, stored=stored_at_start, also=saved
                )

        return record

    async def _save_timeline(
        self, prepared: Prepared, timeline: Timeline, fresh: bool, connection: Any
    ) -> None:
        """In the response's final transaction (one commit). A lost timeline must lose no
        answer: the entries are checked to serialize first (the one way they could fail), and
        one that does not is left out."""
        entries = timeline.entries
        try:
            orjson.dumps(entries)
        except TypeError:
            log.warning("the timeline of %s was not stored", prepared.response_id, exc_info=True)
            return
        await self.timelines.save_in(
            connection, prepared.response_id, prepared.header.created_at, entries, fresh=fresh
        )

    async def _write(self, write: Callable[[], Any]) -> None:
        try:
            await retrying(write)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise StoreError(f"the response could not be stored: {exc}") from exc

    async def _finished(
        self,
        prepared: Prepared,
        builder: ResponseBuilder,
        event: LoopFinished,
        outbox: _Outbox | None,
        *,
        stored: bool = True,
        also: Callable[[Any], Any] | None = None,
    ) -> None:
        """`stored`: the response was stored when it started (it holds a lease to release);
        else this is its first and only write."""
        final = builder.final
        assert final is not None
        response_id = prepared.response_id
        if (
            prepared.request.background
            and event.reason is StopReason.CANCELLED
            and self._draining
            and response_id not in self._cancelling
        ):
            # Shutting down: the job goes back to the queue with what it has done so far.
            partial = {**final, "status": "in_progress", "completed_at": None, "error": None}
            with contextlib.suppress(Exception):
                await self.persist(prepared, partial)
                await self.store.runs.release(response_id, self.replica.id, time.time())
            return
        try:
            await self._write(
                lambda: self.persist(
                    prepared,
                    final,
                    run=RunChange("release") if stored else None,
                    finished=stored,
                    fresh=not stored,
                    also=also,
                )
            )
        except StoreError as exc:
            # The run's answer cannot be recorded: the client is told it failed. The lease
            # stays behind; the sweep finalizes the stored response once the database is back.
            failed = _failed(final, exc)
            builder.final = failed
            if outbox is not None:
                outbox.replace(failed)
            return
        finally:
            if outbox is not None:
                outbox.flush()

    async def persist(
        self,
        prepared: Prepared,
        body: dict[str, Any],
        *,
        run: RunChange | None = None,
        finished: bool = False,
        fresh: bool = False,
        also: Callable[[Any], Any] | None = None,
    ) -> None:
        """`fresh`: the response's first write (an insert); `also`: more writes in the same
        transaction."""
        output = body["output"]
        conversation_id = prepared.request.conversation_id
        in_conversation = conversation_id is not None and not prepared.request.previous_response_id
        if prepared.request.store:
            stored = await self.store.save_response(
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
                also=also,
            )
            if not stored:
                return  # finalized meanwhile (cancelled, or taken for lost): that stands
        if conversation_id is not None and body["status"] not in ("queued", "in_progress"):
            try:
                await self.store.add_items(
                    conversation_id, prepared.input_items + output, wire.now(), owner=prepared.owner
                )
            except Exception as exc:
                if not is_duplicate_key(exc):
                    raise
                # A concurrent request stored one of these ids first (the check in `prepare`
                # lost the race): the response is not left saying it completed.
                error = taken_item("input")
                if prepared.request.store:
                    failed = {
                        **body,
                        "status": "failed",
                        # error.code on a response object is one of OpenAI's ResponseErrorCode
                        "error": {"code": "server_error", "message": error.message},
                    }
                    await self.store.save_response(
                        failed,
                        input_items=prepared.input_items,
                        conversation_id=conversation_id,
                        owner=prepared.owner,
                    )
                raise error from None

    # -- the three ways to run ------------------------------------------------------------

    async def _run(
        self, prepared: Prepared, builder: ResponseBuilder, outbox: _Outbox | None = None
    ) -> LoopFinished:
        finished: list[LoopFinished] = []
        timeline = Timeline(prepared.loop_request)  # observe/: an observer of the run's events

        def sink(event: LoopEvent) -> None:
            builder(event)
            timeline(event)
            if isinstance(event, LoopFinished):
                finished.append(event)

        response_id = prepared.response_id
        self.replica.active.add(response_id)
        try:
            await self.driver.run(
                prepared.loop_request,
                sink,
                checkpoint=self.checkpoint(prepared, builder, outbox, timeline),
            )
        finally:
            self.replica.active.discard(response_id)
        return finished[-1]

    async def create(self, prepared: Prepared) -> dict[str, Any]:
        """Non-streaming: the finished response, or the error if the run failed (stored as
        failed either way)."""
        builder = ResponseBuilder(prepared.header, None)
        finished = await self._run(prepared, builder)
        assert builder.final is not None
        if builder.final["status"] == "failed" and finished.status is not RunStatus.FAILED:
            error = builder.final.get("error") or {}
            raise StoreError(str(error.get("message") or "the response could not be stored"))
        if finished.status is RunStatus.FAILED and finished.error is not None:
            raise finished.error
        return builder.final

    async def stream(self, prepared: Prepared) -> AsyncIterator[bytes]:
        """Streaming over SSE: `batches`, framed; what is ready goes out in one write."""
        dumps = orjson.dumps
        async with contextlib.aclosing(self.batches(prepared)) as batches:
            async for batch in batches:
                if len(batch) == 1:
                    yield encode_event(dumps(batch[0]), batch[0]["type"])
                else:
                    yield b"".join([encode_event(dumps(event), event["type"]) for event in batch])

    async def events(self, prepared: Prepared) -> AsyncGenerator[dict[str, Any], None]:
        """The stream events one by one (the WebSocket door sends each as a message)."""
        async with contextlib.aclosing(self.batches(prepared)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def batches(self, prepared: Prepared) -> AsyncGenerator[list[dict[str, Any]], None]:
        """The stream events of a run, in batches of what was ready together, as the SSE and
        WebSocket doors send them: `response.created` goes out before the upstream is even
        called; the terminal event only once the final write is done. Closing this early
        cancels the run."""

        async def run(emit: Any) -> None:
            outbox = _Outbox(emit)
            await self._run(prepared, ResponseBuilder(prepared.header, outbox), outbox)

        async with contextlib.aclosing(pump_batches(run)) as batches:
            async for batch in batches:
                yield batch

    # -- background: a durable queue in the database -------------------------------------

    async def start_background(self, prepared: Prepared, body: Any | None = None) -> dict[str, Any]:
        """Queue the response (its request kept, so that any replica can run it); if this
        replica has room, it is queued claimed by this replica and starts here at once."""
        queued = ResponseBuilder(prepared.header, None).body("queued")
        sealer = await self._sealer()
        request = {
            # sealed: the body may carry MCP credentials (toolwire/sealed.py)
            "sealed_body": sealer.seal(body if body is not None else _request_body(prepared)),
            "owner": prepared.owner,
        }
        here = len(self.background) < self.replica.settings.max_background
        claim = RunChange(
            "enqueue",
            kind="background",
            request=request,
            replica_id=self.replica.id if here else None,
        )
        await self._write(lambda: self.persist(prepared, queued, run=claim))
        if here:
            self.launch(Job(prepared.response_id, request, 0, False), prepared)
        else:
            self.replica.wake()
        return queued

    def launch(self, job: Job, prepared: Prepared | None = None) -> None:
        """Run a claimed job in this process."""
        response_id = job.response_id
        task = asyncio.create_task(self._work(job, prepared), name=f"toolwire-{response_id}")
        self.background[response_id] = task

    def cancel_local(self, response_id: str) -> bool:
        task = self.background.get(response_id)
        if task is None or task.done():
            return False
        self._cancelling.add(response_id)
        task.cancel()
        return True

    async def _work(self, job: Job, prepared: Prepared | None) -> None:
        response_id = job.response_id
        try:
            if job.cancel_requested:
                await self.store.runs.finalize(response_id, "cancelled", None, wire.now())
                return
            resumed: list[dict[str, Any]] = []
            if prepared is None:
                try:
                    prepared, resumed = await self._prepare_job(job)
                except ToolwireError as exc:
                    error = wire.error_object(exc.code or "server_error", exc.message)
                    await self.store.runs.finalize(response_id, "failed", error, wire.now())
                    return
            builder = ResponseBuilder(prepared.header, None)
            builder.output = resumed
            BACKGROUND_JOBS.labels("running").inc()  # observe/
            try:
                await self._run(prepared, builder)
            finally:
                BACKGROUND_JOBS.labels("running").dec()
        finally:
            self.background.pop(response_id, None)
            self._cancelling.discard(response_id)

    async def _prepare_job(self, job: Job) -> tuple[Prepared, list[dict[str, Any]]]:
        """A job queued by any replica, prepared here under its own id; if an earlier
        process ran part of it, the run resumes from its last stored step."""
        owner = job.request.get("owner")
        stored = await self.store.get_response(job.response_id, owner=owner)
        if stored is None:
            raise NotFoundError(f"Response with id '{job.response_id}' not found.")
        prepared = await self.prepare(await self._job_body(job), owner=owner)
        prepared.header = replace(
            prepared.header, response_id=job.response_id, created_at=stored["created_at"]
        )
        prepared.loop_request.run_id = job.response_id
        output = list(stored.get("output") or [])
        if not output:
            return prepared, []
        return prepared, _resume(prepared, output, self.compaction)

    async def _sealer(self) -> Sealer:
        """The key every replica on this database seals job requests with."""
        if self._job_sealer is None:
            self._job_sealer = Sealer(await self.store.secret(SEALED_SECRET))
        return self._job_sealer

    async def _job_body(self, job: Job) -> Any:
        sealed = job.request.get("sealed_body")
        if sealed is None:  # queued before requests were sealed
            return job.request.get("body")
        try:
            return (await self._sealer()).open(sealed)
        except SealError as exc:
            raise ToolwireError(str(exc), code="server_error") from None

    async def cancel(self, response_id: str, *, owner: str | None = None) -> dict[str, Any]:
        """Cancel a background response wherever it runs (idempotent). Here: at once. On
        another replica: its cancel flag is set and that replica stops it within
        `poll_seconds`; this waits up to `cancel_wait_seconds` for the outcome. Queued, or
        left by a dead replica: cancelled here."""
        record = await self.store.get_response(response_id, owner=owner)
        if record is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        if not record.get("background"):
            raise InvalidRequestError(
                "Only background responses can be cancelled.", param="response_id"
            )
        if record.get("status") in TERMINAL:
            return record
        task = self.background.get(response_id)
        if task is not None and not task.done():
            self.cancel_local(response_id)
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return await self.store.get_response(response_id, owner=owner) or record
        runs = self.store.runs
        state = await runs.request_cancel(response_id)
        if state != "running":
            await runs.finalize(
                response_id, "cancelled", None, wire.now(), replica_id=None if state else False
            )
        deadline = time.monotonic() + self.replica.settings.cancel_wait_seconds
        while True:
            current = await self.store.get_response(response_id, owner=owner) or record
            if current.get("status") in TERMINAL or time.monotonic() >= deadline:
                return current
            await asyncio.sleep(0.05)


class _Outbox:
    """A stream's emit that holds back the terminal events (`error`, `response.completed` /
    `.incomplete` / `.failed`) until the final write is done, so a client never sees an
    outcome that was not stored, and sees `response.failed` if the write failed."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self.emit = emit
        self.held: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if event["type"] in _TERMINAL_EVENTS:
            self.held.append(event)
        else:
            self.emit(event)

    def replace(self, failed: dict[str, Any]) -> None:
        """Instead of the held outcome: `error` and `response.failed` with this body."""
        if not self.held:
            return
        number = self.held[0]["sequence_number"]
        error = failed.get("error") or {}
        self.held = [
            {
                "type": "error",
                "sequence_number": number,
                "code": error.get("code"),
                "message": error.get("message"),
                "param": None,
            },
            {"type": "response.failed", "sequence_number": number + 1, "response": failed},
        ]

    def flush(self) -> None:
        for event in self.held:
            self.emit(event)
        self.held = []


_TERMINAL_EVENTS = frozenset(
    {"error", "response.completed", "response.incomplete", "response.failed"}
)

INTERRUPTED = (
    "interrupted: the gateway process running this call stopped; the call may or may not have "
    "run, and it is not run again"
)


def _failed(final: dict[str, Any], exc: StoreError) -> dict[str, Any]:
    return {
        **final,
        "status": "failed",
        "incomplete_details": None,
        "error": wire.error_object(exc.code or "server_error", exc.message),
    }


def _resume(
    prepared: Prepared, output: list[dict[str, Any]], codec: CompactionCodec
) -> list[dict[str, Any]]:
    """Set a prepared run up to go on after the stored `output` of an earlier attempt: items
    left in progress are closed (a server call that had started is reported to the model as
    interrupted, never run again), the transcript is the history plus that output, and MCP
    servers already listed are not listed again. Returns the output the run continues."""
    kept: list[dict[str, Any]] = []
    for original in output:
        item = dict(original)
        if item.get("status") == "in_progress":
            if item.get("type") == "mcp_call":
                item["status"] = "failed"
                item["error"] = INTERRUPTED
            else:
                item["status"] = "incomplete"
        kept.append(item)
    request = prepared.loop_request
    request.input = items_to_transcript(
        expand_compactions(
            prepared.history_items, prepared.input_items + kept, codec, prepared.owner
        ),
        frozenset(),
    )
    request.history = []
    request.resume_calls = []
    request.approvals = {}
    listed = {
        item.get("server_label"): item
        for item in kept
        if item.get("type") == "mcp_list_tools" and not item.get("error")
    }
    for toolset in request.toolsets:
        found = listed.get(toolset.label)
        if toolset.listing is None and found is not None:
            toolset.listing = list(found.get("tools") or [])
    return kept


def _request_body(prepared: Prepared) -> dict[str, Any]:
    """The request as JSON, for callers that did not keep the body they prepared."""
    return prepared.request.model_dump(by_alias=True, exclude_unset=True, mode="json")


def _echo(request: CreateResponse, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request's settings as the response object echoes them, secrets redacted. Fields
    that only steer this request (input, stream, include, client_metadata, pass-through
    sampling extras but the penalties) are not echoed, as OpenAI does not echo them."""
    echo = request.model_dump(
        exclude={
            "input",
            "stream",
            "stream_options",
            "include",
            "client_metadata",
            "context_management",
            "top_k",
            "min_p",
            "typical_p",
            "repetition_penalty",
            "seed",
            "stop",
            "logit_bias",
            "min_tokens",
        },
        by_alias=True,
    )
    conversation_id = request.conversation_id
    echo["temperature"] = 1.0 if request.temperature is None else request.temperature
    echo["top_p"] = 1.0 if request.top_p is None else request.top_p
    echo["presence_penalty"] = request.presence_penalty or 0.0
    echo["frequency_penalty"] = request.frequency_penalty or 0.0
    echo["conversation"] = {"id": conversation_id} if conversation_id else None
    echo["text"] = (
        request.text.model_dump(by_alias=True, exclude_none=True)
        if request.text
        else {"format": {"type": "text"}, "verbosity": "medium"}
    )
    echo["text"].setdefault("verbosity", "medium")
    echo["top_logprobs"] = request.top_logprobs or 0
    echo["tools"] = tools
    echo["truncation"] = request.truncation or "disabled"
    return echo


def _response_format(request: CreateResponse) -> dict[str, Any] | None:
    if request.text is None:
        return None
    fmt = request.text.format
    if fmt.type == "json_schema":
        schema: dict[str, Any] = {"name": fmt.name or "response", "schema": fmt.schema_ or {}}
        if fmt.strict is not None:
            schema["strict"] = fmt.strict
        return {"type": "json_schema", "json_schema": schema}
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return None
