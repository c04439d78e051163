"""Leases and the durable background queue: the `replicas` and `runs` tables.

Every response that is running or queued has a row in `runs`. A running one names the replica
(one `toolwire serve` process) that owns it; the replica's heartbeat in `replicas` is the
lease. A replica whose heartbeat is older than the lease, or that is gone from this very host
(same host and PID namespace, its pid no longer alive), is dead: the next replica to sweep
finalizes its foreground responses as failed and puts its background jobs back in the queue.

A background response is a job: its row keeps the request (body and owner), so any replica
can claim it (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: one writer), run it, resume it,
or cancel it (`cancel_requested`, polled by the replica that runs it). On PostgreSQL both a
new job and a cancel flag also wake every replica through `NOTIFY` (`store/notify.py`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, cast

import sqlalchemy as sa

from toolwire.store.engine import Database, execute
from toolwire.store.notify import notify_in
from toolwire.store.prepared import Prepared
from toolwire.store.records import QueuedRequest, RunRecord
from toolwire.store.tables import replicas, responses, runs
from toolwire.wire.items import ErrorObject

TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})


def host_key() -> str:
    """This host and PID namespace: pids are comparable between replicas with the same key."""
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = "?"
    return f"{socket.gethostname()}/{namespace}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(slots=True, frozen=True)
class RunChange:
    """What a response write does to the response's run row, in the same transaction."""

    action: Literal["hold", "enqueue", "release"]
    replica_id: str | None = None
    kind: Literal["foreground", "background"] = "foreground"
    request: QueuedRequest | None = None


@dataclass(slots=True, frozen=True)
class Job:
    response_id: str
    request: QueuedRequest
    attempts: int
    cancel_requested: bool


@dataclass(slots=True, frozen=True)
class Orphan:
    """A run whose owner is gone."""

    response_id: str
    kind: str
    replica_id: str | None
    attempts: int
    cancel_requested: bool


# A foreground response's run row, taken and given back with its writes (`store/prepared.py`).
_HOLD = Prepared(runs.insert())
_RELEASE = Prepared(runs.delete().where(runs.c.response_id == sa.bindparam("where_id")))


def apply_change(
    connection: sa.Connection,
    response_id: str,
    change: RunChange,
    now: float,
    *,
    fresh: bool = False,
) -> None:
    """`fresh`: the response is new in this transaction, so it has no run row to update."""
    if change.action == "release":
        _RELEASE.run(connection, {"where_id": response_id})
        return
    if change.action == "enqueue":
        # With `replica_id`, the job is queued already claimed by that replica (the one that
        # took the request and has room): no other replica races it for the job.
        claimed = change.replica_id is not None
        connection.execute(
            runs.insert().values(
                response_id=response_id,
                kind="background",
                state="running" if claimed else "queued",
                replica_id=change.replica_id,
                request=change.request,
                attempts=0,
                cancel_requested=False,
                created_at=now,
                updated_at=now,
            )
        )
        if not claimed:
            notify_in(connection, "job")  # replicas claim it now, not at their next poll
        return
    updated = None
    if not fresh:
        updated = connection.execute(
            runs.update()
            .where(runs.c.response_id == response_id)
            .values(state="running", replica_id=change.replica_id, updated_at=now)
        )
    if updated is None or updated.rowcount == 0:
        _HOLD.run(
            connection,
            {
                "response_id": response_id,
                "kind": change.kind,
                "state": "running",
                "replica_id": change.replica_id,
                "request": change.request,
                "attempts": 0,
                "cancel_requested": False,
                "created_at": now,
                "updated_at": now,
            },
        )


