"""The request log never stalls the server: lines leave through a bounded queue, so a stderr
nobody reads (a full pipe) costs dropped lines, never a blocked event loop."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time

import pytest

from toolwire.observe.requests import _LineWriter, _millis


def test_a_full_stderr_pipe_drops_lines_instead_of_blocking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read_end, write_end = os.pipe()  # nobody reads: the pipe fills after ~64 KiB
    monkeypatch.setattr(sys, "stderr", os.fdopen(write_end, "w"))
    writer = _LineWriter(limit=100)
    finished = threading.Event()

    def log_a_lot() -> None:
        for n in range(20_000):  # ~1.6 MB of lines: far past the pipe and the queue
            writer(f"GET /v1/models 200 request {n:06d} " + "x" * 50)
        finished.set()

    threading.Thread(target=log_a_lot, daemon=True).start()
    assert finished.wait(30), "logging blocked on a full stderr"
    assert writer.dropped > 0
    writer._waiting.clear()  # nothing left for its thread to write once the pipe breaks
    os.close(read_end)


class _CountingStderr:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        self.text.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_lines_arrive_whole_in_order_and_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line reaches stderr, in order; the lines of one pass of the event loop go to the
    writing thread together (it is not woken per line, which cost the loop a thread switch per
    request); a line logged alone still comes out."""
    stderr = _CountingStderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    writer = _LineWriter()
    lines = [f"line {n}" for n in range(2000)]

    async def log() -> None:
        for line in lines:
            writer(line)
        await asyncio.sleep(0)
        writer("alone")

    asyncio.run(log())
    wanted = "".join(f"{line}\n" for line in [*lines, "alone"])
    deadline = time.monotonic() + 5
    while "".join(stderr.text) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "".join(stderr.text) == wanted
    assert stderr.writes <= 21  # batches of 100 lines, and the lone line
    assert writer.dropped == 0


def test_a_line_held_by_a_loop_that_stopped_is_written_with_the_next_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hand-over of a loop that stopped in the same pass never runs: the next line, on
    another loop, hands the held one over first, and nothing waits for 100 lines to gather."""
    stderr = _CountingStderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    writer = _LineWriter()
    loop = asyncio.new_event_loop()

    def last_request() -> None:
        writer("before the stop")
        loop.stop()

    loop.call_soon(last_request)
    loop.run_forever()
    loop.close()

    async def later() -> None:
        writer("after it")
        await asyncio.sleep(0)

    asyncio.run(later())
    wanted = "before the stop\nafter it\n"
    deadline = time.monotonic() + 5
    while "".join(stderr.text) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "".join(stderr.text) == wanted


def test_milliseconds_are_written_as_round_to_three_decimals_writes_them() -> None:
    rng = random.Random(7)
    values = [0.0, 0.0004, 0.0005, 0.0015, 1.5, 2.675, 10.0, 999.9995, 12345.6785, 1e9]
    values += [rng.random() * 10 ** rng.randint(-4, 6) for _ in range(20_000)]
    values += [n / 1000 for n in range(5_000)] + [n / 2000 for n in range(5_000)]
    for value in values:
        assert _millis(value) == str(round(value, 3)), value
