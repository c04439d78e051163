"""Credentials of request-supplied MCP servers, kept (sealed) for approvals continued from /ui.

Stored responses echo MCP tools with `<redacted>` credentials, so the `/ui` page, which
continues an approval by sending the stored response's tools back, would send `Bearer
<redacted>` to a server that needs credentials. When a response ends asking for approval, the
request's MCP tools that carry secrets are sealed (`toolwire/sealed.py`, a key of its own) into
`sealed_tools`, with the response's owner. A continuation of that response by the same owner
that sends a tool exactly as the response echoed it (redacted) gets the original back; another
owner cannot continue the response at all, and a tool that differs from the echo in any field
(another URL, another label) gets nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.sealed import SECRET_NAME, Sealer, SealError
from toolwire.server.responses.prepare.mcp_tools import redacted
from toolwire.store.database import Store
from toolwire.store.owner import Owner
from toolwire.store.sealed_tools import read as kept_tools
from toolwire.tools.mcp.redact import REDACTED
from toolwire.wire.items import Item

_LABEL = b"approval_tools"


def _with_secrets(tools: list[Any]) -> list[dict[str, Any]]:
    return [
        entry
        for entry in tools
        if isinstance(entry, dict) and entry.get("type") == "mcp" and redacted(entry) != entry
    ]


def asks_approval(output: list[Item]) -> bool:
    return any(item.get("type") == "mcp_approval_request" for item in output)


async def _sealer(store: Store) -> Sealer:
    return Sealer(await store.secret(SECRET_NAME), _LABEL)


async def seal(store: Store, tools: list[Any]) -> str | None:
    """The request's credentialed MCP tools, sealed, for a response that asks for approval
    (the recorder keeps them in the response's final transaction); None when none has any."""
    secret = _with_secrets(tools)
    if not secret:
        return None
    return (await _sealer(store)).seal(secret)


async def restore(
    store: Store, previous_response_id: str, tools: list[Any], owner: Owner
) -> list[Any]:
    """`tools` with each redacted echo of a sealed tool of the owner's previous response
    replaced by the original; unchanged when nothing was redacted or nothing is kept."""
    if REDACTED not in orjson.dumps(tools).decode():
        return tools
    token = await kept_tools(store, previous_response_id, owner)
    if token is None:
        return tools
    try:
        originals: list[dict[str, Any]] = (await _sealer(store)).open(token)
    except SealError:
        return tools
    return [
        next((original for original in originals if redacted(original) == entry), entry)
        for entry in tools
    ]
