"""API-key authentication, as pure ASGI middleware.

When the database holds at least one unrevoked key (`toolwire keys create NAME`), every route but
`GET /health` and `GET /openapi.json` (the same for every server: it holds no data) needs one:
`Authorization: Bearer KEY`, or the `api-key` / `x-api-key` header. A missing or wrong key gets
401 in the OpenAI error shape. The presented key is hashed and compared with every active
key's hash by `hmac.compare_digest`, so the time taken says nothing about which keys exist.
The key's id becomes the request's owner: `scope["state"]["owner"]` (so `request.state.owner`)
and `store.owner.current_owner`, which scopes every store call.

Keys are read from the database at most every `ttl` seconds (default 2): a key created or revoked
while the server runs takes effect within that time, without a restart.

A server that must not run open (bound beyond loopback without `--allow-unauthenticated`) has
`require_keys`: with every key revoked, it refuses everything rather than opening up.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from starlette.requests import HTTPConnection

from toolwire.store.keys import ActiveKey, KeyStore, hash_key
from toolwire.store.owner import current_owner

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths open without a key (GET and HEAD only).
OPEN_PATHS = frozenset({"/health", "/openapi.json", "/ui", "/ui/"})
"""Open without a key: the health check, the OpenAPI document (the same for every server), and
the /ui page's shell and static files, which hold no data (the page asks for a key and sends it
with every `/ui/api/...` call)."""
OPEN_PREFIXES = ("/ui/static/",)

_MISSING = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or in an api-key header. "
    "Keys are made with `toolwire keys create NAME`."
)
_WRONG = "Incorrect API key provided. Keys are listed with `toolwire keys list`."


def owner_of(request: HTTPConnection) -> str | None:
    """The API key id this middleware found for the request or WebSocket (None: no keys in
    use)."""
    owner: str | None = getattr(request.state, "owner", None)
    return owner


class KeyRing:
    """The active keys, read from the store at most every `ttl` seconds."""

    def __init__(self, keys: KeyStore, ttl: float = 2.0) -> None:
        self.store = keys
        self.ttl = ttl
        self._keys: list[ActiveKey] = []
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def active(self) -> list[ActiveKey]:
        if time.monotonic() < self._expires:
            return self._keys
        async with self._lock:
            if time.monotonic() >= self._expires:
                self._keys = await self.store.active()
                self._expires = time.monotonic() + self.ttl
        return self._keys

    @staticmethod
    def match(keys: list[ActiveKey], presented: str) -> str | None:
        """The id of the key `presented` is, or None; compares against every key, always."""
        digest = hash_key(presented).encode()
        found: str | None = None
        for key in keys:
            if hmac.compare_digest(digest, key.hash.encode()):
                found = key.id
        return found


def presented_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The key from `Authorization: Bearer …`, `api-key` or `x-api-key`, or None."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name in (b"api-key", b"x-api-key") and value.strip():
            return value.decode("latin-1").strip()
    return None


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    *,
    param: str | None = None,
    error_type: str = "invalid_request_error",
    headers: list[tuple[bytes, bytes]] | None = None,
    scope: Scope | None = None,
) -> None:
    """An OpenAI-shaped error answered straight from middleware. For a WebSocket handshake
    (`scope` of type `websocket`), the same status and body when the server can send an HTTP
    answer to an upgrade (the ASGI "websocket.http.response" extension: uvicorn, Starlette's
    TestClient); otherwise the upgrade is closed with 1008 (policy violation), which servers
    answer as 403."""
    body = orjson.dumps(
        {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    )
    start = {
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    }
    if scope is not None and scope["type"] == "websocket":
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", **start})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": code})
        return
    await send({"type": "http.response.start", **start})
    await send({"type": "http.response.body", "body": body})


class AuthMiddleware:
    def __init__(self, app: ASGIApp, keyring: KeyRing, *, require_keys: bool = False) -> None:
        self.app = app
        self.keyring = keyring
        self.require_keys = require_keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not await self.admit(scope, send):
            return
        token = current_owner.set(scope["state"]["owner"])
        try:
            await self.app(scope, receive, send)
        finally:
            current_owner.reset(token)

    async def admit(self, scope: Scope, send: Send) -> bool:
        """Whether the request may go on; its owner is then `scope["state"]["owner"]` (the
        caller sets `current_owner` for the request). False: refused here (401). HTTP and
        WebSocket scopes only; also a step of `server/gate.py`'s one middleware."""
        path = scope["path"]
        if (
            scope["type"] == "http"
            and scope["method"] in ("GET", "HEAD")
            and (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES))
        ):
            scope.setdefault("state", {}).setdefault("owner", None)
            return True
        keys = await self.keyring.active()
        owner: str | None = None
        if keys or self.require_keys:
            presented = presented_key(scope["headers"])
            owner = None if presented is None else KeyRing.match(keys, presented)
            if owner is None:
                await self._refuse(scope, send, _MISSING if presented is None else _WRONG)
                return False
        scope.setdefault("state", {})["owner"] = owner
        return True

    async def _refuse(self, scope: Scope, send: Send, message: str) -> None:
        await send_error(
            send,
            401,
            message,
            "invalid_api_key",
            headers=[(b"www-authenticate", b'Bearer realm="toolwire"')],
            scope=scope,
        )
