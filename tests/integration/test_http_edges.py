"""The edges of HTTP on a real `toolwire serve` (uvicorn, httptools): `/ui` refuses to be framed;
an oversized URL or header block and a request that is not HTTP get a 4xx in OpenAI's error
shape (`server/http/protocol.py`), never a plain-text 400 or a 200."""

from __future__ import annotations

import contextlib
import socket

import httpx
import orjson
import pytest

from tests.integration.conftest import Gateway


def raw(gateway: Gateway, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as it is (httpx refuses URLs this long) and read the whole answer."""
    url = httpx.URL(gateway.base_url)
    with socket.create_connection((url.host, url.port or 80), timeout=10) as sock:
        # the server may answer and close before it has read everything
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def openai_error(headers: dict[str, str], body: bytes) -> dict[str, object]:
    assert headers["content-type"] == "application/json"
    error = orjson.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return dict(error)


@pytest.mark.parametrize("path", ["/ui", "/ui/static/index.html", "/ui/static/app.js"])
def test_the_page_cannot_be_framed(gw: Gateway, path: str) -> None:
    answer = httpx.get(gw.base_url.removesuffix("/v1") + path)
    assert answer.status_code == 200
    assert answer.headers["x-frame-options"] == "DENY"
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy.split("; ")


def test_a_100_kb_header_is_refused_with_431(gw: Gateway) -> None:
    answer = httpx.get(gw.base_url + "/models", headers={"x-big": "a" * 100_000})
    assert answer.status_code == 431
    error = openai_error(dict(answer.headers), answer.content)
    assert error["code"] == "request_header_fields_too_large"
    assert "32768 bytes" in str(error["message"])


def test_a_100000_character_url_is_refused_with_414(gw: Gateway) -> None:
    status, headers, body = raw(
        gw, b"GET /v1/models?q=" + b"a" * 100_000 + b" HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    )
    assert status == 414
    assert openai_error(headers, body)["code"] == "uri_too_long"


def test_a_header_that_never_ends_is_cut_off(gw: Gateway) -> None:
    """4 MiB of one header line, no end: refused once past the limits, not buffered whole."""
    status, headers, body = raw(
        gw, b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * (4 << 20)
    )
    assert status == 431
    assert openai_error(headers, body)["code"] == "request_header_fields_too_large"


def test_a_request_that_is_not_http_gets_a_400_in_openai_shape(gw: Gateway) -> None:
    status, headers, body = raw(gw, b"GARBAGE / HTTP/1.1\r\n\r\n")
    assert status == 400
    assert openai_error(headers, body)["code"] == "invalid_http_request"
    # and the server goes on serving
    assert httpx.get(gw.base_url.removesuffix("/v1") + "/health").status_code == 200
