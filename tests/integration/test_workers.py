"""`toolwire serve --workers 2`: two processes on one port and one database; /metrics on
either counts the requests both served."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, toolwire_process
from toolwire.testing import Reply, ScriptedUpstream

REQUESTS = 40


def _chat_requests_counted(metrics: str) -> float:
    pattern = re.compile(
        r'^toolwire_http_requests_total\{(?=[^}]*route="/v1/chat/completions")'
        r'(?=[^}]*status="200")[^}]*\} (\S+)$',
        re.M,
    )
    return sum(float(value) for value in pattern.findall(metrics))


def test_two_workers_serve_one_port_and_metrics_count_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(metrics_dir))
    db = tmp_path / "toolwire.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ScriptedUpstream(default=Reply(text="hello")) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
        with toolwire_process(
            *args, "--port", str(port), "--workers", "2", health=base + "/health"
        ):
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            for _ in range(REQUESTS):
                # a new connection each time: the kernel spreads connections over the workers
                answer = httpx.post(base + "/v1/chat/completions", json=body, timeout=10)
                assert answer.status_code == 200
                assert answer.json()["choices"][0]["message"]["content"] == "hello"
            # both workers served (each writes its own metrics file, named by its pid) ...
            pids = {
                match.group(1)
                for f in metrics_dir.iterdir()
                if (match := re.match(r"counter_(\d+)\.db$", f.name))
            }
            assert len(pids) == 2
            # ... both are replicas on the one database ...
            with sqlite3.connect(db) as connection:
                (replicas,) = connection.execute("select count(*) from replicas").fetchone()
            assert replicas == 2
            # ... and /metrics, whichever worker answers, counts every request of both
            for _ in range(6):
                metrics = httpx.get(base + "/metrics", timeout=10).text
                assert _chat_requests_counted(metrics) == REQUESTS
