"""`item_reference` lookup time against the number of responses a key has stored.

Every AI SDK request replays earlier turns as `item_reference`s, so each one is a lookup. Until
schema 5 a referenced item was found by a text search over the key's stored responses
("before", reproduced here as it was); now `item_index` maps (owner, item id) to its response
("after", `toolwire.store.items.find_items`). Prints a table; nothing is asserted.

    .venv/bin/python benchmarks/item_lookup.py [--sizes 100,10000] [--lookups 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from toolwire.store.database import Store
from toolwire.store.items import find_items_in
from toolwire.store.owner import owned_by
from toolwire.store.tables import responses

OWNER = "key_bench"


def find_by_text_search(ids: set[str], owner: str, connection: sa.Connection) -> dict[str, Any]:
    """The lookup before schema 5 (a read job): the owner's responses whose JSON text holds the
    id, newest first, then the items read in Python."""
    found: dict[str, Any] = {}
    text = sa.cast(responses.c.body, sa.Text) + sa.cast(responses.c.input_items, sa.Text)
    holds = sa.or_(*(text.contains(orjson.dumps(i).decode(), autoescape=True) for i in ids))
    rows = connection.execute(
        sa.select(responses.c.body, responses.c.input_items)
        .where(owned_by(responses.c.owner, owner), responses.c.status != "deleted", holds)
        .order_by(responses.c.created_at.desc())
    )
    for row in rows:
        for item in [*(row.body.get("output") or []), *(row.input_items or [])]:
            if item.get("id") in ids and item["id"] not in found:
                found[item["id"]] = item
        if len(found) == len(ids):
            break
    return found


def turn(n: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    question = {
        "id": f"msg_q{n:06d}",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": f"question {n} " + "words " * 60}],
    }
    answer = {
        "id": f"msg_a{n:06d}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"answer {n} " + "more words " * 80}],
    }
    body = {
        "id": f"resp_{n:06d}",
        "object": "response",
        "created_at": n,
        "status": "completed",
        "output": [answer],
        "previous_response_id": None,
    }
    return body, [question]


async def measure(size: int, lookups: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as directory:
        store = await Store.open(f"sqlite:///{Path(directory) / 'bench.db'}")
        try:
            for n in range(size):
                body, input_items = turn(n)
                await store.save_response(
                    body, input_items=input_items, conversation_id=None, owner=OWNER, fresh=True
                )
            # the early turns are the ones an AI SDK transcript replays first
            wanted = [{f"msg_a{n:06d}"} for n in range(min(lookups, size))]
            timings: dict[str, list[float]] = {"before": [], "after": []}
            for ids in wanted:
                start = time.perf_counter()
                old = await store.read(partial(find_by_text_search, ids, OWNER))
                timings["before"].append(time.perf_counter() - start)
                start = time.perf_counter()
                new = await store.read(partial(find_items_in, ids, OWNER))
                timings["after"].append(time.perf_counter() - start)
                assert old == new, (old, new)
        finally:
            await store.close()
    return statistics.median(timings["before"]), statistics.median(timings["after"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--lookups", type=int, default=50)
    arguments = parser.parse_args()
    print("| stored responses | before: text search (ms, median) | after: item_index (ms) |")
    print("|---:|---:|---:|")
    for size in (int(s) for s in arguments.sizes.split(",")):
        before, after = await measure(size, arguments.lookups)
        print(f"| {size:,} | {before * 1000:.2f} | {after * 1000:.2f} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
