"""SIGKILL during requests never corrupts or loses responses already completed."""

from __future__ import annotations

import signal
import sqlite3
import threading
from pathlib import Path

import httpx
import openai

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
