"""Where a request-supplied MCP server may be: public addresses only, unless the operator says.

A request's `server_url` makes toolwire open an HTTP connection with headers the caller chose:
pointed at `127.0.0.1`, a private range or the cloud metadata address (169.254.169.254), that is
server-side request forgery against whatever listens there, toolwire included. So every HTTP
request to such a server (the first and any later one: redirects are not followed, and each
request passes through here anyway) goes through a guarded transport, which

- resolves the host name itself and refuses when *any* address it resolves to is not a global
  unicast address (loopback, private, link-local and metadata, CGNAT, reserved, multicast,
  unspecified; IPv4-mapped IPv6 forms included), unless the operator set
  `mcp_allow_private_urls`;
- then connects to the address it checked (the URL's host is replaced by that address, while
  the `Host` header and TLS SNI keep the name), so a DNS answer that changes between the check
  and the connect (DNS rebinding) cannot redirect the connection.

Servers from toolwire's own config are the operator's choice and are not checked.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from typing import Any

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedAddress(Exception):
    """The URL's host is (or resolves to) an address request-supplied servers may not use."""


def refusal(address: Address) -> str | None:
    """Why `address` is refused, or None for a global unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return "not a unicast address"
    if address.is_private or not address.is_global:
        return "a private address"
    return None


async def resolve_checked(host: str, port: int) -> str:
    """The address to connect to for `host`: every address it resolves to is checked, the first
    is returned. Raises `RefusedAddress`."""
    try:
        literal: Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise RefusedAddress(f"the host name {host!r} does not resolve") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if not addresses:
        raise RefusedAddress(f"the host name {host!r} does not resolve")
    for address in addresses:
        why = refusal(address)
        if why is not None:
            raise RefusedAddress(
                f"{host} is {why} ({address}); request-supplied MCP servers must be public. "
                "The operator can allow private addresses with mcp_allow_private_urls"
            )
    return str(addresses[0])


@functools.cache
def _transport_class() -> type[Any]:
    """`GuardedTransport`, made on first use: httpx2 comes with the MCP SDK, which toolwire
    imports only when a connection opens."""
    import httpx2

    class GuardedTransport(httpx2.AsyncHTTPTransport):
        """An HTTP transport that checks, then pins, the address of every request."""

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            host = request.url.host
            port = request.url.port or (443 if request.url.scheme == "https" else 80)
            pinned = await resolve_checked(host, port)
            if pinned != host:  # the Host header already names `host`
                if request.url.scheme == "https":
                    request.extensions = {**request.extensions, "sni_hostname": host}
                request.url = request.url.copy_with(host=pinned)
            return await super().handle_async_request(request)

    return GuardedTransport


def guarded_client_factory(
    headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
) -> Any:
    """The MCP SDK's client factory (`create_mcp_http_client`'s shape), guarded."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    kwargs: dict[str, Any] = {
        "timeout": timeout
        or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        "transport": _transport_class()(),
        "follow_redirects": False,
    }
    if headers is not None:
        kwargs["headers"] = headers
    if auth is not None:
        kwargs["auth"] = auth
    return httpx2.AsyncClient(**kwargs)
