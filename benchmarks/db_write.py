"""The store's hot calls on a SQLite file: a response's final write and a continuation's read.

The write is the real `Store.save_response` with a finished response's row, its item index and
its timeline in one transaction, as `/v1/responses` writes it (inline on the event loop when the
file is free, else on the writer thread: `store/writer.py`). The read is what a continuation
makes, `Store.get_response_record`: the row and its history, one response back and 50 back (on
a reader thread: `store/readers.py`). Each sequentially and 16 at once; wall and CPU µs per
call (CPU of the whole process, every thread). Last, a 2,000-response history read while a
ticker runs on the event loop: the loop's longest stall (the median of 5 reads: a garbage
collection that happens to fall in one read stalls either tree).

Two `src/` trees measured side by side (`--a`, `--b`: e.g. the store before and after a
change) run in fresh processes, one after the other, the order alternating each round; the
figure is the median over rounds of the per-round B/A ratio, since the machine's load moves
the absolute numbers. With no trees, this checkout's `src/` alone.

    .venv/bin/python benchmarks/db_write.py [--writes 1000]
    .venv/bin/python benchmarks/db_write.py --a /tmp/base/src --b src --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AT_ONCE = (1, 16)
CHAIN = 50
LONG_CHAIN = 2000


def _body(response_id: str, previous: str | None = None) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1_800_000_000,
        "status": "completed",
        "model": "mock-tool",
        "previous_response_id": previous,
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{response_id}",
                "call_id": f"call_{response_id}",
                "name": "get_weather",
                "arguments": '{"city": "Paris", "unit": "celsius"}',
                "status": "completed",
            }
        ],
        "usage": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52},
    }


async def _timed(count: int, at_once: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    """[wall µs, CPU µs] per call, `at_once` calls in flight together."""
    wall, cpu = time.perf_counter(), time.process_time()
    for first in range(0, count, at_once):
        await asyncio.gather(*(call(n) for n in range(first, min(count, first + at_once))))
    return [(time.perf_counter() - wall) / count * 1e6, (time.process_time() - cpu) / count * 1e6]


async def _chain(store: Any, prefix: str, length: int) -> str:
    """`length` responses, each continuing the one before; the last one's id."""
    previous = None
    for n in range(length):
        body = _body(f"resp_{prefix}{n:05d}", previous)
        item = {"type": "message", "id": f"msg_{prefix}{n}", "role": "user", "content": "more"}
        await store.save_response(body, input_items=[item], conversation_id=None, fresh=True)
        previous = body["id"]
    assert previous is not None
    return previous


async def _stall_during(read: Awaitable[object]) -> float:
    """The event loop's longest pause (ms) between 1 ms ticks while `read` runs."""
    worst = 0.0
    done = False

    async def tick() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst = max(worst, now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    await read
    done = True
    await ticker
    return worst * 1e3


async def measure(count: int) -> dict[str, list[float]]:
    from toolwire.store.database import Store
    from toolwire.store.timelines import TimelineStore

    entries = [{"t": 0.0, "kind": "model", "detail": "1 call"}]
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        store = await Store.open(f"sqlite:///{Path(directory) / 'bench.db'}")
        try:

            async def write(number: int, prefix: str) -> None:
                body = _body(f"resp_{prefix}{number:06d}")
                await store.save_response(
                    body,
                    input_items=[{"type": "message", "role": "user", "content": "weather?"}],
                    conversation_id=None,
                    fresh=True,
                    also=lambda connection: TimelineStore.save_in(
                        connection, body["id"], body["created_at"], entries, fresh=True
                    ),
                )

            await _timed(50, 1, lambda n: write(n, "warm"))
            for at_once in AT_ONCE:
                figures[f"write x{at_once}"] = await _timed(
                    count, at_once, lambda n, a=at_once: write(n, f"w{a}_")
                )
            short = await _chain(store, "s", 2)
            deep = await _chain(store, "d", CHAIN)
            for name, last in (("read 1 back", short), (f"read {CHAIN} back", deep)):
                for at_once in AT_ONCE:
                    figures[f"{name} x{at_once}"] = await _timed(
                        count if last == short else count // 10,
                        at_once,
                        lambda _n, last=last: store.get_response_record(last),
                    )
            longest = await _chain(store, "l", LONG_CHAIN)
            stalls = [await _stall_during(store.get_response_record(longest)) for _ in range(5)]
            figures[f"loop stall, {LONG_CHAIN} back"] = [statistics.median(stalls), 0.0]
        finally:
            await store.close()
    return figures


def _run(src: str, count: int) -> dict[str, list[float]]:
    """One measurement in a fresh process on the `src` tree."""
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--writes", str(count)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--a", help="src/ of variant A")
    parser.add_argument("--b", help="src/ of variant B")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.writes))))
        return
    if not (args.a and args.b):
        figures = _run(str(HERE.parent / "src"), args.writes)
        print(f"{args.writes} calls each (reads {CHAIN} back: a tenth), one process, SQLite file\n")
        print("| call | wall µs | CPU µs |\n|---|---:|---:|")
        for name, (wall, cpu) in figures.items():
            unit = " (ms)" if name.startswith("loop stall") else ""
            print(f"| {name}{unit} | {wall:.0f} | {cpu:.0f} |")
        return
    rounds: dict[str, list[dict[str, list[float]]]] = {"A": [], "B": []}
    for number in range(args.rounds):
        order = ("A", "B") if number % 2 == 0 else ("B", "A")
        for name in order:
            rounds[name].append(_run(args.a if name == "A" else args.b, args.writes))
    print(f"{args.writes} calls each, {args.rounds} rounds, A = {args.a}, B = {args.b}")
    print("medians over rounds; B/A: the median of the per-round ratios\n")
    print("| call | A wall µs | B wall µs | B/A wall | A CPU µs | B CPU µs | B/A CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for call in rounds["A"][0]:
        row = [f"| {call}{' (ms)' if call.startswith('loop stall') else ''}"]
        for index in (0, 1):
            a = [r[call][index] for r in rounds["A"]]
            b = [r[call][index] for r in rounds["B"]]
            ratios = [y / x for x, y in zip(a, b, strict=True) if x]
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
            row.append(f"{statistics.median(a):.0f} | {statistics.median(b):.0f} | {ratio}")
        print(" | ".join(row) + " |")


if __name__ == "__main__":
    main()
