"""The workspace tools as an MCP server, driven by the official `mcp` client over stdio and
over streamable HTTP, each server a real subprocess."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

SERVER = [sys.executable, "-m", "toolwire.tools.workspace.mcp_server"]
FILE_TEXT = 'export const RE = /\\.ts$/;\nconst q = "a\\\\b";\n'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "find.ts").write_text(FILE_TEXT)
    return tmp_path


def text_of(result: object) -> tuple[str, bool]:
    assert isinstance(result, CallToolResult)
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text, result.is_error


async def exercise(session: ClientSession, *, writable: bool) -> None:
    await session.initialize()
    listed = await session.list_tools()
    names = [tool.name for tool in listed.tools]
    expected = ["read_file", "find", "grep", "search_files", "pipe", "preview_edit"]
    assert names == expected + (["edit_file", "create_file"] if writable else [])
    schema = {tool.name: tool.input_schema for tool in listed.tools}["read_file"]
    assert schema["required"] == ["path"]

    text, failed = text_of(await session.call_tool("read_file", {"path": "src/find.ts"}))
    assert not failed
    assert text == '     1\texport const RE = /\\.ts$/;\n     2\tconst q = "a\\\\b";'

    text, failed = text_of(await session.call_tool("grep", {"pattern": "RE ="}))
    assert (text, failed) == ("src/find.ts:1:export const RE = /\\.ts$/;", False)

    text, failed = text_of(await session.call_tool("read_file", {"path": "../etc/passwd"}))
    assert failed and text.startswith("path '../etc/passwd' uses '..' to leave")

    text, failed = text_of(await session.call_tool("read_file", {"pathname": "x"}))
    assert failed and "invalid arguments for read_file" in text

    if writable:
        text, failed = text_of(
            await session.call_tool("create_file", {"path": "new.txt", "content": "hi\n"})
        )
        assert not failed and text.startswith("path: new.txt\ncreated: true\nbytesWritten: 3")


async def test_stdio_round_trip(root: Path) -> None:
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--root", str(root), "--allow-write"]
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await exercise(session, writable=True)
    assert (root / "new.txt").read_text() == "hi\n"


@pytest.fixture
async def http_url(root: Path) -> AsyncIterator[str]:
    process = await asyncio.create_subprocess_exec(
        *SERVER, "--root", str(root), "--http", "--port", "0", stderr=asyncio.subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode()
        assert "streamable HTTP on http://127.0.0.1:" in line, line
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


async def test_streamable_http_round_trip(http_url: str) -> None:
    assert http_url.endswith("/mcp")
    async with (
        streamable_http_client(http_url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await exercise(session, writable=False)
