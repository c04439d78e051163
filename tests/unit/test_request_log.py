"""The request log never stalls the server: lines leave through a bounded queue, so a stderr
nobody reads (a full pipe) costs dropped lines, never a blocked event loop."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from toolwire.observe.requests import _LineWriter


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
    writer._lines.clear()  # nothing left for the thread to write once the pipe breaks
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
    """Every line reaches stderr, in order, soon; the thread writes a batch at a time (it is
    not woken per line, which cost the event loop a thread switch per request)."""
    stderr = _CountingStderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    writer = _LineWriter(pause=0.005)
    lines = [f"line {n}" for n in range(2000)]
    for line in lines:
        writer(line)
    deadline = time.monotonic() + 5
    while "".join(stderr.text).count("\n") < len(lines) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "".join(stderr.text) == "".join(f"{line}\n" for line in lines)
    assert stderr.writes < 20
    # a line after a quiet spell (the thread asleep) still comes out
    time.sleep(0.05)
    writer("after a pause")
    deadline = time.monotonic() + 5
    while not stderr.text[-1].endswith("after a pause\n") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stderr.text[-1] == "after a pause\n"
