"""Operator policy wins over a request's, and request-supplied MCP servers cannot be aimed at
loopback, private or metadata addresses (server-side request forgery)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from toolwire.config import McpServerConfig
from toolwire.net import addresses
from toolwire.server.responses.prepare.mcp_tools import request_use
from toolwire.tools.mcp import address
from toolwire.tools.mcp.connection import McpConnectionError
from toolwire.tools.mcp.pool import McpPool, McpServerSpec

FILES = McpServerConfig(
    label="files",
    command="files-server",
    allowed_tools=["read_file"],
    require_approval="always",
)


def test_a_request_cannot_loosen_a_configured_servers_policy() -> None:
    """The attack: the config says read_file only, always approved; the request asks for
    create_file with no approval. Before: create_file ran unapproved."""
    entry = {
        "type": "mcp",
        "server_label": "files",
        "allowed_tools": ["create_file"],
        "require_approval": "never",
    }
    use = request_use(entry, 0, {"files": FILES})
    assert use.allowed == frozenset()  # create_file is not the operator's to give
    assert use.rule("read_file") and use.rule("create_file")


def test_a_request_may_narrow_and_tighten() -> None:
    config = FILES.model_copy(update={"allowed_tools": ["a", "b"], "require_approval": "never"})
    entry = {"type": "mcp", "server_label": "files", "allowed_tools": ["b", "c"]}
    entry["require_approval"] = {"always": {"tool_names": ["b"]}}
    use = request_use(entry, 0, {"files": config})
    assert use.allowed == frozenset({"b"})
    assert use.rule("b") and not use.rule("a")


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[bytes]]]:
    """An HTTP server on loopback that answers 404 with a body, and records what reached it."""
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.read(65536))
        body = b"SECRET-BODY of an internal service"
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], seen


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "127.1"])
async def test_loopback_server_urls_are_refused_before_anything_is_sent(
    listener: tuple[int, list[bytes]], host: str
) -> None:
    port, seen = listener
    spec = McpServerSpec("x", url=f"http://{host}:{port}/mcp", headers={"X-Attack": "1"})
    with pytest.raises(McpConnectionError) as caught:
        await McpPool().acquire(spec)
    message = str(caught.value)
    assert "not an allowed address" in message and "mcp_allow_private_urls" in message
    if host == "localhost":  # what the name resolved to is not said
        assert "127.0.0.1" not in message and "::1" not in message
    assert seen == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/mcp",
        "http://192.168.1.1/mcp",
        "http://[fd00:ec2::254]/mcp",
        "http://100.100.100.200/mcp",
        "http://0.0.0.0:80/mcp",
        "http://[2002:7f00:1::1]/mcp",  # 6to4 of 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/mcp",  # 6to4 of 169.254.169.254 (metadata)
        "http://[2002:a00:7::1]/mcp",  # 6to4 of 10.0.0.7
        "http://[64:ff9b::a9fe:a9fe]/mcp",  # NAT64 of 169.254.169.254
        "http://[fec0::1]/mcp",  # site-local
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/mcp",  # Teredo, client 127.0.0.1
    ],
)
async def test_private_and_metadata_addresses_are_refused(url: str) -> None:
    with pytest.raises(McpConnectionError) as caught:
        await asyncio.wait_for(McpPool().acquire(McpServerSpec("x", url=url)), 5)
    assert caught.value.refused


async def test_a_refusal_never_says_what_a_name_resolved_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack: name internal hosts in `server_url` and read the refusal ("db.internal is
    a private address (10.0.0.7)"). An internal name and a name that does not resolve at all
    are refused in the same words, with no address."""
    internal = {"db.internal": "10.0.0.7", "meta.internal": "169.254.169.254"}

    async def resolver(host: str, port: int, **_: Any) -> list[Any]:
        if host not in internal:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (internal[host], port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolver)
    messages = []
    for host in (*internal, "nowhere.internal"):
        with pytest.raises(McpConnectionError) as caught:
            await McpPool().acquire(McpServerSpec("x", url=f"http://{host}/mcp"))
        assert caught.value.refused
        messages.append(str(caught.value).replace(host, "HOST"))
    assert len(set(messages)) == 1, messages
    said = (*internal.values(), "a private address", "link-local", "does not resolve")
    assert not any(words in messages[0] for words in said), messages[0]


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("2002:5db8:d822::1", True),  # 6to4 of a public address
        ("64:ff9b::5db8:d822", True),  # NAT64 of a public address
        ("2002:7f00:1::1", False),
        ("2002:c0a8:101::1", False),  # 6to4 of 192.168.1.1
        ("fec0::1", False),
        ("fefe::1", False),  # the top of fec0::/10
        ("::ffff:10.0.0.1", False),
        ("100.64.0.1", False),  # CGNAT
    ],
)
def test_the_shared_address_check(text: str, allowed: bool) -> None:
    assert addresses.allowed(ipaddress.ip_address(text)) is allowed


async def test_a_name_is_checked_after_resolution_and_the_checked_address_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DNS rebinding: the name resolves to a public address when checked and to 127.0.0.1
    when connected. The connection must go to the address that was checked."""
    answers = iter(["93.184.216.34", "127.0.0.1"])

    async def rebinding(host: str, port: int, **_: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", rebinding)
    sent: list[httpx2.Request] = []

    async def capture(self: Any, request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200)

    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", capture)
    async with address.guarded_client_factory() as client:
        await client.get("https://rebind.example/mcp")
    assert str(sent[0].url) == "https://93.184.216.34/mcp"
    assert sent[0].headers["Host"] == "rebind.example"
    assert sent[0].extensions["sni_hostname"] == "rebind.example"
    with pytest.raises(address.RefusedAddress):  # the second answer is checked too
        async with address.guarded_client_factory() as client:
            await client.get("https://rebind.example/mcp")


async def test_errors_neither_quote_the_body_nor_tell_open_ports_from_closed(
    listener: tuple[int, list[bytes]],
) -> None:
    """With private URLs allowed, an open port that is not an MCP server and a closed port
    fail the same way, and nothing of what answered is quoted."""
    port, seen = listener
    pool = McpPool(allow_private_urls=True)
    messages = []
    for target in (port, closed_port()):
        with pytest.raises(McpConnectionError) as caught:
            await pool.acquire(McpServerSpec("x", url=f"http://127.0.0.1:{target}/mcp"))
        messages.append(str(caught.value).replace(str(target), "PORT"))
    assert seen  # the open one was reached
    assert messages[0] == messages[1]
    assert "SECRET" not in messages[0] and "404" not in messages[0]


async def test_configured_servers_are_the_operators_choice() -> None:
    """A server from toolwire's own config is not checked (it may well be on loopback), and
    its errors keep their detail for the operator."""
    spec = McpServerSpec("x", url=f"http://127.0.0.1:{closed_port()}/mcp", trusted=True)
    with pytest.raises(McpConnectionError) as caught:
        await McpPool().acquire(spec)
    assert not caught.value.refused and "could not connect, or" not in str(caught.value)
