"""The resolved tools of recent tool lists (`prepare/tools.py` `RecentTools`): the same answer
as resolving the list anew, shared only where nothing in it is made per request, refused every
time it is wrong, and never more lists kept than its bound."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.config import McpServerConfig
from toolwire.errors import InvalidRequestError
from toolwire.server.responses.prepare.tools import RecentTools, request_tools

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "weather", "parameters": {"type": "object"}},
    {"type": "custom", "name": "patch", "description": "edit"},
    {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]},
    {"type": "file_search"},
]
MCP = McpServerConfig(label="files", url="http://127.0.0.1:1/mcp")


def test_a_kept_list_resolves_as_it_would_anew() -> None:
    recent = RecentTools()
    first = recent.resolve(TOOLS, {}, None, {"server_tool"})
    again = recent.resolve([dict(tool) for tool in TOOLS], {}, None, {"server_tool"})
    fresh = request_tools(TOOLS, {}, None, {"server_tool"})
    assert again is first
    assert first.echo == fresh.echo and first.not_offered == fresh.not_offered
    assert first.specs == fresh.specs and first.client.tools == fresh.client.tools


def test_other_server_tools_or_another_order_resolve_anew() -> None:
    recent = RecentTools()
    first = recent.resolve(TOOLS, {}, None, set())
    assert recent.resolve(TOOLS, {}, None, {"other"}) is not first
    assert recent.resolve(TOOLS[::-1], {}, None, set()) is not first


def test_a_list_that_uses_an_mcp_server_is_not_kept() -> None:
    recent = RecentTools()
    tools = [{"type": "mcp", "server_label": "files"}]
    first = recent.resolve(tools, {"files": MCP}, None, set())
    assert first.mcp_uses
    assert recent.resolve(tools, {"files": MCP}, None, set()) is not first


def test_a_wrong_list_is_refused_every_time() -> None:
    recent = RecentTools()
    wrong = [{"type": "function", "name": ""}]
    for _ in range(2):
        with pytest.raises(InvalidRequestError):
            recent.resolve(wrong, {}, None, set())


def test_the_lists_kept_are_bounded() -> None:
    recent = RecentTools(size=4)
    for n in range(10):
        recent.resolve([{"type": "function", "name": f"f{n}"}], {}, None, set())
        assert len(recent._kept) <= 4


def test_a_large_list_is_not_kept() -> None:
    recent = RecentTools(largest=100)
    tools = [{"type": "function", "name": "f", "description": "x" * 200}]
    assert recent.resolve(tools, {}, None, set()) is not recent.resolve(tools, {}, None, set())
