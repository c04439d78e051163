"""The store's durable parts on SQLite and on a real PostgreSQL: migrations from every earlier
schema, history by reference (linear storage), leases and the job queue."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from toolwire.errors import ConfigError
from toolwire.store import migrate
from toolwire.store.database import Store
from toolwire.store.runs import RunChange
from toolwire.store.tables import metadata, responses
from toolwire.store.urls import normalize_url

# -- the schemas before this one, frozen as they were --------------------------------------

V0 = sa.MetaData()  # the first release: no owners, no keys, no shared secrets
sa.Table(
    "responses",
    V0,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("previous_response_id", sa.String(80)),
    sa.Column("conversation_id", sa.String(80)),
    sa.Column("body", sa.JSON, nullable=False),
    sa.Column("input_items", sa.JSON, nullable=False),
    sa.Column("history", sa.JSON, nullable=False),
)
sa.Table(
    "conversations",
    V0,
    sa.Column("id", sa.String(80), primary_key=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
)
sa.Table(
    "conversation_items",
    V0,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(80), nullable=False, unique=True),
    sa.Column(
        "conversation_id",
        sa.String(80),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("item", sa.JSON, nullable=False),
)
sa.Table(
    "approvals",
    V0,
    sa.Column("approval_request_id", sa.String(80), primary_key=True),
    sa.Column("response_id", sa.String(80), nullable=False),
    sa.Column("approve", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Integer, nullable=False),
)

V1 = sa.MetaData()  # schema 1: the commit before migrations (owners, keys, secrets)
for old in V0.tables.values():
    new = old.to_metadata(V1)
    if new.name in ("responses", "conversations"):
        new.append_column(sa.Column("owner", sa.String(40), nullable=True, index=True))
sa.Table(
    "api_keys",
    V1,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("prefix", sa.String(20), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Integer, nullable=False),
    sa.Column("revoked_at", sa.Integer, nullable=True),
)
sa.Table(
    "server_secrets",
    V1,
    sa.Column("name", sa.String(80), primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
)


def message(role: str, text: str, item_id: str) -> dict[str, Any]:
    kind = "input_text" if role == "user" else "output_text"
    return {
        "id": item_id,
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": kind, "text": text}],
    }


def body(
    response_id: str, output: list[dict[str, Any]], previous: str | None = None
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "output": output,
        "previous_response_id": previous,
        "background": False,
    }


async def make_old(url: str, schema: sa.MetaData) -> None:
    """A database as an earlier toolwire left it: the old tables, one finished exchange (made
    with an engine of the test's own, as that toolwire made it)."""
    question, answer = message("user", "hi", "msg_q"), message("assistant", "hello", "msg_a")
    values = {
        "id": "resp_old",
        "created_at": 1,
        "status": "completed",
        "previous_response_id": None,
        "conversation_id": None,
        "body": body("resp_old", [answer]),
        "input_items": [question],
        "history": [question, answer],
    }

    def build(connection: sa.Connection) -> None:
        schema.create_all(connection)
        connection.execute(schema.tables["responses"].insert().values(**values))
        connection.execute(
            schema.tables["conversations"].insert().values(id="conv_old", created_at=1, metadata={})
        )
        connection.execute(
            schema.tables["conversation_items"]
            .insert()
            .values(
                id="msg_c",
                conversation_id="conv_old",
                created_at=1,
                item=message("user", "c", "msg_c"),
            )
        )

    url = normalize_url(url)
    serializer = {"json_serializer": lambda v: orjson.dumps(v).decode()}
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, **serializer)
        with engine.begin() as connection:
            build(connection)
        engine.dispose()
        return
    async_engine = create_async_engine(url, **serializer)
    async with async_engine.begin() as connection:
        await connection.run_sync(build)
    await async_engine.dispose()


