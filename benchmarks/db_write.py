"""A response's final write on a SQLite file: the async engine (aiosqlite, a thread hop per
statement) vs the writer thread (`store/writer.py`: one hop per transaction, writes queued
together share a commit). The real `Store.save_response` with a finished response's row, its
item index and its timeline in one transaction, as `/v1/responses` writes it; sequentially and
16 at a time. Prints wall and CPU time per write, and the ratio of the two in this run.

    .venv/bin/python benchmarks/db_write.py [--writes 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from toolwire.store.database import Store
from toolwire.store.timelines import TimelineStore


def _body(number: int) -> dict[str, Any]:
    return {
        "id": f"resp_{number:06d}",
        "object": "response",
        "created_at": 1_800_000_000,
        "status": "completed",
        "model": "mock-tool",
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{number:06d}",
                "call_id": f"call_{number}",
                "name": "get_weather",
                "arguments": '{"city": "Paris", "unit": "celsius"}',
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52},
    }


async def _writes(store: Store, count: int, at_once: int, start: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per write."""
    entries = [{"t": 0.0, "kind": "model", "detail": "1 call"}]

    async def one(number: int) -> None:
        body = _body(number)
        await store.save_response(
            body,  # type: ignore[arg-type]
            input_items=[{"type": "message", "role": "user", "content": "weather?"}],
            conversation_id=None,
            fresh=True,
            also=lambda connection: TimelineStore.save_in(
                connection,
                body["id"],
                body["created_at"],
                entries,  # type: ignore[arg-type]
                fresh=True,
            ),
        )

    wall, cpu = time.perf_counter(), time.process_time()
    for first in range(start, start + count, at_once):
        await asyncio.gather(*(one(number) for number in range(first, first + at_once)))
    return (time.perf_counter() - wall) / count * 1e6, (time.process_time() - cpu) / count * 1e6


async def _measure(writer: bool, count: int, at_once: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as directory:
        store = await Store.open(f"sqlite:///{Path(directory) / 'bench.db'}")
        if not writer:
            await store._writer.close()  # type: ignore[union-attr]
            store._writer = None  # every write on the async engine, as before the writer
        try:
            await _writes(store, 50, at_once, 900_000)  # warm up
            return await _writes(store, count, at_once, 0)
        finally:
            await store.close()


async def main(count: int) -> None:
    print(f"{count} final writes of a response (row + item index + timeline), one run")
    print()
    print(
        "| writes at once | async engine wall µs | CPU µs "
        "| the writer (inline, or its thread) wall µs | CPU µs |"
    )
    print("|---:|---:|---:|---:|---:|")
    for at_once in (1, 16):
        before = await _measure(False, count, at_once)
        after = await _measure(True, count, at_once)
        print(
            f"| {at_once} | {before[0]:.0f} | {before[1]:.0f} | {after[0]:.0f} "
            f"({before[0] / after[0]:.1f}x less) | {after[1]:.0f} "
            f"({before[1] / after[1]:.1f}x less) |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    asyncio.run(main(parser.parse_args().writes))
