"""The request log follows the server's log level (docs/operations.md "Request logs"): a line
is an info record and a 5xx answer's a warning, so above info only the 5xx lines are written,
as uvicorn's own access log goes quiet at `--log-level warning`."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.observe import requests
from toolwire.observe.setup import Observability
from toolwire.server.gate.security import Security, middleware
from toolwire.store.database import Store


async def lines_written(monkeypatch: pytest.MonkeyPatch, log_level: str, status: int) -> list[str]:
    """The request-log lines of one request answered `status`, through the gate as served."""
    lines: list[str] = []
    monkeypatch.setattr(requests, "_write", lines.append)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    observability = Observability(log_format="text", log_level=log_level)
    observer = requests.RequestObserver(**observability.middleware_options())
    store = await Store.open("sqlite+aiosqlite:///:memory:")
    (layer,) = middleware(Security(), store, observer)
    gate = layer.cls(app, *layer.args, **layer.kwargs)
    scope = {"type": "http", "method": "GET", "path": "/v1/models", "headers": [], "client": None}

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        return None

    try:
        await gate(scope, receive, send)
    finally:
        await store.close()
    return lines


@pytest.mark.parametrize(
    ("log_level", "status", "written"),
    [
        ("info", 200, True),
        ("debug", 404, True),
        ("info", 503, True),
        ("warning", 200, False),
        ("WARNING", 404, False),
        ("error", 499, False),
        ("warning", 500, True),
        ("critical", 502, True),
    ],
)
async def test_above_info_only_5xx_answers_are_logged(
    monkeypatch: pytest.MonkeyPatch, log_level: str, status: int, written: bool
) -> None:
    lines = await lines_written(monkeypatch, log_level, status)
    assert len(lines) == (1 if written else 0)
    if written:
        assert f"status={status}" in lines[0]
