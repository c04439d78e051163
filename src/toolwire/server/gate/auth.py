"""API-key authentication, as pure ASGI middleware.

When the database holds at least one unrevoked key (`toolwire keys create NAME`), every route but
`GET /health` and `GET /openapi.json` (the same for every server: it holds no data) needs one:
`Authorization: Bearer KEY`, or the `api-key` / `x-api-key` / `x-goog-api-key` header, or, on
the paths of Google's API (`QUERY_KEY_PATHS`), the `key` query parameter, as Google's clients
may send it. There a `key` parameter is taken out of the URL before anything else reads it
(`redact_query_key`): its value reads `REDACTED` in the scope, so no log line (uvicorn's access
log prints the query), trace or echo can hold it; elsewhere `key` is the route's own parameter
(`/ui`'s filter by key id). A missing or wrong key gets 401 in the OpenAI error shape
(Anthropic's or Google's on their doors). The presented key is hashed and compared with every active
key's hash by `hmac.compare_digest`, so the time taken says nothing about which keys exist.
The key's id becomes the request's owner: `scope["state"]["owner"]` (so `request.state.owner`)
and `store.owner.current_owner`, which scopes every store call.

Keys are read from the database at most every `ttl` seconds (default 2): a key created or revoked
while the server runs takes effect within that time, without a restart. A WebSocket is checked
at its upgrade and again before each message it runs (`scope["state"]["key_check"]`), so a
revoked key stops working on sockets already open too.

A server that must not run open (bound beyond loopback without `--allow-unauthenticated`) has
`require_keys`: with every key revoked, it refuses everything rather than opening up. So does
any server whose database has ever held a key: revoking the last key closes the server, it
does not silently reopen it to anyone (data stored under keys would otherwise be one
`keys revoke` away from anonymous callers; to run open again, start from a fresh database).

An operator key (`toolwire keys create NAME --operator`) marks the request
`scope["state"]["operator"]`: `/metrics` and the all-tenant views of `/ui` need it.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import HTTPConnection

from toolwire.server.http.errors import send_error
from toolwire.store.keys import ActiveKey, KeyStore, hash_key
from toolwire.store.owner import current_owner

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths open without a key (GET and HEAD only).
OPEN_PATHS = frozenset({"/", "/api/hello", "/health", "/openapi.json", "/ui", "/ui/"})
"""Open without a key: the root and `/api/hello` (Claude Code's reachability checks, sent
without its key), the health check,
the OpenAPI document (the same for every server), and the /ui page's shell and static files,
which hold no data (the page asks for a key and sends it with every `/ui/api/...` call)."""
OPEN_PREFIXES = ("/ui/static/",)

_MISSING = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or in an api-key header. "
    "Keys are made with `toolwire keys create NAME`."
)
_WRONG = "Incorrect API key provided. Keys are listed with `toolwire keys list`."
_ALL_REVOKED = (
    "Every API key of this server is revoked, so it answers no one (it does not reopen to "
    "anonymous callers). Make a key with `toolwire keys create NAME`."
)


def is_operator(request: HTTPConnection) -> bool:
    """Whether the request came with an operator key (or the server uses no keys at all)."""
    return bool(getattr(request.state, "operator", False))


def owner_of(request: HTTPConnection) -> str | None:
    """The API key id this middleware found for the request or WebSocket (None: no keys in
    use)."""
    state = request.scope.get("state")  # what `request.state` wraps, without making it
    owner: str | None = None if state is None else state.get("owner")
    return owner


class KeyRing:
    """The active keys, read from the store at most every `ttl` seconds."""

    def __init__(self, keys: KeyStore, ttl: float = 2.0) -> None:
        self.store = keys
        self.ttl = ttl
        self._keys: list[ActiveKey] = []
        self.ever_used = False
        """Whether the database has ever held a key: then a key is needed even when all are
        revoked."""
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def active(self) -> list[ActiveKey]:
        if time.monotonic() < self._expires:
            return self._keys
        async with self._lock:
            if time.monotonic() >= self._expires:
                self._keys = await self.store.active()
                self.ever_used = bool(self._keys) or await self.store.ever_used()
                self._expires = time.monotonic() + self.ttl
        return self._keys

    @staticmethod
    def match(keys: list[ActiveKey], presented: str) -> str | None:
        """The id of the key `presented` is, or None; compares against every key, always."""
        found = KeyRing.find(keys, presented)
        return None if found is None else found.id

    @staticmethod
    def find(keys: list[ActiveKey], presented: str) -> ActiveKey | None:
        """The key `presented` is, or None; compares against every key, always."""
        digest = hash_key(presented).encode()
        found: ActiveKey | None = None
        for key in keys:
            if hmac.compare_digest(digest, key.hash.encode()):
                found = key
        return found


def presented_key(headers: list[tuple[bytes, bytes]], query_key: str | None = None) -> str | None:
    """The key from `Authorization: Bearer …`, `api-key`, `x-api-key` or `x-goog-api-key`,
    else the `key` query parameter (`query_key`, from `redact_query_key`), or None."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name in (b"api-key", b"x-api-key", b"x-goog-api-key") and value.strip():
            return value.decode("latin-1").strip()
    if query_key is not None and query_key.strip():
        return query_key.strip()
    return None


