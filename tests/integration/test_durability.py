"""SIGKILL during requests never corrupts or loses responses already completed."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.processes import free_port, toolwire_process
from toolwire.testing import Chunks, Reply, ScriptedUpstream


def serve_args(upstream: ScriptedUpstream, db: Path) -> tuple[str, list[str]]:
    """A fresh port for `toolwire serve` on this database: its base URL and its arguments."""
    port = free_port()
    args = [
        "serve",
        "--upstream",
        upstream.base_url,
        "--db",
        f"sqlite:///{db}",
        "--port",
        str(port),
    ]
    return f"http://127.0.0.1:{port}", args


def test_sigkill_mid_request_loses_nothing_completed(tmp_path: Path) -> None:
    db = tmp_path / "toolwire.db"
    slow = {"choices": [{"index": 0, "delta": {"content": "…"}, "finish_reason": None}]}
    with ScriptedUpstream() as upstream:
        upstream.add(*[Reply(text=f"answer {i}") for i in range(20)])
        upstream.add(*[Chunks([slow] * 100, delay=0.1) for _ in range(3)])
        base, args = serve_args(upstream, db)
        completed: dict[str, str] = {}
        with toolwire_process(*args, health=base + "/health") as server:
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            for i in range(20):
                response = client.responses.create(model="m", input=f"question {i}")
                completed[response.id] = response.output_text
            streams_started = threading.Barrier(4)

            def stream_forever() -> None:
                try:
                    body = {"model": "m", "input": "long", "stream": True}
                    with httpx.stream("POST", base + "/v1/responses", json=body, timeout=30) as r:
                        for n, _ in enumerate(r.iter_lines()):
                            if n == 8:
                                streams_started.wait(10)
                except (httpx.HTTPError, threading.BrokenBarrierError):
                    pass

            threads = [threading.Thread(target=stream_forever) for _ in range(3)]
            for thread in threads:
                thread.start()
            streams_started.wait(10)  # three responses are mid-stream right now
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            for thread in threads:
                thread.join(10)

        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        base, args = serve_args(upstream, db)
        with toolwire_process(*args, health=base + "/health"):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            for response_id, text in completed.items():
                stored = client.responses.retrieve(response_id)
                assert stored.status == "completed"
                assert stored.output_text == text


def test_sigkill_mid_stream_and_mid_background_then_restart_leaves_nothing_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streams of the killed process end `failed` at the next start (same host: at once);
    its background response is resumed there and completes."""
    for key, value in {
        "TOOLWIRE_LEASE_HEARTBEAT_SECONDS": "0.2",
        "TOOLWIRE_LEASE_SECONDS": "2",
    }.items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "toolwire.db"
    slow = {"choices": [{"index": 0, "delta": {"content": "…"}, "finish_reason": None}]}
    with ScriptedUpstream() as upstream:
        upstream.add(*[Chunks([slow] * 300, delay=0.05) for _ in range(4)])
        base, args = serve_args(upstream, db)
        stream_ids: list[str] = []
        with toolwire_process(*args, health=base + "/health") as server:
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            started = threading.Barrier(4)

            def stream() -> None:
                body = {"model": "m", "input": "long", "stream": True}
                try:
                    with httpx.stream("POST", base + "/v1/responses", json=body, timeout=30) as r:
                        for n, line in enumerate(r.iter_lines()):
                            if line.startswith("data:"):
                                data = json.loads(line[5:])
                                if data["type"] == "response.created":
                                    stream_ids.append(data["response"]["id"])
                            if n == 12:
                                started.wait(10)
                except (httpx.HTTPError, threading.BrokenBarrierError):
                    pass

            threads = [threading.Thread(target=stream) for _ in range(3)]
            for thread in threads:
                thread.start()
            started.wait(10)
            background = client.responses.create(model="m", input="work", background=True)
            deadline = time.monotonic() + 10
            while len(upstream.chat_requests) < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert client.responses.retrieve(background.id).status == "in_progress"
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            for thread in threads:
                thread.join(10)

        upstream.reset()
        upstream.add(Reply(text="resumed after the restart"))
        base, args = serve_args(upstream, db)
        with toolwire_process(*args, health=base + "/health"):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            assert len(stream_ids) == 3
            for response_id in stream_ids:
                stored = client.responses.retrieve(response_id)
                assert stored.status == "failed"
                assert stored.error is not None and stored.error.code == "server_error"
            deadline = time.monotonic() + 15
            while client.responses.retrieve(background.id).status in ("queued", "in_progress"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            resumed = client.responses.retrieve(background.id)
            assert resumed.status == "completed"
            assert resumed.output_text == "resumed after the restart"


def test_64_concurrent_streams_on_sqlite_lose_nothing(tmp_path: Path) -> None:
    count = 64
    with ScriptedUpstream() as upstream:
        upstream.add(*[Reply(text=f"answer {n}") for n in range(count * 3)])
        base, args = serve_args(upstream, tmp_path / "toolwire.db")
        with toolwire_process(*args, health=base + "/health"):

            async def run() -> list[tuple[str, str]]:
                gate = asyncio.Semaphore(count)
                async with httpx.AsyncClient(timeout=60) as http:

                    async def one(n: int) -> tuple[str, str]:
                        body = {"model": "m", "input": f"q{n}", "stream": True}
                        async with gate:
                            response = await http.post(base + "/v1/responses", json=body)
                        frames = [f for f in response.text.split("\n\n") if f.strip()]
                        last = json.loads(frames[-1].split("data: ", 1)[1])
                        return last["type"], last["response"]["id"]

                    return await asyncio.gather(*[one(n) for n in range(count * 3)])

            finals = asyncio.run(run())
            assert [kind for kind, _ in finals] == ["response.completed"] * (count * 3)
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            for _, response_id in finals:
                assert client.responses.retrieve(response_id).status == "completed"
