"""The served app (`build_app`: observed) runs HTTP requests from the gate outward
(`GatedStarlette`): an exception nothing handled is still answered with the server-error
layer's 500, logged as a 500, and raised on to the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from toolwire.config import ServerConfig
from toolwire.observe import requests as request_log
from toolwire.server import app as app_module
from toolwire.server.chat import routes as chat_routes
from toolwire.server.main import build_app


async def test_an_unhandled_error_is_a_500_logged_and_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(request_log, "_write", lines.append)

    async def boom(*args: Any) -> None:
        raise RuntimeError("boom, with a secret")

    monkeypatch.setattr(chat_routes, "admit", boom)
    app = await build_app(
        ServerConfig(upstream="http://127.0.0.1:9/v1", db=f"sqlite:///{tmp_path}/t.db")
    )
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    async with app.router.lifespan_context(app):
        with pytest.raises(RuntimeError, match="boom"):
            await app(scope, receive, send)
    assert isinstance(app, app_module.GatedStarlette) and app._outermost  # the gate's way
    assert sent[0]["status"] == 500
    error = orjson.loads(sent[1]["body"])["error"]
    assert error["type"] == "server_error" and "secret" not in error["message"]
    assert any("status=500" in line and "/v1/chat/completions" in line for line in lines)
