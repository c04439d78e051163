"""Anthropic's `web_search` / `web_fetch` server tools on the Messages door: the blocks toolwire
answers with (`server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`) and what
the model reads of them when a client sends them back in history."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from toolwire.tools.executor import ToolResult
from toolwire.tools.web import SEARCH, FetchedPage, SearchResults
from toolwire.transcript import ToolCall
from toolwire.wire import anthropic

SERVER_TOOL_ID = "srvtoolu_"


def server_blocks(call: ToolCall, result: ToolResult) -> list[anthropic.ContentBlock]:
    """A web tool's call and result as Anthropic answers them: `server_tool_use`, then
    `web_search_tool_result` (`web_search_result` entries, or an error code) or
    `web_fetch_tool_result` (the page as a text document, or an error code)."""
    block_id = SERVER_TOOL_ID + call.id.removeprefix("call_")
    use: anthropic.ContentBlock = {
        "type": "server_tool_use",
        "id": block_id,
        "name": call.name,
        "input": call.arguments or {},
    }
    if call.name == SEARCH:
        output = result.output
        content: object = (
            [
                {
                    "type": "web_search_result",
                    "url": hit.url,
                    "title": hit.title,
                    "encrypted_content": "",
                    "page_age": None,
                }
                for hit in output.hits
            ]
            if result.ok and isinstance(output, SearchResults)
            else {"type": "web_search_tool_result_error", "error_code": "unavailable"}
        )
        answer: anthropic.ContentBlock = {
            "type": "web_search_tool_result",
            "tool_use_id": block_id,
            "content": content,
        }
        return [use, answer]
    page = result.output
    if result.ok and isinstance(page, FetchedPage):
        content = {
            "type": "web_fetch_result",
            "url": page.url,
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": page.text},
            },
            "retrieved_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    else:
        refused = "not fetched" in result.error
        code = "url_not_allowed" if refused else "unavailable"
        content = {"type": "web_fetch_tool_result_error", "error_code": code}
    return [use, {"type": "web_fetch_tool_result", "tool_use_id": block_id, "content": content}]


def server_tool_history(block: dict[str, Any]) -> list[str]:
    """An assistant turn's server-tool block as the text the model reads in a later request:
    the call as a one-line note, search results as their titles and addresses, a fetched
    page as its text. Malformed parts are skipped: these blocks are history, nothing runs."""
    kind = block.get("type")
    if kind == "server_tool_use":
        name = block.get("name")
        arguments = block.get("input")
        shown = (
            ", ".join(f"{k}={v!r}" for k, v in arguments.items())
            if isinstance(arguments, dict)
            else ""
        )
        return [f"[{name}({shown})]"]
    content = block.get("content")
    if kind == "web_search_tool_result":
        if isinstance(content, list):
            lines = [
                f"- {r.get('title') or r.get('url')}: {r.get('url')}"
                for r in content
                if isinstance(r, dict) and isinstance(r.get("url"), str)
            ]
            return ["[web search results]\n" + "\n".join(lines)] if lines else []
        if isinstance(content, dict) and content.get("error_code"):
            return [f"[web search failed: {content.get('error_code')}]"]
        return []
    if kind == "web_fetch_tool_result" and isinstance(content, dict):
        if content.get("error_code"):
            return [f"[web fetch failed: {content.get('error_code')}]"]
        document = content.get("content")
        source = document.get("source") if isinstance(document, dict) else None
        data = source.get("data") if isinstance(source, dict) else None
        if isinstance(data, str):
            return [f"[fetched {content.get('url')}]\n{data}"]
    return []
