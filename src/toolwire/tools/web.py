"""Web search and fetch as server-side tools, served by MCP tools the operator configures
(`web_search` and `web_fetch` in toolwire's config): Anthropic's `web_search_*` /
`web_fetch_*` server tools on the Messages door run these inside the loop.

Without a configured backend the tool is still offered, and a call of it is an error result the
model reads and can act on ("web search is not configured on this gateway …"), never a failed
request. A fetch's address goes through the same checks as a request's MCP `server_url`
(`net/addresses.py`): loopback, private, link-local (cloud metadata) and other non-public
addresses are refused unless the operator set `mcp_allow_private_urls`, since the page to fetch
is the model's (and so the caller's) choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from toolwire.net.addresses import RefusedAddress, resolve_checked
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool, McpServerSpec
from toolwire.tools.mcp.toolset import McpTool, approval_rule

SEARCH = "web_search"
FETCH = "web_fetch"


class WebToolUnavailable(Exception):
    """The gateway has no backend for this tool (the message tells the model what to do)."""


@dataclass(slots=True, frozen=True)
class WebBackend:
    """One MCP tool serving web search or fetch: where, which tool, which argument."""

    server: McpServerSpec
    tool: str
    argument: str


@dataclass(slots=True)
class WebTools:
    """What serves `web_search` and `web_fetch` on this gateway (None: not configured)."""

    search: WebBackend | None = None
    fetch: WebBackend | None = None
    pool: McpPool | None = None
    allow_private_urls: bool = False
    timeout: float = 60.0

    def tool(self, name: str) -> Tool:
        return WebSearch(self) if name == SEARCH else WebFetch(self)


@dataclass(slots=True, frozen=True)
class SearchHit:
    url: str
    title: str


@dataclass(slots=True, frozen=True)
class SearchResults:
    query: str
    hits: list[SearchHit]
    text: str


@dataclass(slots=True, frozen=True)
class FetchedPage:
    url: str
    text: str


@dataclass(slots=True, frozen=True)
class _Call:
    backend: WebBackend
    value: str
    tools: WebTools = field(compare=False)

    async def run(self) -> str:
        from mcp import types

        assert self.tools.pool is not None
        definition = types.Tool(name=self.backend.tool, input_schema={"type": "object"})
        mcp = McpTool(
            self.backend.server,
            self.tools.pool,
            definition,
            approval_rule("never", "web"),
            timeout=self.tools.timeout,
        )
        arguments = mcp.validate({self.backend.argument: self.value})
        return mcp.render(await mcp.run(arguments))


_LINK = re.compile(r"\[([^\]\n]{1,300})\]\((https?://[^)\s]+)\)")
_URL = re.compile(r"https?://[^\s)\]>\"']+")


def search_hits(text: str) -> list[SearchHit]:
    """The pages a search backend's text names, in order, once each: Markdown links with their
    text as the title, else bare addresses with the words before them on their line."""
    hits: dict[str, SearchHit] = {}
    for match in _LINK.finditer(text):
        hits.setdefault(match.group(2), SearchHit(match.group(2), match.group(1).strip()))
    for line in text.splitlines():
        for match in _URL.finditer(line):
            url = match.group(0).rstrip(".,;:")
            title = line[: match.start()].strip(" -*:|<(\t") or url
            hits.setdefault(url, SearchHit(url, title[:300]))
    return list(hits.values())


class SearchArguments(BaseModel):
    query: str = Field(min_length=1, description="what to search the web for")


class FetchArguments(BaseModel):
    url: str = Field(min_length=1, description="the http(s) address of the page to read")


class WebSearch(Tool):
    name = SEARCH
    description = "Search the web. Returns the pages found: their titles, addresses and text."
    Arguments = SearchArguments

    def __init__(self, tools: WebTools) -> None:
        self.tools = tools

    async def run(self, arguments: BaseModel) -> SearchResults:
        assert isinstance(arguments, SearchArguments)
        backend = self.tools.search
        if backend is None or self.tools.pool is None:
            raise WebToolUnavailable(
                "web search is not configured on this gateway (its operator sets `web_search` "
                "in toolwire's config): answer from what you know, and say that you could not "
                "search the web"
            )
        text = await _Call(backend, arguments.query, self.tools).run()
        return SearchResults(arguments.query, search_hits(text), text)

    def render(self, output: Any) -> str:
        return output.text if isinstance(output, SearchResults) else str(output)


class WebFetch(Tool):
    name = FETCH
    description = "Fetch a web page by its address and read its text."
    Arguments = FetchArguments

    def __init__(self, tools: WebTools) -> None:
        self.tools = tools

    async def run(self, arguments: BaseModel) -> FetchedPage:
        assert isinstance(arguments, FetchArguments)
        backend = self.tools.fetch
        if backend is None or self.tools.pool is None:
            raise WebToolUnavailable(
                "fetching web pages is not configured on this gateway (its operator sets "
                "`web_fetch` in toolwire's config): answer from what you know, and say that "
                "you could not read the page"
            )
        url = arguments.url.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WebToolUnavailable(f"{url!r} is not an http(s) address: give a full URL")
        if not self.tools.allow_private_urls:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                await resolve_checked(
                    parts.hostname,
                    port,
                    what="fetched pages",
                    remedy="The operator can allow private addresses with mcp_allow_private_urls",
                )
            except RefusedAddress as exc:
                raise WebToolUnavailable(f"not fetched: {exc}") from None
        text = await _Call(backend, url, self.tools).run()
        return FetchedPage(url, text)

    def render(self, output: Any) -> str:
        return output.text if isinstance(output, FetchedPage) else str(output)
