"""The request log never stalls the server: lines leave through a bounded queue, so a stderr
nobody reads (a full pipe) costs dropped lines, never a blocked event loop."""

from __future__ import annotations

import os
import sys
import threading

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
    os.close(read_end)
