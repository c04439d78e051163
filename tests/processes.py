"""Starting real toolwire processes for tests, and waiting until they answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def output_so_far(process: subprocess.Popen[bytes]) -> str:
    """What a `toolwire_process` child has written so far, read from the start of its log
    without moving the file offset it shares with the child: a seek would make the child's
    next write land at the start, over its first lines (a log line written between the seek
    and the read cut a start-up warning out of a test's view)."""
    if process.stdout is None:
        return ""
    fd = process.stdout.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = output_so_far(process)
            raise RuntimeError(f"process exited with {process.returncode}: {out}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not come up in {timeout} s")


@contextmanager
def toolwire_process(*args: str, health: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m toolwire ARGS` as a child process, stopped (killed if need be) on exit. Its
    output goes to a file, never to a pipe nobody reads: a full pipe would stall it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolwire", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        process.stdout = log  # type: ignore[assignment]  # read on failure, from the start
        try:
            if health:
                wait_until_up(health, process)
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
