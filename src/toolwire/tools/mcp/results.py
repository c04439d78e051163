"""MCP tool results as the model should read them: text as text; images, audio and resources
described in a line each, never dumped as base64 or JSON."""

from __future__ import annotations

import base64
import binascii
from typing import Any


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def render_content(blocks: list[Any]) -> str:
    from mcp import types  # imported on use: see tools/mcp/connection.py

    parts: list[str] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"[image: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[audio: {block.mime_type}, {_size(block.data)} bytes]")
        elif isinstance(block, types.ResourceLink):
            label = f" {block.name}" if getattr(block, "name", None) else ""
            parts.append(f"[resource link: {block.uri}{label}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            mime = getattr(resource, "mime_type", None) or "unknown type"
            if isinstance(resource, types.TextResourceContents):
                parts.append(f"[resource: {resource.uri} ({mime})]\n{resource.text}")
            else:
                blob = getattr(resource, "blob", "")
                parts.append(f"[resource: {resource.uri} ({mime}), {_size(blob)} bytes]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content]")
    return "\n".join(parts)
