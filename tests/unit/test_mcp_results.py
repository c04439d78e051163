"""MCP results reach the model as readable text: images and resources described, not dumped."""

from __future__ import annotations

import base64

import pytest
from mcp import types

from toolwire.errors import InvalidRequestError
from toolwire.server.responses.prepare.mcp_tools import redacted, request_use
from toolwire.tools.mcp.results import render_content
from toolwire.tools.mcp.toolset import approval_rule


def test_content_blocks_render_readably() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    blocks = [
        types.TextContent(type="text", text="a chart:"),
        types.ImageContent(type="image", data=png, mime_type="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="file:///notes.md", mime_type="text/markdown", text="# Notes"
            ),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="file:///a.bin", mime_type="application/octet-stream", blob=png
            ),
        ),
    ]
    assert render_content(blocks) == (
        "a chart:\n[image: image/png, 100 bytes]\n"
        "[resource: file:///notes.md (text/markdown)]\n# Notes\n"
        "[resource: file:///a.bin (application/octet-stream), 100 bytes]"
    )
    assert png not in render_content(blocks)


@pytest.mark.parametrize(
    ("rule", "name", "needed"),
    [
        (None, "x", True),
        ("always", "x", True),
        ("never", "x", False),
        ({"never": {"tool_names": ["read"]}}, "read", False),
        ({"never": {"tool_names": ["read"]}}, "write", True),
        ({"always": {"tool_names": ["write"]}}, "write", True),
        ({"always": {"tool_names": ["write"]}}, "read", False),
    ],
)
def test_approval_rules(rule: object, name: str, needed: bool) -> None:
    assert approval_rule(rule, "p")(name) is needed


def test_bad_approval_rule_is_a_400_naming_the_field() -> None:
    with pytest.raises(InvalidRequestError) as info:
        request_use(
            {
                "type": "mcp",
                "server_label": "s",
                "server_url": "http://x/mcp",
                "require_approval": "sometimes",
            },
            2,
            {},
        )
    assert info.value.param == "tools[2].require_approval"


def test_secrets_are_redacted_in_echoes_and_kept_for_the_connection() -> None:
    entry = {
        "type": "mcp",
        "server_label": "s",
        "server_url": "http://x/mcp",
        "authorization": "tok",
        "headers": {"X-Key": "k"},
    }
    use = request_use(entry, 0, {})
    assert use.spec.headers == {"X-Key": "k", "Authorization": "Bearer tok"}
    assert redacted(entry)["authorization"] == "<redacted>"
    assert redacted(entry)["headers"] == {"X-Key": "<redacted>"}
    assert "tok" not in repr(use.echo) and "'k'" not in repr(use.echo)
