"""The server's security settings, the middleware they make, and the start-up check.

See docs/security.md for the threat model and every default.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.middleware import Middleware

from toolwire.errors import ConfigError
from toolwire.observe.requests import RequestObserver
from toolwire.server.gate.auth import AuthMiddleware, KeyRing, Receive, Scope, Send
from toolwire.server.gate.guards import GuardMiddleware, is_loopback_host
from toolwire.server.gate.limits import BodyLimitMiddleware, Limits
from toolwire.server.gate.middleware import Gate
from toolwire.server.gate.shares import Shares
from toolwire.store.database import Store

if TYPE_CHECKING:
    from toolwire.server.http.static_routes import StaticRoutes

log = logging.getLogger("toolwire.server")


@dataclass(slots=True, frozen=True)
class Security:
    limits: Limits = field(default_factory=Limits)
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    #: refuse `Host` names other than loopback ones and `allowed_hosts`: on loopback, and
    #: wherever no key is required (`--allow-unauthenticated`), against DNS rebinding
    check_host: bool = True
    #: any IP address is an acceptable Host too (bound beyond loopback)
    ip_hosts: bool = False
    #: refuse every request when no key exists (bound beyond loopback, not opted out)
    require_keys: bool = False
    key_cache_seconds: float = 2.0


def middleware(
    security: Security,
    store: Store,
    observer: RequestObserver | None = None,
    routes: StaticRoutes | None = None,
) -> list[Middleware]:
    """One middleware (`server/gate/middleware.py`): the request observer (when given), then Origin
    /
    Host / content type, then the key, then the body size."""
    return [
        Middleware(
            Gate,
            guard=GuardMiddleware(
                _unused,
                allowed_origins=security.allowed_origins,
                check_host=security.check_host,
                allowed_hosts=security.allowed_hosts,
                ip_hosts=security.ip_hosts,
            ),
            auth=AuthMiddleware(
                _unused,
                keyring=KeyRing(store.keys, security.key_cache_seconds),
                require_keys=security.require_keys,
            ),
            limit=BodyLimitMiddleware(_unused, max_bytes=security.limits.max_body_bytes),
            shares=Shares(
                store.quotas,
                max_streams_per_key=security.limits.max_streams_per_key,
                max_websockets_per_key=security.limits.max_sockets_per_key,
            ),
            observer=observer,
            routes=routes,
        )
    ]


async def _unused(scope: Scope, receive: Receive, send: Send) -> None:
    """The app of the checks the gate composes: they are only asked to check, never to call."""
    raise AssertionError("the gate calls the app itself")


def is_loopback_bind(host: str) -> bool:
    """Whether binding to `host` keeps the server on this machine."""
    if host in ("", "0.0.0.0", "::", "*"):
        return False
    if is_loopback_host(host):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(host: str, port: int) -> str:
    return (
        f"refusing to listen on {host}:{port} without API keys: anyone who can reach that "
        "address could use the upstream's key, read every stored conversation and run tools. "
        "Create a key first (`toolwire keys create NAME`, with the same --db), or bind to "
        "127.0.0.1, or opt out explicitly with --allow-unauthenticated "
        "(see docs/security.md)."
    )


async def startup_security(
    store: Store,
    *,
    host: str,
    port: int,
    allow_unauthenticated: bool,
    limits: Limits,
    allowed_origins: tuple[str, ...] = (),
    allowed_hosts: tuple[str, ...] = (),
    key_cache_seconds: float = 2.0,
) -> Security:
    """The settings to serve with, or a ConfigError when binding beyond loopback with no key
    and no explicit opt-out."""
    loopback = is_loopback_bind(host)
    keys = await store.keys.active()
    if not loopback and not keys and not allow_unauthenticated:
        raise ConfigError(refusal(host, port))
    if not keys:
        if loopback:
            log.warning(
                "no API keys: anyone on this machine can use this server "
                "(create one with `toolwire keys create NAME`)"
            )
        else:
            log.warning(
                "--allow-unauthenticated: serving %s:%s with no API key; anyone who can reach "
                "it can use the upstream and every stored conversation",
                host,
                port,
            )
    return Security(
        limits=limits,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
        check_host=loopback or allow_unauthenticated,
        ip_hosts=not loopback,
        require_keys=not loopback and not allow_unauthenticated,
        key_cache_seconds=key_cache_seconds,
    )