def schema_differences(connection: sa.Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": False})
    return [d for d in compare_metadata(context, metadata) if d[0] != "remove_table"]


@pytest.mark.parametrize("start", ["empty", "v0", "v1"])
async def test_every_earlier_schema_upgrades_to_the_current_one(
    database_url: str, start: str
) -> None:
    if start != "empty":
        await make_old(database_url, V0 if start == "v0" else V1)
        with pytest.raises(ConfigError, match="toolwire db upgrade"):
            await Store.open(database_url, migrate=False)
    store = await Store.open(database_url)
    try:
        assert store.schema_before is None  # new, or from before migrations
        assert await store.read(migrate.current) == migrate.head()
        # a new database is stamped without Alembic, as Alembic itself reads it back
        assert await store.read(migrate._alembic_current) == migrate.head()
        assert await store.read(schema_differences) == []
        if start != "empty":
            # the old response is there, and a continuation reads its (copied) history
            assert (await store.get_response("resp_old"))["status"] == "completed"  # type: ignore[index]
            follow = body("resp_new", [message("assistant", "again", "msg_b")], "resp_old")
            await store.save_response(
                follow, input_items=[message("user", "more", "msg_m")], conversation_id=None
            )
            record = await store.get_response_record("resp_new")
            assert record is not None
            assert [i["id"] for i in record["history"]] == ["msg_q", "msg_a", "msg_m", "msg_b"]
            # schema 5: the stored items were indexed, the conversation's kept its owner
            found = await store.find_items({"msg_q", "msg_a", "msg_c", "msg_b"}, owner=None)
            assert {k: v["content"][0]["text"] for k, v in found.items()} == {
                "msg_q": "hi",
                "msg_a": "hello",
                "msg_c": "c",
                "msg_b": "again",
            }
            assert await store.find_items({"msg_q", "msg_c"}, owner="key_other") == {}
        await store.secret("approval_requests")  # the security tables exist
        assert await store.keys.listing() == []
    finally:
        await store.close()
    reopened = await Store.open(database_url, migrate=False)  # at head: nothing to do
    assert reopened.schema_before == migrate.head()
    await reopened.close()


async def test_history_is_stored_by_reference_and_grows_linearly(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        previous = None
        for turn in range(30):
            question = message("user", f"question {turn} " + "x" * 200, f"msg_q{turn}")
            answer = message("assistant", f"answer {turn} " + "y" * 200, f"msg_a{turn}")
            await store.save_response(
                body(f"resp_{turn}", [answer], previous),
                input_items=[question],
                conversation_id=None,
            )
            previous = f"resp_{turn}"
        query = sa.select(responses.c.history, responses.c.input_items)
        rows = await store.read(lambda connection: connection.execute(query).all())
        assert all(row.history is None and len(row.input_items) == 1 for row in rows)
        record = await store.get_response_record("resp_29")
        assert record is not None
        assert [i["id"] for i in record["history"]][:4] == ["msg_q0", "msg_a0", "msg_q1", "msg_a1"]
        assert len(record["history"]) == 60
        # deleting a response others continue hides it and keeps their history whole
        assert await store.delete_response("resp_10")
        assert await store.get_response("resp_10") is None
        assert not await store.delete_response("resp_10")
        after = await store.get_response_record("resp_29")
        assert after is not None and len(after["history"]) == 60
        assert await store.delete_response("resp_29")  # nobody continues it: really gone
    finally:
        await store.close()


async def test_conversation_history_is_a_prefix_of_the_conversation(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        await store.create_conversation("conv_1", 1, {})
        first = [message("user", "a", "msg_1"), message("assistant", "b", "msg_2")]
        await store.add_items("conv_1", first, 1)
        question, answer = message("user", "c", "msg_3"), message("assistant", "d", "msg_4")
        await store.save_response(
            body("resp_c", [answer]),
            input_items=[question],
            conversation_id="conv_1",
            conversation_items=2,
        )
        await store.add_items("conv_1", [question, answer, message("user", "e", "msg_5")], 2)
        record = await store.get_response_record("resp_c")
        assert record is not None
        assert [i["id"] for i in record["history"]] == ["msg_1", "msg_2", "msg_3", "msg_4"]
    finally:
        await store.close()


async def test_jobs_are_claimed_once_and_leases_of_dead_replicas_are_found(
    database_url: str,
) -> None:
    store = await Store.open(database_url)
    runs = store.runs
    try:
        now = time.time()
        await runs.register("rep_a", "host-a", 1, now - 60)  # silent for a minute: dead
        await runs.register("rep_b", "host-b", 2, now)
        for n in range(3):
            queued = {**body(f"resp_job{n}", []), "status": "queued"}
            await store.save_response(
                queued,
                input_items=[],
                conversation_id=None,
                run=RunChange("enqueue", kind="background", request={"body": {"n": n}}),
            )
        first = await runs.claim("rep_a", 2, now)
        second = await runs.claim("rep_b", 5, now)
        assert [j.response_id for j in first] == ["resp_job0", "resp_job1"]
        assert [j.response_id for j in second] == ["resp_job2"]
        assert await runs.claim("rep_b", 5, now) == []
        dead, live = await runs.dead_replicas("rep_b", now, 10.0, "host-b")
        assert dead == ["rep_a"] and live == {"rep_b"}
        orphans = await runs.orphans("rep_b", set(dead), live, {"resp_job2"}, now, 10.0, 2.0)
        assert sorted(o.response_id for o in orphans) == ["resp_job0", "resp_job1"]
        assert await runs.requeue(orphans[0], now)
        assert [j.attempts for j in await runs.claim("rep_b", 5, now)] == [1]
        assert await runs.request_cancel("resp_job2") == "running"
        assert await runs.cancel_requests("rep_b") == ["resp_job2"]
        assert await runs.finalize("resp_job2", "cancelled", None, 2)
        assert (await store.get_response("resp_job2"))["status"] == "cancelled"  # type: ignore[index]
        assert not await runs.finalize("resp_job2", "failed", None, 2)  # finished stays so
    finally:
        await store.close()


def test_toolwire_db_upgrade_migrates_an_old_database(tmp_path: Any) -> None:
    import asyncio

    from typer.testing import CliRunner

    from toolwire.cli import app

    url = f"sqlite:///{tmp_path / 'old.db'}"
    asyncio.run(make_old(url, V1))
    runner = CliRunner()
    first = runner.invoke(app, ["db", "upgrade", "--db", url])
    from toolwire.store.migrate import head

    latest = head()
    assert first.exit_code == 0 and f"(none) -> {latest}" in first.output
    again = runner.invoke(app, ["db", "upgrade", "--db", url])
    assert again.exit_code == 0 and f"already at {latest}" in again.output
