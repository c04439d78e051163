"""Quota leasing (`store/quotas.py`): a limited key's requests are served from leases in
memory, replicas never grant more than a limit together, and leases go back to the database
(a flush, a close, a window that rolled over)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from toolwire.store.database import Store
from toolwire.store.quota_terms import RateLimited
from toolwire.store.quotas import QuotaStore
from toolwire.store.tables import quota_usage


@asynccontextmanager
async def stores(url: str, count: int) -> AsyncIterator[list[Store]]:
    """`count` stores on one database: replicas."""
    opened: list[Store] = []
    try:
        for _ in range(count):
            opened.append(await Store.open(url))
        yield opened
    finally:
        for store in opened:
            await store.close()


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """Every SQL statement the store's engine runs meanwhile."""
    engine: sa.Engine = store.database.engine  # type: ignore[attr-defined]
    seen: list[str] = []

    def count(_c: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


async def rows(store: Store, key_id: str) -> dict[tuple[str, int], tuple[int, int]]:
    def read(connection: sa.Connection) -> list[Any]:
        query = sa.select(quota_usage).where(quota_usage.c.key_id == key_id)
        return list(connection.execute(query).all())

    return {(r.scope, r.starts): (r.requests, r.tokens) for r in await store.read(read)}


async def one_request(quotas: QuotaStore, key_id: str, used: int = 50) -> None:
    await quotas.count_request(key_id)
    await quotas.admit(key_id, 150)
    reservation = await quotas.reserve(key_id, 150)
    assert reservation is not None
    await quotas.settle(reservation, used)


async def test_a_leased_key_does_no_database_work_per_request(tmp_path: object) -> None:
    async with stores(f"sqlite:///{tmp_path}/toolwire.db", 1) as (store,):
        store.quotas.ttl = 3600  # the limits' cache: read once
        record, _ = await store.keys.create("team", rpm=10_000, tpm=1_000_000, budget=10**9)
        await one_request(store.quotas, record.id)  # takes the leases
        with statements(store) as seen:
            for _ in range(50):
                await one_request(store.quotas, record.id)
        assert seen == []
        usage = (await store.quotas.usage())[record.id]
    assert (usage.requests_this_minute, usage.tokens_this_minute) == (51, 51 * 50)
    assert usage.budget_used == 51 * 50


async def test_two_replicas_never_grant_more_than_a_limit(database_url: str) -> None:
    async with stores(database_url, 2) as (one, two):
        record, _ = await one.keys.create("team", rpm=50, budget=1000, budget_period="day")

        async def request(store: Store) -> bool:
            try:
                await store.quotas.count_request(record.id)
            except RateLimited:
                return False
            return True

        async def call(store: Store) -> bool:
            try:
                reservation = await store.quotas.reserve(record.id, 30)
            except RateLimited:
                return False
            assert reservation is not None
            await asyncio.sleep(0)
            await store.quotas.settle(reservation, 30)
            return True

        counted = await asyncio.gather(*(request(one if i % 2 else two) for i in range(200)))
        called = await asyncio.gather(*(call(one if i % 2 else two) for i in range(100)))
        assert sum(counted) <= 50
        assert sum(called) * 30 <= 1000
        # the leases back: what is left is granted to either replica, exactly up to the limits
        await one.quotas.flush()
        await two.quotas.flush()
        more = [await request(two) for _ in range(60)]
        more_calls = [await call(one) for _ in range(40)]
        assert sum(counted) + sum(more) == 50
        assert (sum(called) + sum(more_calls)) * 30 == 990
        await one.quotas.flush()
        await two.quotas.flush()
        usage = (await one.quotas.usage())[record.id]
    assert usage.requests_this_minute == 50
    assert usage.budget_used == 990


async def test_leases_go_back_on_close(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/toolwire.db"
    async with stores(url, 1) as (reader,):
        record, _ = await reader.keys.create("team", rpm=1000, tpm=100_000)
        async with stores(url, 1) as (replica,):
            await one_request(replica.quotas, record.id, used=40)
            taken = (await rows(reader, record.id)).popitem()[1]
            assert taken[0] > 1 and taken[1] > 40  # leased: more than used is taken
        usage = (await reader.quotas.usage())[record.id]
    assert (usage.requests_this_minute, usage.tokens_this_minute) == (1, 40)


async def test_an_idle_lease_goes_back_within_a_flush(tmp_path: object) -> None:
    async with stores(f"sqlite:///{tmp_path}/toolwire.db", 2) as (one, two):
        record, _ = await one.keys.create("team", tpm=100_000)
        await one_request(one.quotas, record.id, used=40)
        for _ in range(100):  # two flush periods (0.5 s): unused since the first, given back
            if (await rows(two, record.id)).popitem()[1][1] == 40:
                break
            await asyncio.sleep(0.05)
        assert (await rows(two, record.id)).popitem()[1][1] == 40


async def test_a_window_that_rolled_over_gets_its_lease_back(tmp_path: object) -> None:
    async with stores(f"sqlite:///{tmp_path}/toolwire.db", 1) as (store,):
        quotas = store.quotas
        now = 1_800_000_000.0  # some hour's start
        quotas.clock = lambda: now
        record, _ = await store.keys.create("team", rpm=1000, budget=100_000, budget_period="hour")
        await one_request(quotas, record.id, used=40)
        now += 3600  # a new hour (and minute)
        await one_request(quotas, record.id, used=30)
        await quotas.flush()
        found = await rows(store, record.id)
        usage = (await quotas.usage())[record.id]
    assert found[("budget", 1_800_000_000)] == (0, 40)  # the old period's lease went back
    assert found[("budget", 1_800_003_600)] == (0, 30)
    assert found[("minute", 1_800_003_600)] == (1, 0)
    assert (usage.requests_this_minute, usage.budget_used) == (1, 30)


async def test_a_refusal_counts_only_what_was_used_not_what_is_leased(tmp_path: object) -> None:
    async with stores(f"sqlite:///{tmp_path}/toolwire.db", 1) as (store,):
        record, _ = await store.keys.create("team", tpm=2000)
        await one_request(store.quotas, record.id, used=50)  # leases a block of the minute
        with pytest.raises(RateLimited) as refused:
            await store.quotas.reserve(record.id, 1990)
    assert refused.value.headers is not None
    assert refused.value.headers["x-ratelimit-remaining-tokens"] == str(2000 - 50)
