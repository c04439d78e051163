"""Anthropic's `web_search` / `web_fetch` server tools on the Messages door: the blocks toolwire
answers with (`server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`) and what
the model reads of them when a client sends them back in history."""

from __future__ import annotations

from typing import Any


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
