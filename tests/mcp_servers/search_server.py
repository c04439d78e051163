"""A tiny search backend for the tests: MCP tools `search(query)` and `fetch(url)`, over stdio,
answering from a fixed list of pages (no network). toolwire serves requests' `web_search`
(and Anthropic's `web_fetch`) tools with them.

python tests/mcp_servers/search_server.py
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("toolwire-test-search")

PAGES = {
    "toolwire": ("https://toolwire.example/docs", "toolwire is an agent gateway."),
    "weather": ("https://weather.example/today", "Sunny, 21 degrees."),
}


@server.tool()
def search(query: str) -> str:
    """Search the web and return the matching pages, one per line."""
    hits = [
        f"{title} <{url}>: {text}" for title, (url, text) in PAGES.items() if title in query.lower()
    ]
    return "\n".join(hits) or f"no results for {query!r}"


#: What `fetch` serves: a public address written as an IP literal (checked, never resolved).
FETCHED = {"https://93.184.215.14/report": "Report: revenue grew 12% in Q3."}


@server.tool()
def fetch(url: str) -> str:
    """Fetch a page and return its text."""
    return FETCHED.get(url, f"no page at {url}")


if __name__ == "__main__":
    server.run("stdio")
