"""`web_search` served by the search backend the operator configures: a real MCP server (over
stdio, started by `toolwire serve` from its config) behind a real `toolwire serve`, the official
client, a scripted model. Its calls are `web_search_call` items in the shape and with the events
OpenAI's OpenAPI document specifies; without a backend the tool is not offered, and says so."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.inprocess_gateway import sse_events
from tests.integration.conftest import Gateway, running_gateway, search_backend_config
from toolwire.testing import Reply

DOCUMENT = Path(__file__).parents[1] / "data" / "openai-openapi-toolwire.json.gz"
WEB_SEARCH = {"type": "web_search", "external_web_access": False}


@pytest.fixture(scope="module")
def search_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("search")
    config = search_backend_config(root)
    with running_gateway(root / "toolwire.db", ("--config", str(config))) as gateway:
        yield gateway


@pytest.fixture
def sg(search_gateway: Gateway) -> Gateway:
    search_gateway.reset()
    return search_gateway


def openai_schema(name: str) -> dict[str, Any]:
    """A schema of OpenAI's OpenAPI document (its `$ref`s resolved within the document)."""
    document = json.loads(gzip.decompress(DOCUMENT.read_bytes()))
    return {"$ref": f"#/components/schemas/{name}", "components": document["components"]}


def test_a_search_runs_on_the_backend_and_is_a_web_search_call(sg: Gateway) -> None:
    sg.upstream.add(
        Reply(tool_calls=[("search", {"query": "toolwire gateway"})]),
        Reply(text="toolwire is an agent gateway."),
    )
    raw = sg.client.responses.with_raw_response.create(
        model="m",
        input="what is toolwire?",
        tools=[WEB_SEARCH],
        include=["web_search_call.action.sources"],
    )
    assert "x-toolwire-tools-not-offered" not in raw.headers
    body = raw.http_response.json()
    # the client declared web_search, not an MCP server: no mcp_list_tools, no mcp_call
    assert [item["type"] for item in body["output"]] == ["web_search_call", "message"]
    call = body["output"][0]
    jsonschema.validate(call, openai_schema("WebSearchToolCall"))
    assert call["status"] == "completed" and call["id"].startswith("ws_")
    assert call["action"]["type"] == "search"
    assert call["action"]["query"] == "toolwire gateway"
    assert call["action"]["queries"] == ["toolwire gateway"]
    # asked for with `include`: the addresses the backend's result names
    assert call["action"]["sources"] == [{"type": "url", "url": "https://toolwire.example/docs"}]
    # the model was offered the backend's tool, and its next turn read what the backend found
    first, second = (request.body for request in sg.upstream.chat_requests)
    assert [t["function"]["name"] for t in first["tools"]].count("search") == 1
    (result,) = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert "https://toolwire.example/docs" in result
    assert raw.parse().output_text == "toolwire is an agent gateway."


