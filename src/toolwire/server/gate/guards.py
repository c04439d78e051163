"""What a browser could otherwise do to a gateway on your machine, refused in pure ASGI middleware.

- **Origin.** A request with an `Origin` header not in `allowed_origins` gets 403
  (`origin_not_allowed`): a web page cannot drive the gateway cross-origin. A same-origin
  request (the Origin names the Host it was sent to: the gateway's own `/ui` page) passes.
  Allowed origins get CORS answers (preflight `OPTIONS` and `Access-Control-Allow-Origin`).
- **Host.** When the server is bound to loopback, a `Host` that is not loopback (`localhost`,
  `127.x.x.x`, `[::1]`, any port) or one of `allowed_hosts` gets 403 (`host_not_allowed`). That
  closes DNS rebinding: a page whose name resolves to 127.0.0.1 still sends its own name.
- **Content type.** `POST` / `PUT` / `PATCH` with a body must be `application/json` (or
  `application/*+json`): 415 (`unsupported_media_type`) otherwise, so a "simple" cross-site
  form or `text/plain` request never reaches a route.

Each check is a scan of the request's header list: nothing is allocated for a request that passes
but the CORS wrapper, and only for allowed origins.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from toolwire.server.gate.auth import ASGIApp, Message, Receive, Scope, Send
from toolwire.server.http.errors import send_error

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_CORS_METHODS = b"GET, POST, DELETE, OPTIONS"


def is_loopback_host(host: str) -> bool:
    """`localhost`, `127.x.x.x`, `::1` (bracketed or not), with or without a port."""
    host = host_name(host)
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str:
    """The name of a `Host` header value, without port or brackets, lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def normalize_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


class GuardMiddleware:
    """Origin, Host and content-type checks; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_origins: Iterable[str] = (),
        check_host: bool = True,
        allowed_hosts: Iterable[str] = (),
        ip_hosts: bool = False,
    ) -> None:
        """`ip_hosts`: any IP address is an acceptable Host too (a server open beyond
        loopback with no key: a name is what DNS rebinding needs, an address is not)."""
        self.app = app
        self.ip_hosts = ip_hosts
        self.origins = frozenset(normalize_origin(o).encode("latin-1") for o in allowed_origins)
        self.check_host = check_host
        self.hosts = frozenset(host_name(h) for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        passed = await self.screen(scope, send)
        if passed is not None:
            await self.app(scope, receive, passed)

    async def screen(self, scope: Scope, send: Send) -> Send | None:
        """The `send` to go on with (wrapped for CORS when the origin is allowed), or None
        when the request was answered here (refused, or a CORS preflight). HTTP and WebSocket
        scopes only. Also the first step of `server/gate/middleware.py`'s one middleware."""
        origin = host = content_type = None
        has_body = False
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value
            elif name == b"host":
                host = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                has_body = value.strip() not in (b"0", b"")
            elif name == b"transfer-encoding":
                has_body = True
        if self.check_host and host is not None and not self._host_ok(host):
            await send_error(
                send,
                403,
                f"Host {host.decode('latin-1')!r} is not allowed: this server needs no API key, "
                "so it answers only loopback names, IP addresses (when bound beyond loopback) "
                "and its configured allowed_hosts (--allow-host).",
                "host_not_allowed",
                scope=scope,
            )
            return None
        if origin is not None and not _same_origin(origin, host):
            if normalize_origin(origin.decode("latin-1")).encode("latin-1") not in self.origins:
                await send_error(
                    send,
                    403,
                    f"Origin {origin.decode('latin-1')!r} is not allowed. Allow it with "
                    "--allow-origin (or allowed_origins in the config file).",
                    "origin_not_allowed",
                    scope=scope,
                )
                return None
            if scope["type"] == "http" and scope["method"] == "OPTIONS":
                await _preflight(scope, send, origin)
                return None
            if scope["type"] == "http":
                send = _with_cors(send, origin)
        if (
            has_body
            and scope["type"] == "http"
            and scope["method"] in _BODY_METHODS
            and not _is_json(content_type)
        ):
            shown = content_type.decode("latin-1") if content_type else "none"
            await send_error(
                send,
                415,
                f"Unsupported content type {shown!r}: send the body as application/json.",
                "unsupported_media_type",
                scope=scope,
            )
            return None
        return send

    def _host_ok(self, host: bytes) -> bool:
        return _host_allowed(host, self.hosts) or (self.ip_hosts and _is_ip_host(host))


@functools.lru_cache(maxsize=256)
def _host_allowed(host: bytes, hosts: frozenset[str]) -> bool:
    """Cached: a client sends the same few Host values on every request, and parsing one as an
    IP address costs more than the rest of the guard (~4% of a proxied request)."""
    text = host.decode("latin-1")
    return is_loopback_host(text) or host_name(text) in hosts


@functools.lru_cache(maxsize=256)
def _is_ip_host(host: bytes) -> bool:
    try:
        ipaddress.ip_address(host_name(host.decode("latin-1")))
    except ValueError:
        return False
    return True


def _is_json(content_type: bytes | None) -> bool:
    if content_type == b"application/json":  # what nearly every client sends
        return True
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


def _same_origin(origin: bytes, host: bytes | None) -> bool:
    """A page served by this gateway itself (`/ui`) calling it: the Origin names the Host the
    request was sent to. Not a cross-origin request, so not the browser threat the allow-list
    is for (a rebinding page is stopped by the Host check; beyond loopback, keys apply)."""
    if host is None:
        return False
    _, sep, rest = origin.partition(b"://")
    return bool(sep) and rest.rstrip(b"/").lower() == host.strip().lower()


async def _preflight(scope: Scope, send: Send, origin: bytes) -> None:
    requested = b""
    for name, value in scope["headers"]:
        if name == b"access-control-request-headers":
            requested = value
    headers = [
        (b"access-control-allow-origin", origin),
        (b"access-control-allow-methods", _CORS_METHODS),
        (b"access-control-max-age", b"600"),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    if requested:
        headers.append((b"access-control-allow-headers", requested))
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: bytes) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [
                *message.get("headers", []),
                (b"access-control-allow-origin", origin),
                (b"vary", b"Origin"),
            ]
        await send(message)

    return wrapped
