"""This process as one replica among any number on the same database: its lease, the sweep
that finalizes what dead replicas left, and the worker that takes background jobs.

- Lease: the replica's row in `replicas`, its heartbeat renewed every `heartbeat_seconds`.
  Each running response's row in `runs` names its replica.
- Sweep (at start-up, then with every heartbeat): a replica whose heartbeat is older than
  `lease_seconds`, or that is gone from this host (same host and PID namespace, pid dead), is
  dead. Its foreground responses are finalized `failed` (`server_error`); its background jobs
  go back to the queue, to be resumed by whichever replica claims them, until `max_attempts`
  processes died running one (then it fails). A response still in progress is so for at most
  `lease_seconds` + `heartbeat_seconds` after its process died (at once when a process
  restarts on the same host).
- Worker (every `poll_seconds`, and at once when this replica queues a job): claims queued
  jobs up to `max_background` running here, and cancels those whose cancel flag is set (a
  `POST /cancel` that reached another replica). On PostgreSQL a new job or cancel flag wakes
  every replica at once through `LISTEN`/`NOTIFY` (`store/notify.py`); polling remains the
  fallback, and the only way on SQLite.
- Queue (`BackgroundQueue`, next to the replica that runs it): queues a background response
  (its request sealed), runs the jobs this replica claims, prepares a resumed job again in one
  pass after its stored output (`Resumption`), cancels a job wherever it runs, and on shutdown
  tells its runs so (`CancelCause.SHUTDOWN`): the recorder puts them back in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from toolwire.errors import InvalidRequestError, NotFoundError, ToolwireError
from toolwire.loop.events import CancelCause
from toolwire.loop.state import Cancellation, RunOutcome
from toolwire.observe.metrics import BACKGROUND_JOBS
from toolwire.sealed import SECRET_NAME as SEALED_SECRET
from toolwire.sealed import Sealer, SealError
from toolwire.server.responses.draft import ResponseDraft
from toolwire.server.responses.prepare.preparer import Prepared, Resumption, request_body
from toolwire.server.responses.record import ResponseRecorder, resumable
from toolwire.store.database import Store
from toolwire.store.records import QueuedRequest
from toolwire.store.runs import TERMINAL, Job, RunChange, host_key
from toolwire.wire import responses as wire
from toolwire.wire.items import ErrorObject, ResponseObject

log = logging.getLogger("toolwire.durable")

LOST = (
    "the gateway process running this response stopped before it finished (replica {replica} "
    "lost its lease); the response was abandoned"
)
GAVE_UP = (
    "the gateway processes running this background response stopped {attempts} times; it is "
    "not tried again"
)


@dataclass(slots=True, frozen=True)
class DurabilitySettings:
    heartbeat_seconds: float = 2.0
    """How often a replica renews its lease (and sweeps)."""
    lease_seconds: float = 10.0
    """A replica silent this long is dead: its runs are finalized or re-queued."""
    poll_seconds: float = 0.5
    """How often a replica looks for queued jobs and cancel flags."""
    max_background: int = 32
    """Background responses one replica runs at once; the rest wait in the queue."""
    max_attempts: int = 3
    """Processes that may die running one background response before it is failed."""
    cancel_wait_seconds: float = 3.0
    """How long `POST /cancel` waits for another replica to stop the run."""


class JobRunner(Protocol):
    background: dict[str, asyncio.Task[None]]

    def launch(self, job: Job) -> None: ...

    def cancel_local(self, response_id: str) -> bool: ...


class Finalize(Protocol):
    async def __call__(
        self, response_id: str, status: str, error: ErrorObject | None = None
    ) -> None: ...


def new_replica_id() -> str:
    return "rep_" + secrets.token_hex(8)


class Replica:
    def __init__(
        self,
        store: Store,
        settings: DurabilitySettings | None = None,
        *,
        replica_id: str | None = None,
        finalize: Finalize | None = None,
    ) -> None:
        """`finalize`: how the sweep ends a dead replica's response: the recorder's, the one
        writer of stored responses."""
        self.store = store
        self.settings = settings or DurabilitySettings()
        self.id = replica_id or new_replica_id()
        self._finalize = finalize or self._finalize_in_store
        self.host = host_key()
        self.pid = os.getpid()
        self.active: set[str] = set()
        """Responses running in this process (foreground and background)."""
        self.started = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._runner: JobRunner | None = None
        self._listener = store.listener(lambda _payload: self.wake())

    async def start(self, runner: JobRunner) -> None:
        """Register, sweep what dead replicas left, then keep the lease and take jobs."""
        self._runner = runner
        if not self.started:  # else `join` registered it already
            await self.store.runs.register(self.id, self.host, self.pid, time.time())
            self.started = True
        await self.sweep()
        await self._listener.start()
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"toolwire-replica-{self.id}")

    async def join(self) -> None:
        """Hold a lease without taking jobs: a service used without `start()` (the library,
        an embedding app) still runs responses whose rows name this replica, and another
        replica on the database must see it alive, not sweep its runs as orphans."""
        if self.started:
            return
        self.started = True
        try:
            await self.store.runs.register(self.id, self.host, self.pid, time.time())
        except BaseException:
            self.started = False
            raise
        self._task = asyncio.create_task(self._loop(), name=f"toolwire-replica-{self.id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._listener.stop()
        if self.started:
            with contextlib.suppress(Exception):
                await self.store.runs.retire(self.id)
            self.started = False

    def wake(self) -> None:
        self._wake.set()

    async def _finalize_in_store(
        self, response_id: str, status: str, error: ErrorObject | None = None
    ) -> None:
        await self.store.runs.finalize(response_id, status, error, wire.now())

    async def _loop(self) -> None:
        settings = self.settings
        next_beat = time.monotonic() + settings.heartbeat_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settings.poll_seconds):
                    await self._wake.wait()
            self._wake.clear()
            try:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + settings.heartbeat_seconds
                    await self.store.runs.heartbeat(self.id, self.host, self.pid, time.time())
                    await self.sweep()
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database may be away for a while: keep trying
                log.exception("replica %s: lease, sweep or queue poll failed", self.id)

    async def poll(self) -> None:
        runner = self._runner
        if runner is None:
            return
        if runner.background:
            for response_id in await self.store.runs.cancel_requests(self.id):
                runner.cancel_local(response_id)
        room = self.settings.max_background - len(runner.background)
        for job in await self.store.runs.claim(self.id, room, time.time()):
            runner.launch(job)

    async def sweep(self) -> int:
        """Finalize or re-queue the runs of dead replicas; how many were handled."""
        settings = self.settings
        runs = self.store.runs
        now = time.time()
        dead, live = await runs.dead_replicas(self.id, now, settings.lease_seconds, self.host)
        orphans = await runs.orphans(
            self.id,
            set(dead),
            live,
            set(self.active),
            now,
            settings.lease_seconds,
            settings.heartbeat_seconds,
        )
        for orphan in orphans:
            if orphan.kind == "background" and orphan.cancel_requested:
                await self._finalize(orphan.response_id, "cancelled")
            elif orphan.kind == "background" and orphan.attempts + 1 < settings.max_attempts:
                if await runs.requeue(orphan, now):
                    log.warning("re-queued background response %s", orphan.response_id)
                    self.wake()
            else:
                message = (
                    GAVE_UP.format(attempts=orphan.attempts + 1)
                    if orphan.kind == "background"
                    else LOST.format(replica=orphan.replica_id)
                )
                error = wire.error_object("server_error", message)
                await self._finalize(orphan.response_id, "failed", error)
                log.warning("finalized response %s: %s", orphan.response_id, message)
        await runs.forget_replicas(dead)
        return len(orphans)


Run = Callable[[Prepared, ResponseDraft, Cancellation], Awaitable[RunOutcome]]
Prepare = Callable[..., Awaitable[Prepared]]


class BackgroundQueue:
    """Background responses: a durable queue in the database. This replica queues them, runs
    the jobs it claims (`Replica.poll`), resumes those a dead process left, and cancels them
    wherever they run. It is the `JobRunner` of its `Replica`."""

    def __init__(
        self,
        store: Store,
        replica: Replica,
        recorder: ResponseRecorder,
        *,
        prepare: Prepare,
        run: Run,
    ) -> None:
        self.store = store
        self.replica = replica
        self.recorder = recorder
        self.prepare = prepare
        self.run = run
        self.background: dict[str, asyncio.Task[None]] = {}
        """Background responses running in this process."""
        self._cancellations: dict[str, Cancellation] = {}
        self._job_sealer: Sealer | None = None

    async def stop(self) -> None:
        """Shut down: background runs here go back to the queue (another replica, or this
        one restarted, resumes them)."""
        tasks = list(self.background.values())
        for response_id, task in self.background.items():
            self._cancellations[response_id].cancel(CancelCause.SHUTDOWN)
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def start_background(self, prepared: Prepared, body: Any | None = None) -> ResponseObject:
        """Queue the response (its request kept, so that any replica can run it); if this
        replica has room, it is queued claimed by this replica and starts here at once."""
        queued = ResponseDraft(prepared.header).body("queued")
        sealer = await self._sealer()
        request: QueuedRequest = {
            # sealed: the body may carry MCP credentials (toolwire/sealed.py)
            "sealed_body": sealer.seal(body if body is not None else request_body(prepared)),
            "owner": prepared.owner,
        }
        await self.replica.join()
        here = len(self.background) < self.replica.settings.max_background
        claim = RunChange(
            "enqueue",
            kind="background",
            request=request,
            replica_id=self.replica.id if here else None,
        )
        await self.recorder.queue(prepared, queued, claim)
        if here:
            self.launch(Job(prepared.response_id, request, 0, False), prepared)
        else:
            self.replica.wake()
        return queued

    def launch(self, job: Job, prepared: Prepared | None = None) -> None:
        """Run a claimed job in this process."""
        response_id = job.response_id
        cancellation = self._cancellations[response_id] = Cancellation()
        task = asyncio.create_task(
            self._work(job, prepared, cancellation), name=f"toolwire-{response_id}"
        )
        self.background[response_id] = task

    def cancel_local(self, response_id: str) -> bool:
        task = self.background.get(response_id)
        if task is None or task.done():
            return False
        self._cancellations[response_id].cancel(CancelCause.CLIENT)
        task.cancel()
        return True

    async def _work(self, job: Job, prepared: Prepared | None, cancellation: Cancellation) -> None:
        response_id = job.response_id
        try:
            if job.cancel_requested:
                await self.recorder.finalize(response_id, "cancelled")
                return
            if prepared is None:
                try:
                    prepared = await self._prepare_job(job)
                except ToolwireError as exc:
                    error = wire.error_object(exc.code or "server_error", exc.message)
                    await self.recorder.finalize(response_id, "failed", error)
                    return
            draft = ResponseDraft(prepared.header, output=prepared.resumed)
            BACKGROUND_JOBS.labels("running").inc()  # observe/
            try:
                await self.run(prepared, draft, cancellation)
            finally:
                BACKGROUND_JOBS.labels("running").dec()
        finally:
            self.background.pop(response_id, None)
            self._cancellations.pop(response_id, None)

    async def _prepare_job(self, job: Job) -> Prepared:
        """A job queued by any replica, prepared here under its own id; if an earlier
        process ran part of it, the run resumes from its last stored step."""
        owner = job.request.get("owner")
        stored = await self.store.get_response(job.response_id, owner=owner)
        if stored is None:
            raise NotFoundError(f"Response with id '{job.response_id}' not found.")
        output = resumable(list(stored.get("output") or []))
        resumption = Resumption(job.response_id, stored["created_at"], output)
        return await self.prepare(await self._job_body(job), owner=owner, resume=resumption)

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

    async def cancel(self, response_id: str, *, owner: str | None = None) -> ResponseObject:
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
            await self.recorder.finalize(
                response_id, "cancelled", replica_id=None if state else False
            )
        deadline = time.monotonic() + self.replica.settings.cancel_wait_seconds
        while True:
            current = await self.store.get_response(response_id, owner=owner) or record
            if current.get("status") in TERMINAL or time.monotonic() >= deadline:
                return current
            await asyncio.sleep(0.05)
