"""What clients and models choose cannot bloat /metrics or forge log lines.

The attacks: 30 requests with 1 MB model names made `/metrics` 126 MB (every value a series
kept until restart); `%0a` in a path wrote a second, forged request-log line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from toolwire.observe import metrics, requests
from toolwire.observe.metrics import LABEL_MAX_CHARS, LabelCap
from toolwire.observe.requests import ObserveMiddleware


def test_label_values_are_capped_in_length_and_count() -> None:
    cap = LabelCap(limit=3)
    assert cap("m" * 1_000_000) == "m" * (LABEL_MAX_CHARS - 1) + "…"
    assert [cap(name) for name in ("a", "b", "c", "a")] == ["a", "b", "other", "a"]


def test_invented_models_do_not_grow_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MODEL_LABEL", LabelCap(limit=5))
    labels = [
        metrics.RunMetrics(SimpleNamespace(model=f"{i}-" + "x" * 100_000), "u", {})._model  # type: ignore[arg-type]
        for i in range(50)
    ]
    assert max(len(label) for label in labels) <= LABEL_MAX_CHARS
    assert len(set(labels)) == 6 and labels[-1] == "other"


async def test_a_newline_in_a_path_cannot_forge_a_log_line(monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(requests, "_write", lines.append)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    middleware = ObserveMiddleware(app, log_format="text")
    forged = "/x\nrequest_id=req_forged method=DELETE path=/v1/responses status=200"
    scope = {"type": "http", "method": "GET", "path": forged, "headers": [], "client": None}

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        return None

    await middleware(scope, receive, send)
    assert len(lines) == 1 and "\n" not in lines[0]
    assert 'path="/x\\nrequest_id=req_forged' in lines[0]
