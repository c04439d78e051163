"""Response ids: unguessable tokens read from the OS a block at a time, never shared by two
ids, two threads, or a parent and its forked worker."""

from __future__ import annotations

import os
import re
import threading

import pytest

from toolwire.wire import responses as wire


def test_ids_keep_their_shape_and_never_repeat() -> None:
    ids = [wire.new_id("resp") for _ in range(1000)]  # several blocks
    assert all(re.fullmatch(r"resp_[0-9a-f]{48}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_one_read_serves_many_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    urandom = os.urandom

    def counted(n: int) -> bytes:
        reads.append(n)
        return urandom(n)

    monkeypatch.setattr(wire.os, "urandom", counted)
    wire._tokens.clear()
    for _ in range(wire._TOKENS_PER_READ):
        wire.new_id("msg")
    assert reads == [wire._TOKEN_BYTES * wire._TOKENS_PER_READ]


def test_threads_never_share_a_token() -> None:
    wire._tokens.clear()
    seen: list[str] = []

    def draw() -> None:
        seen.extend(wire.new_id("fc") for _ in range(500))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == len(seen) == 2000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_worker_draws_its_own_ids() -> None:
    wire._tokens.clear()
    wire.new_id("resp")  # the parent holds a block
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the id it would hand out next
        os.write(write, wire.new_id("resp").encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child != wire.new_id("resp")
