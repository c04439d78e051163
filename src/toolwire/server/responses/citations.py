"""`url_citation` annotations: where an answer names a page that a `web_search` of the same
response returned, its `output_text` part cites it, as OpenAI's answers cite their searches.

The search backend is any MCP tool, so its result is text: the addresses are read from it
(`urls`), each with a title when the text gives one next to it (a Markdown link's text, or
the words before the address on its line), else the address itself.
"""

from __future__ import annotations

import re

from toolwire.wire.items import Annotation

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_MARKDOWN_LINK = re.compile(r"\[([^\]\n]{1,300})\]\((https?://[^\s)]+)\)")
_TITLE_EDGE = " \t-–—:|•*#>([<"


def urls(text: str) -> list[str]:
    """The web addresses a text names, in order, once each."""
    return list(dict.fromkeys(url.rstrip(".,;:") for url in _URL.findall(text)))


def sources(result: str) -> dict[str, str]:
    """url -> title, for each address a search result names."""
    found: dict[str, str] = {}
    for title, url in _MARKDOWN_LINK.findall(result):
        found.setdefault(url.rstrip(".,;:"), title.strip())
    for line in result.splitlines():
        for match in _URL.finditer(line):
            url = match.group().rstrip(".,;:")
            if url in found:
                continue
            before = line[: match.start()].strip(_TITLE_EDGE).strip()
            found[url] = before[-300:] if before else url
    return found


def url_citations(text: str, known: dict[str, str]) -> list[Annotation]:
    """A `url_citation` for each place `text` names one of the `known` pages: the span of a
    Markdown link to it, or of the bare address."""
    if not known:
        return []
    citations: list[Annotation] = []
    covered: list[tuple[int, int]] = []
    for match in _MARKDOWN_LINK.finditer(text):
        url = match.group(2).rstrip(".,;:")
        if url in known:
            covered.append(match.span())
            citations.append(_citation(url, known[url], *match.span()))
    for match in _URL.finditer(text):
        url = match.group().rstrip(".,;:")
        start = match.start()
        inside = any(a <= start < b for a, b in covered)
        if url in known and not inside:
            citations.append(_citation(url, known[url], start, start + len(url)))
    return sorted(citations, key=lambda c: int(c["start_index"]))


def _citation(url: str, title: str, start: int, end: int) -> Annotation:
    return {
        "type": "url_citation",
        "start_index": start,
        "end_index": end,
        "url": url,
        "title": title,
    }