def test_streamed_search_emits_openai_web_search_events(sg: Gateway) -> None:
    sg.upstream.add(
        Reply(tool_calls=[("search", {"query": "weather today"})]), Reply(text="Sunny.")
    )
    raw = sg.client.responses.with_raw_response.create(
        model="m", input="weather?", tools=[WEB_SEARCH], stream=True
    )
    events = sse_events(raw.http_response.read())
    kinds = [e["type"] for e in events]
    search = [e for e in events if e["type"].startswith("response.web_search_call.")]
    assert [e["type"] for e in search] == [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    for event, schema in zip(search, ("InProgress", "Searching", "Completed"), strict=True):
        jsonschema.validate(event, openai_schema(f"ResponseWebSearchCall{schema}Event"))
    item_id = search[0]["item_id"]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert added[0]["item"]["id"] == item_id and added[0]["item"]["status"] == "in_progress"
    assert done[0]["item"]["status"] == "completed"
    assert "weather.example" in json.dumps(sg.upstream.chat_requests[1].body["messages"])
    assert not any(kind.startswith("response.mcp_") for kind in kinds)
    final = events[-1]["response"]["output"][0]
    assert final["type"] == "web_search_call" and "sources" not in final["action"]  # not asked


def test_an_answer_naming_a_found_page_cites_it(sg: Gateway) -> None:
    answer = (
        "Read https://toolwire.example/docs, or [the docs](https://toolwire.example/docs); "
        "not https://elsewhere.example/."
    )
    sg.upstream.add(Reply(tool_calls=[("search", {"query": "toolwire"})]), Reply(text=answer))
    raw = sg.client.responses.with_raw_response.create(
        model="m", input="what is toolwire?", tools=[WEB_SEARCH], stream=True
    )
    events = sse_events(raw.http_response.read())
    message = events[-1]["response"]["output"][-1]
    annotations = message["content"][0]["annotations"]
    url = "https://toolwire.example/docs"
    bare = answer.index(url)
    link = answer.index("[the docs]")
    assert annotations == [
        {
            "type": "url_citation",
            "start_index": bare,
            "end_index": bare + len(url),
            "url": url,
            "title": "toolwire",  # the words before the address in the search's result
        },
        {
            "type": "url_citation",
            "start_index": link,
            "end_index": answer.index(");") + 1,
            "url": url,
            "title": "toolwire",  # the page's title, not the link's words
        },
    ]
    for annotation in annotations:
        jsonschema.validate(annotation, openai_schema("UrlCitationBody"))
    added = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"] for e in added] == annotations
    for event in added:
        jsonschema.validate(event, openai_schema("ResponseOutputTextAnnotationAddedEvent"))


def test_tool_choice_web_search_forces_the_backend(sg: Gateway) -> None:
    sg.upstream.add(Reply(tool_calls=[("search", {"query": "weather"})]), Reply(text="ok"))
    sg.client.responses.create(
        model="m", input="x", tools=[WEB_SEARCH], tool_choice={"type": "web_search"}
    )
    sent = sg.upstream.chat_requests[0].body["tool_choice"]
    assert sent == {"type": "function", "function": {"name": "search"}}


def test_without_a_backend_web_search_is_not_offered_and_says_so(gw: Gateway) -> None:
    gw.upstream.add(Reply(text="I cannot search."))
    raw = gw.client.responses.with_raw_response.create(model="m", input="x", tools=[WEB_SEARCH])
    assert raw.headers["x-toolwire-tools-not-offered"] == "web_search"
    response = raw.parse()
    assert response.output_text == "I cannot search."
    assert [tool.type for tool in response.tools] == ["web_search"]  # echoed as declared
    offered = [t["function"]["name"] for t in gw.upstream.chat_requests[0].body["tools"]]
    assert "search" not in offered and "web_search" not in offered


# -- Anthropic's web_search / web_fetch server tools on /v1/messages ----------------------------

WEB_TOOLS = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 3},
]


def anthropic_client(gateway: Gateway) -> Any:
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(
        base_url=gateway.base_url.removesuffix("/v1"), api_key="sk-unused", max_retries=0
    )


def test_anthropic_web_search_runs_on_the_backend_as_server_tool_blocks(sg: Gateway) -> None:
    sg.upstream.add(
        Reply(tool_calls=[("web_search", {"query": "toolwire gateway"})]),
        Reply(text="toolwire is an agent gateway."),
    )
    message = anthropic_client(sg).messages.create(
        model="m",
        max_tokens=200,
        tools=WEB_TOOLS,
        messages=[{"role": "user", "content": "what is toolwire?"}],
    )
    kinds = [block.type for block in message.content]
    assert kinds == ["server_tool_use", "web_search_tool_result", "text"]
    use, result, text = message.content
    assert use.name == "web_search" and use.input == {"query": "toolwire gateway"}
    assert result.tool_use_id == use.id and use.id.startswith("srvtoolu_")
    assert [(r.url, r.title) for r in result.content] == [
        ("https://toolwire.example/docs", "toolwire")
    ]
    assert message.stop_reason == "end_turn" and text.text == "toolwire is an agent gateway."
    # the model read the backend's answer as the tool's result
    second = sg.upstream.chat_requests[-1].body
    (tool_message,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "toolwire is an agent gateway." in tool_message["content"]


def test_anthropic_web_fetch_reads_a_page_and_refuses_private_addresses(sg: Gateway) -> None:
    sg.upstream.add(
        Reply(
            tool_calls=[
                ("web_fetch", {"url": "https://93.184.215.14/report"}),
                ("web_fetch", {"url": "http://169.254.169.254/latest/meta-data"}),
            ]
        ),
        Reply(text="Revenue grew 12%."),
    )
    with anthropic_client(sg).messages.stream(
        model="m",
        max_tokens=200,
        tools=WEB_TOOLS,
        messages=[{"role": "user", "content": "read the report"}],
    ) as stream:
        message = stream.get_final_message()
    results = [block for block in message.content if block.type == "web_fetch_tool_result"]
    fetched, refused = results
    assert fetched.content.type == "web_fetch_result"
    assert fetched.content.content.source.data == "Report: revenue grew 12% in Q3."
    assert refused.content.type == "web_fetch_tool_result_error"
    assert refused.content.error_code == "url_not_allowed"
    second = sg.upstream.chat_requests[-1].body
    outputs = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert "revenue grew 12%" in outputs[0]
    assert "link-local" in outputs[1]  # the model reads why, and can act on it
