"""HTTP/1.1 parsing with toolwire's limits on the request line and headers, and its refusals in
the OpenAI error shape.

uvicorn's httptools protocol puts no bound on a URL or a header (llhttp has none, and httptools
keeps a header's bytes until it ends), and answers a request it cannot parse with a plain-text
"Invalid HTTP request received.". This subclass counts the URL and the header bytes as the
parser hands them over, refuses past `max_url_bytes` (414) or `max_header_bytes` (431), and
answers every request it refuses before the app sees it (those two, and a malformed request's
400) as any other error: JSON in OpenAI's shape, `connection: close`. A request whose head
never ends is cut off once it holds more than both limits together (plus one read).

A subclass, not an ASGI middleware: a request refused by the parser never reaches the app.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolwire.errors import InvalidRequestError

#: Defaults (`max_url_bytes`, `max_header_bytes` in the config): a URL of 8 KiB is what most
#: proxies allow (nginx's `large_client_header_buffers`); 32 KiB of headers covers cookies and
#: long bearer tokens with room to spare.
MAX_URL_BYTES = 8 * 1024
MAX_HEADER_BYTES = 32 * 1024


class _Refused(Exception):
    """Raised from a parser callback: httptools stops and raises its own parser error, which
    uvicorn answers with `send_400_response`."""


def _refusal(status: int, code: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(message, code=code, status=status)


def bounded_protocol(
    max_url_bytes: int = MAX_URL_BYTES, max_header_bytes: int = MAX_HEADER_BYTES
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with these limits (`uvicorn.Config(http=...)`)."""

    class BoundedHttpProtocol(HttpToolsProtocol):
        _refused: InvalidRequestError | None = None
        _header_bytes = 0
        _head_bytes = 0
        _in_head = True

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._header_bytes = 0
            self._in_head = True

        def on_url(self, url: bytes) -> None:
            if len(self.url) + len(url) > max_url_bytes:
                self._refused = _refusal(
                    414,
                    "uri_too_long",
                    f"The request's URL is longer than this server's limit of {max_url_bytes} "
                    "bytes.",
                )
                raise _Refused
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_bytes += len(name) + len(value) + 4  # ": " and CRLF
            if self._header_bytes > max_header_bytes:
                raise self._too_large_headers()
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            # a header that never ends is kept whole by the parser until it does: cut it off
            if self._in_head and self._head_bytes > max_url_bytes + max_header_bytes + 65536:
                self._too_large_headers()
                self.send_400_response("")

        def _too_large_headers(self) -> _Refused:
            self._refused = _refusal(
                431,
                "request_header_fields_too_large",
                f"The request's headers are larger than this server's limit of "
                f"{max_header_bytes} bytes.",
            )
            return _Refused()

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request it could not parse (or that a callback above
            refused), in OpenAI's shape."""
            if self.transport.is_closing():
                return
            error = self._refused or _refusal(
                400, "invalid_http_request", "The request is not valid HTTP/1.1."
            )
            self._refused = None
            body = orjson.dumps(error.to_body())
            reason = HTTPStatus(error.status).phrase.encode()
            head: list[Any] = [b"HTTP/1.1 %d %s\r\n" % (error.status, reason)]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [
                b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body),
                b"x-should-retry: false\r\n",
                b"connection: close\r\n\r\n",
                body,
            ]
            self.transport.write(b"".join(head))
            self.transport.close()

    return BoundedHttpProtocol