class RunStore:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.transact = database.transact

    # -- replicas -------------------------------------------------------------------------

    async def register(self, replica_id: str, host: str, pid: int, now: float) -> None:
        insert = replicas.insert().values(
            id=replica_id, host=host, pid=pid, started_at=now, heartbeat_at=now
        )
        await self.transact(partial(execute, insert))

    async def heartbeat(self, replica_id: str, host: str, pid: int, now: float) -> None:
        """Renew the lease; a replica another one took for dead (a long pause) comes back."""

        def beat(connection: sa.Connection) -> None:
            updated = connection.execute(
                replicas.update().where(replicas.c.id == replica_id).values(heartbeat_at=now)
            )
            if updated.rowcount == 0:
                connection.execute(
                    replicas.insert().values(
                        id=replica_id, host=host, pid=pid, started_at=now, heartbeat_at=now
                    )
                )

        await self.transact(beat)

    async def retire(self, replica_id: str) -> None:
        await self.transact(partial(execute, replicas.delete().where(replicas.c.id == replica_id)))

    async def dead_replicas(
        self,
        replica_id: str,
        now: float,
        lease: float,
        host: str,
        alive: Callable[[int], bool] = pid_alive,
    ) -> tuple[list[str], set[str]]:
        """(dead replica ids, live replica ids), this one counted live."""
        rows = await self.database.read(
            lambda connection: connection.execute(sa.select(replicas)).all()
        )
        dead: list[str] = []
        live = {replica_id}
        for row in rows:
            if row.id == replica_id:
                continue
            if now - row.heartbeat_at > lease or (row.host == host and not alive(row.pid)):
                dead.append(row.id)
            else:
                live.add(row.id)
        return dead, live

    async def forget_replicas(self, ids: Sequence[str]) -> None:
        if ids:
            delete = replicas.delete().where(replicas.c.id.in_(ids))
            await self.transact(partial(execute, delete))

    # -- orphans --------------------------------------------------------------------------

    async def orphans(
        self,
        replica_id: str,
        dead: set[str],
        live: set[str],
        local: set[str],
        now: float,
        lease: float,
        grace: float,
    ) -> list[Orphan]:
        """Running rows nobody runs: those of dead replicas; those of replicas with no row at
        all, once older than `lease`; this replica's own rows that it does not run (a final
        write that failed), once older than `grace`."""
        query = sa.select(
            runs.c.response_id,
            runs.c.kind,
            runs.c.replica_id,
            runs.c.attempts,
            runs.c.cancel_requested,
            runs.c.updated_at,
        ).where(runs.c.state == "running")
        rows = await self.database.read(lambda connection: connection.execute(query).all())
        found = []
        for row in rows:
            age = now - row.updated_at
            if row.replica_id == replica_id:
                lost = row.response_id not in local and age > grace
            elif row.replica_id in dead:
                lost = True
            else:
                lost = row.replica_id not in live and age > lease
            if lost:
                found.append(
                    Orphan(
                        row.response_id,
                        row.kind,
                        row.replica_id,
                        row.attempts,
                        row.cancel_requested,
                    )
                )
        return found

    async def requeue(self, orphan: Orphan, now: float) -> bool:
        """Put a background job back in the queue (only if its row is still as found)."""
        update = (
            runs.update()
            .where(
                runs.c.response_id == orphan.response_id,
                runs.c.state == "running",
                _same_replica(orphan.replica_id),
            )
            .values(state="queued", replica_id=None, attempts=runs.c.attempts + 1, updated_at=now)
        )

        def requeue(connection: sa.Connection) -> bool:
            if not connection.execute(update).rowcount:
                return False
            notify_in(connection, "job")
            return True

        return await self.transact(requeue)

    async def release(self, response_id: str, replica_id: str, now: float) -> None:
        """Give a job back to the queue as is (a replica shutting down)."""
        update = (
            runs.update()
            .where(runs.c.response_id == response_id, runs.c.replica_id == replica_id)
            .values(state="queued", replica_id=None, updated_at=now)
        )
        await self.transact(partial(execute, update))

    async def finalize(
        self,
        response_id: str,
        status: str,
        error: ErrorObject | None,
        completed_at: int,
        *,
        replica_id: str | Literal[False] | None = False,
    ) -> bool:
        """End a response nobody runs any more: its stored body gets `status` (and `error`),
        items still in progress are marked incomplete, and its run row goes, in one
        transaction. Only a response still queued or in progress changes; with `replica_id`
        (not False), only while its run row still names that replica (or none)."""

        def finalize(connection: sa.Connection) -> bool:
            if replica_id is not False:
                row = connection.execute(
                    sa.select(runs.c.replica_id).where(runs.c.response_id == response_id)
                ).first()
                if row is not None and row.replica_id != replica_id:
                    return False
            stored = connection.execute(
                sa.select(responses.c.body).where(responses.c.id == response_id)
            ).first()
            connection.execute(runs.delete().where(runs.c.response_id == response_id))
            if stored is None or stored.body.get("status") in TERMINAL:
                return False
            body = dict(stored.body)
            body["status"] = status
            body["error"] = error
            body["completed_at"] = completed_at
            output = [dict(item) for item in body.get("output") or []]
            for item in output:
                if item.get("status") == "in_progress":
                    item["status"] = "incomplete"
            body["output"] = output
            connection.execute(
                responses.update()
                .where(responses.c.id == response_id)
                .values(status=status, body=body)
            )
            return True

        return await self.transact(finalize)

    # -- the queue ------------------------------------------------------------------------

    async def claim(
        self, replica_id: str, limit: int, now: float, response_id: str | None = None
    ) -> list[Job]:
        """Up to `limit` queued jobs (oldest first), or the one named, now running here."""
        if limit <= 0:
            return []

        def take(connection: sa.Connection) -> list[Job]:
            query = sa.select(
                runs.c.response_id, runs.c.request, runs.c.attempts, runs.c.cancel_requested
            ).where(runs.c.state == "queued")
            if response_id is not None:
                query = query.where(runs.c.response_id == response_id)
            query = query.order_by(runs.c.created_at).limit(limit)
            if connection.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            jobs = []
            for row in connection.execute(query).all():
                updated = connection.execute(
                    runs.update()
                    .where(runs.c.response_id == row.response_id, runs.c.state == "queued")
                    .values(state="running", replica_id=replica_id, updated_at=now)
                )
                if updated.rowcount:
                    jobs.append(
                        Job(
                            row.response_id,
                            cast(QueuedRequest, dict(row.request or {})),
                            row.attempts,
                            row.cancel_requested,
                        )
                    )
            return jobs

        return await self.transact(take)

    async def request_cancel(self, response_id: str) -> str | None:
        """Flag a run for cancelling: its state (`queued` / `running`), or None if it has no
        run row (it is not running anywhere)."""

        def flag(connection: sa.Connection) -> str | None:
            row = connection.execute(
                sa.select(runs.c.state).where(runs.c.response_id == response_id)
            ).first()
            if row is None:
                return None
            connection.execute(
                runs.update().where(runs.c.response_id == response_id).values(cancel_requested=True)
            )
            notify_in(connection, "cancel")  # the replica running it stops it now
            return str(row.state)

        return await self.transact(flag)

    async def cancel_requests(self, replica_id: str) -> list[str]:
        query = sa.select(runs.c.response_id).where(
            runs.c.replica_id == replica_id, runs.c.cancel_requested.is_(True)
        )
        return await self.database.read(lambda connection: list(connection.scalars(query)))

    async def run_row(self, response_id: str) -> RunRecord | None:
        query = sa.select(runs).where(runs.c.response_id == response_id)
        row = await self.database.read(lambda connection: connection.execute(query).first())
        return None if row is None else cast(RunRecord, dict(row._mapping))


def _same_replica(replica_id: str | None) -> sa.ColumnElement[bool]:
    return runs.c.replica_id.is_(None) if replica_id is None else runs.c.replica_id == replica_id
