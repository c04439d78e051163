"""Request limits: body size (pure ASGI middleware), JSON nesting depth, item and tool counts.

- `max_body_bytes` (default 4 MiB): a `Content-Length` over it is refused before a byte is read;
  a body without one (chunked) is counted as it arrives and refused the moment it passes the
  limit, so no more than the limit (plus one network chunk) is ever held. 413,
  `request_too_large`. On a WebSocket (`/v1/responses` in WebSocket mode) it bounds each
  message: a bigger one closes the socket with 1009 (message too big); `toolwire serve` also
  sets uvicorn's `ws_max_size` to it, so such a frame is refused before it is buffered.
- `max_json_depth` (default 64): deeper nesting of arrays and objects is a 400 (`json_too_deep`).
- `max_input_items` (default 2,048) and `max_tools` (default 512): more `input` / `items` /
  `messages` entries or `tools` entries is a 400 naming the parameter (`too_many_items`,
  `too_many_tools`).
- `max_socket_seconds` (default 3,600, as OpenAI's 60 minutes): how long a WebSocket of
  `/v1/responses` stays open (`server/responses/socket.py`); `max_sockets` (default 256): how
  many are open at once in one process; `max_sockets_per_key` (32) and `max_streams_per_key`
  (64): what one API key may hold of them, and of running requests (`server/gate/shares.py`);
  `max_socket_queue_bytes` (16 MiB): the messages read from every socket and not yet answered,
  together (`server/responses/socket.py`).

- `MAX_OUTPUT_TOKENS` (1,048,576): the most output tokens any door accepts
  (`max_output_tokens`, `max_tokens`, `max_completion_tokens`, `maxOutputTokens`);
  more is a 400 (`integer_above_max_value`) at validation, never a number sent upstream or
  a 500 where a limited key's estimate meets a 64-bit database column.

`read_limited_json` (`parse_limited_json` for a WebSocket message) applies the last three to a
request body; `BodyLimitMiddleware` the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request

from toolwire.errors import InvalidRequestError, ToolwireError
from toolwire.server.gate.auth import ASGIApp, Message, Receive, Scope, Send
from toolwire.server.http.errors import send_error
from toolwire.server.http.helpers import read_body

MiB = 1024 * 1024
#: The most output tokens a request may ask for, on every door: 2**20, beyond any model's
#: output window today (the upstream refuses what is beyond its own; this bounds what reaches
#: it and what a key's estimate can add up to).
MAX_OUTPUT_TOKENS = 1 << 20
#: The list fields counted against `max_input_items`: Responses `input`, Conversations `items`,
#: chat-completions `messages`.
ITEM_FIELDS = ("input", "items", "messages")


@dataclass(slots=True, frozen=True)
class Limits:
    max_body_bytes: int = 4 * MiB
    max_json_depth: int = 64
    max_input_items: int = 2048
    max_tools: int = 512
    #: how long one WebSocket (WebSocket mode of /v1/responses) may stay open, as OpenAI's
    max_socket_seconds: float = 3600.0
    #: WebSockets open at once (per process); one more is refused (closed 1013, try again)
    max_sockets: int = 256
    #: WebSockets one API key may hold open at once (per process); one more: 429
    max_sockets_per_key: int = 32
    #: requests one API key may have running at once (per process; streams included)
    max_streams_per_key: int = 64
    #: bytes of WebSocket messages read and not yet answered, across every socket of the
    #: process: past it, sockets stop being read (back-pressure) and, after
    #: `socket_queue_wait` seconds without room, close with 1013 (try again later)
    max_socket_queue_bytes: int = 16 * MiB
    socket_queue_wait: float = 10.0


class RequestTooLarge(ToolwireError):
    """The request body is over `max_body_bytes` (HTTP 413)."""

    status = 413
    error_type = "invalid_request_error"


def too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(
        f"The request body is larger than this server's limit of {limit} bytes "
        "(max_body_bytes / --max-body-bytes).",
        code="request_too_large",
    )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self.app(scope, self.limited_messages(receive, send), send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if await self.admit(scope, send):
            await self.app(scope, self.counted(receive), send)

    async def admit(self, scope: Scope, send: Send) -> bool:
        """False when the declared `Content-Length` is over the limit (answered here, 413)."""
        limit = self.max_bytes
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    error = too_large(limit)
                    await send_error(send, 413, error.message, "request_too_large", scope=scope)
                    return False
        return True

    def counted(self, receive: Receive) -> Receive:
        """`receive` for an HTTP request: raises `RequestTooLarge` once the body passes the
        limit (a chunked body has no length to refuse up front)."""
        limit = self.max_bytes
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large(limit)
            return message

        return limited

    def limited_messages(self, receive: Receive, send: Send) -> Receive:
        """`receive` for a WebSocket: a message over the limit closes the socket (1009) and
        reaches the app as the disconnect it is."""
        limit = self.max_bytes

        async def limited() -> Message:
            message = await receive()
            if message["type"] == "websocket.receive" and _over(message, limit):
                await send({"type": "websocket.close", "code": 1009, "reason": "message too big"})
                return {"type": "websocket.disconnect", "code": 1009}
            return message

        return limited


def _over(message: Message, limit: int) -> bool:
    """Whether a WebSocket message is over `limit` bytes (text is encoded only when its length
    leaves it in doubt: UTF-8 takes 1 to 4 bytes a character)."""
    text = message.get("text")
    if text is None:
        return len(message.get("bytes") or b"") > limit
    if len(text) > limit:
        return True
    return len(text) * 4 > limit and len(text.encode()) > limit


def check_depth(value: Any, limit: int) -> None:
    """400 if arrays and objects nest deeper than `limit`."""
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise InvalidRequestError(
                f"The JSON body nests deeper than this server's limit of {limit} levels.",
                code="json_too_deep",
            )
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list) and child:
                stack.append((child, depth + 1))


def might_be_deep(raw: bytes, limit: int) -> bool:
    """False when `raw` cannot nest deeper than `limit`: it has no more brackets than that.
    Spares the walk for most requests."""
    return raw.count(b"{") + raw.count(b"[") > limit


def check_counts(body: Any, limits: Limits) -> None:
    """400 naming the parameter when `input` / `items` / `messages` or `tools` has too many
    entries."""
    if not isinstance(body, dict):
        return
    for field in ITEM_FIELDS:
        items = body.get(field)
        if isinstance(items, list) and len(items) > limits.max_input_items:
            raise InvalidRequestError(
                f"'{field}' has {len(items)} entries; this server accepts at most "
                f"{limits.max_input_items} (max_input_items).",
                param=field,
                code="too_many_items",
            )
    tools = body.get("tools")
    if isinstance(tools, list) and len(tools) > limits.max_tools:
        raise InvalidRequestError(
            f"'tools' has {len(tools)} entries; this server accepts at most "
            f"{limits.max_tools} (max_tools).",
            param="tools",
            code="too_many_tools",
        )


async def read_limited_json(request: Request, limits: Limits) -> Any:
    """The request body as JSON, within the depth and count limits (the size limit is the
    middleware's)."""
    return parse_limited_json(await read_body(request), limits)


def parse_limited_json(raw: bytes | str, limits: Limits) -> Any:
    """A JSON body (or WebSocket message), within the depth and count limits."""
    if isinstance(raw, str):
        raw = raw.encode()
    if not raw:
        raise InvalidRequestError("the request body is empty; expected a JSON object")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from None
    if might_be_deep(raw, limits.max_json_depth):
        check_depth(body, limits.max_json_depth)
    check_counts(body, limits)
    return body
