"""Which addresses a caller-chosen URL may reach: global unicast only.

A caller who picks the host toolwire connects to (a request's MCP `server_url`, a
user-supplied upstream a health probe visits) could otherwise reach loopback services, toolwire
itself, private networks or the cloud metadata address (169.254.169.254): server-side request
forgery. `resolve_checked` resolves the name itself, refuses when *any* address it resolves to
is not allowed, and returns the address to connect to (the caller pins the connection to it,
so a DNS answer that changes in between cannot redirect it).

Refused: loopback, private, link-local (metadata), CGNAT, reserved, multicast, unspecified and
IPv6 site-local (`fec0::/10`, deprecated but still routed by some networks) addresses; and
IPv6 addresses that carry an IPv4 address a gateway will deliver to (IPv4-mapped `::ffff:0:0/96`,
6to4 `2002::/16`, Teredo `2001::/32` (its server and client)) are judged by that IPv4
address as well, and NAT64 addresses (`64:ff9b::/96`, what DNS64 answers on IPv6-only
networks) by that IPv4 address alone.

A refusal never says what a name resolved to, nor whether it resolved at all: otherwise any
caller could use the check to map internal DNS names ("db.internal is a private address
(10.0.0.7)"). It names only the host the caller gave; an address the caller wrote itself is
said to be loopback, link-local and so on (that tells the caller nothing it did not know).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class RefusedAddress(Exception):
    """The URL's host is (or resolves to) an address a caller-chosen URL may not use."""


def embedded_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address delivers to (mapped, 6to4, Teredo, NAT64)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)  # (server, client)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def category(address: Address) -> str:
    """In words, why `address` is refused (for an address the caller wrote itself: saying so
    tells nothing a name would resolve to)."""
    for each in (*embedded_ipv4(address), address):
        if each.is_loopback:
            return "a loopback address"
        if each.is_link_local:
            return "a link-local address (cloud metadata lives there)"
        if each.is_multicast or each.is_unspecified:
            return "not a unicast address"
    if isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL:
        return "a site-local address"
    return "a private or reserved address"


def allowed(address: Address) -> bool:
    """Whether `address` (and every IPv4 address it embeds) is a global unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL:
        return False
    judged: list[Address] = [*embedded_ipv4(address)]
    if not (isinstance(address, ipaddress.IPv6Address) and address in _NAT64):
        judged.append(address)  # NAT64 (inside ::/8, "reserved") is only its IPv4 address
    for each in judged:
        if (
            each.is_loopback
            or each.is_link_local
            or each.is_multicast
            or each.is_unspecified
            or each.is_reserved
            or each.is_private
            or not each.is_global
        ):
            return False
    return True


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve_checked(
    host: str, port: int, *, what: str = "this server", remedy: str = ""
) -> str:
    """The address to connect to for `host`: every address it resolves to is checked, the
    first is returned. Raises `RefusedAddress`, saying only that the host is not allowed:
    `what` names the caller's kind of server ("request-supplied MCP servers"), `remedy` what
    an operator can do about it."""
    literal = _literal(host)
    addresses: list[Address]
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            infos = []
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if not addresses or not all(allowed(address) for address in addresses):
        if literal is not None:  # the caller's own address: what it is may be said
            why = f"{host} is {category(literal)}, not an allowed address: {what} must be on "
            message = why + "public addresses (global unicast)"
        else:  # one message whether the name resolved or not, never what it resolved to
            message = (
                f"{host} is not an allowed address: {what} must be on public addresses (the "
                "name must resolve, and only to global unicast addresses)"
            )
        raise RefusedAddress(f"{message}. {remedy}" if remedy else message)
    return str(addresses[0])