REDACTED = "REDACTED"
QUERY_KEY_PATHS = ("/v1beta/", "/v1/models")
"""Where `?key=` is an API key: the Gemini door's paths (Google's API defines the parameter)."""


def redact_query_key(scope: Scope) -> str | None:
    """On `QUERY_KEY_PATHS`, the `key` query parameter's value, replaced in the scope's query
    string by `REDACTED` (the parameter stays, so a route still sees that one was sent). Only
    such a path's query that holds `key` at all is parsed: every other request pays a prefix
    test."""
    query: bytes = scope.get("query_string", b"")
    if not query or not scope["path"].startswith(QUERY_KEY_PATHS) or b"key" not in query.lower():
        return None
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    found = next((value for name, value in pairs if name == "key"), None)
    if found is not None:
        kept = [(name, REDACTED if name == "key" else value) for name, value in pairs]
        scope["query_string"] = urlencode(kept).encode("latin-1")
    return found


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
        WebSocket scopes only; also a step of `server/gate/middleware.py`'s one middleware."""
        kind = scope["type"]
        path = scope["path"]
        query_key = redact_query_key(scope)  # before anything can log or echo the URL
        if (
            kind == "http"
            and scope["method"] in ("GET", "HEAD")
            and (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES))
        ):
            scope.setdefault("state", {}).setdefault("owner", None)
            return True
        keys = await self.keyring.active()
        owner: str | None = None
        operator = False
        if keys or self.require_keys or self.keyring.ever_used:
            presented = presented_key(scope["headers"], query_key)
            found = None if presented is None else KeyRing.find(keys, presented)
            if found is None:
                message = _MISSING if presented is None else _WRONG
                if not keys:
                    message = _ALL_REVOKED
                await self._refuse(scope, send, message)
                return False
            owner, operator = found.id, found.operator
        state = scope.setdefault("state", {})
        state["owner"] = owner
        # no keys in use: whoever reaches the server (loopback) is its operator
        state["operator"] = operator or owner is None
        if kind == "websocket":  # a socket outlives its upgrade: it asks again per message
            state["key_check"] = functools.partial(self.still_valid, owner)
        return True

    async def still_valid(self, owner: str | None) -> bool:
        """Whether a connection accepted as `owner` would be accepted now (its key not
        revoked, and no key required where none was when it opened)."""
        keys = await self.keyring.active()
        if owner is None:
            return not keys and not self.require_keys and not self.keyring.ever_used
        return any(key.id == owner for key in keys)

    async def _refuse(self, scope: Scope, send: Send, message: str) -> None:
        await send_error(
            send,
            401,
            message,
            "invalid_api_key",
            headers=[(b"www-authenticate", b'Bearer realm="toolwire"')],
            scope=scope,
        )
