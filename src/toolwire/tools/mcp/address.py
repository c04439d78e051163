"""Where a request-supplied MCP server may be: public addresses only, unless the operator says.

A request's `server_url` makes toolwire open an HTTP connection with headers the caller chose:
pointed at `127.0.0.1`, a private range or the cloud metadata address (169.254.169.254), that is
server-side request forgery against whatever listens there, toolwire included. So every HTTP
request to such a server (the first and any later one: redirects are not followed, and each
request passes through here anyway) goes through a guarded transport, which

- resolves the host name itself and refuses when *any* address it resolves to is not a global
  unicast address (`net/addresses.py`, the check shared with every part that connects where a
  caller says: loopback, private, link-local and metadata, CGNAT, reserved, multicast,
  unspecified, site-local; IPv6 forms embedding IPv4 judged by it), unless the operator set
  `mcp_allow_private_urls`; the refusal never says what the name resolved to;
- then connects to the address it checked (the URL's host is replaced by that address, while
  the `Host` header and TLS SNI keep the name), so a DNS answer that changes between the check
  and the connect (DNS rebinding) cannot redirect the connection.

Servers from toolwire's own config are the operator's choice and are not checked.
"""

from __future__ import annotations

import functools
from typing import Any

from toolwire.net.addresses import RefusedAddress, resolve_checked

__all__ = ["RefusedAddress", "guarded_client_factory", "resolve_checked_mcp"]


async def resolve_checked_mcp(host: str, port: int) -> str:
    """`resolve_checked` (`net/addresses.py`) in words for a request's MCP server."""
    return await resolve_checked(
        host,
        port,
        what="request-supplied MCP servers",
        remedy="The operator can allow private addresses with mcp_allow_private_urls",
    )


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
            pinned = await resolve_checked_mcp(host, port)
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
