"""What clients and models choose cannot bloat /metrics or forge log lines.

The attacks: 30 requests with 1 MB model names made `/metrics` 126 MB (every value a series
kept until restart); `%0a` in a path wrote a second, forged request-log line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from toolwire.observe import metrics, requests
from toolwire.observe.metrics import LABEL_MAX_CHARS, LabelCap
from toolwire.server.gate.security import Security, middleware
from toolwire.store.database import Store


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

    store = await Store.open("sqlite+aiosqlite:///:memory:")
    (layer,) = middleware(Security(), store, requests.RequestObserver(log_format="text"))
    gate = layer.cls(app, *layer.args, **layer.kwargs)  # the one middleware, observing
    forged = "/x\nrequest_id=req_forged method=DELETE path=/v1/responses status=200"
    scope = {"type": "http", "method": "GET", "path": forged, "headers": [], "client": None}

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        return None

    try:
        await gate(scope, receive, send)
    finally:
        await store.close()
    assert len(lines) == 1 and "\n" not in lines[0]
    assert 'path="/x\\nrequest_id=req_forged' in lines[0]


@pytest.mark.parametrize(
    ("path", "method", "client", "owner", "first_byte", "disconnected"),
    [
        ("/v1/chat/completions", "POST", ("127.0.0.1", 1), None, 0.0005, False),
        ('/x y"\n=z', "GE T", ("::1", 1), "key_1 2", None, True),
        ("/", "GET", None, None, None, False),
    ],
)
def test_the_text_log_line_is_the_fields_as_key_value_pairs(
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    method: str,
    client: Any,
    owner: str | None,
    first_byte: float | None,
    disconnected: bool,
) -> None:
    """Every field in order, `key=value`, a value a client chose quoted when it is not plain:
    the line the request log writes field by field is the one the fields' dict gives."""
    lines: list[str] = []
    monkeypatch.setattr(requests, "_write", lines.append)
    monkeypatch.setattr(requests, "_timestamp", lambda: "2026-01-01T00:00:00.000Z")
    scope: dict[str, Any] = {"method": method, "path": path, "client": client, "state": {}}
    if owner is not None:
        scope["state"]["owner"] = owner
    observer = requests.RequestObserver(log_format="text")
    route = "/v1/responses/{response_id}"
    observer._log(
        scope,
        "req_1",
        route,
        200,
        1.0,
        1.0021,
        None if first_byte is None else 1.0 + first_byte,
        disconnected,
    )
    fields: dict[str, Any] = {
        "time": "2026-01-01T00:00:00.000Z",
        "request_id": "req_1",
        "method": method,
        "path": path,
        "route": route,
        "status": 200,
        "duration_ms": round(0.0021 * 1000, 3),
        "ttfb_ms": None if first_byte is None else round(first_byte * 1000, 3),
        "client": client[0] if client else None,
        "owner": owner,
        "disconnected": True if disconnected else None,
    }
    expected = " ".join(
        f"{k}={requests._text_value(v)}" for k, v in fields.items() if v is not None
    )
    assert lines == [expected]
    assert "\n" not in lines[0]
