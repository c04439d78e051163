"""Live streams through `/v1/responses` with the official client: text reaches the client
piece by piece as the upstream writes it; so do the arguments of a `strict` tool's call when
the upstream enforces `strict` (this module's upstream says it is vLLM 0.27), and `.done`
carries the final, repaired arguments. Any other call is judged against its tool's schema
first and reaches the client whole (docs/tool-calls.md). Liveness is asserted by structure
(each delta whole upstream pieces, in order; pieces that arrive in separate network reads leave
as separate deltas: the upstream here waits a little between them), not by timing;
`benchmarks/live_stream.py` measures the timing. Pieces that arrive in one read leave as one
delta (`upstream/events.py`'s `coalesce`)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.integration.conftest import Gateway
from tests.integration.test_responses_api import check_lifecycle
from toolwire.testing import Chunks, Reply

STOCK_TOOL = {
    "type": "function",
    "name": "lookup_stock",
    "description": "Stock level for a SKU.",
    "parameters": {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "note": {"type": "string"}},
        "required": ["sku"],
    },
}


#: The same tool marked `strict`: its calls stream live on an upstream that enforces it.
STRICT_STOCK_TOOL = {**STOCK_TOOL, "strict": True}


@pytest.fixture(autouse=True)
def enforcing_upstream(gw: Gateway) -> None:
    gw.upstream.version = "0.27.0"  # vLLM's `/version`: it enforces `strict`


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def call_chunks(name: str, pieces: list[str], call_id: str = "call_live") -> list[dict[str, Any]]:
    head = {"index": 0, "id": call_id, "type": "function", "function": {"name": name}}
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]}),
        *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces],
    ]


def split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


#: Seconds the upstream waits before each chunk: enough for each to arrive in a read of its
#: own (pieces of one read are joined into one delta).
APART = 0.002


def whole_pieces(deltas: list[str], pieces: list[str]) -> bool:
    """Each delta is one or more consecutive whole pieces, and together they are all of them,
    in order."""
    at = 0
    for delta in deltas:
        taken = ""
        while len(taken) < len(delta) and at < len(pieces):
            taken += pieces[at]
            at += 1
        if taken != delta:
            return False
    return at == len(pieces)


@pytest.mark.parametrize("strict", [True, False], ids=["enforced_live", "judged_first"])
def test_function_call_arguments_stream_piece_by_piece(gw: Gateway, strict: bool) -> None:
    arguments = orjson.dumps({"sku": "B-2", "note": "restock " * 20}).decode()
    pieces = split(arguments, 7)
    gw.upstream.add(
        Chunks([*call_chunks("lookup_stock", pieces), chunk({}, "tool_calls")], delay=APART)
    )
    tool = STRICT_STOCK_TOOL if strict else STOCK_TOOL
    with gw.client.responses.stream(model="m", input="stock?", tools=[tool]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_lifecycle(events)
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    # live: the pieces as they came (nearly each its own delta), not one lump at the end;
    # judged first: whole, once judged
    if strict:
        assert whole_pieces(deltas, pieces) and len(deltas) >= 0.9 * len(pieces)
    else:
        assert deltas == [arguments]
    offered = gw.upstream.chat_requests[0].body["tools"][-1]["function"]
    assert offered.get("strict") is (True if strict else None)  # asked of it only if strict
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0].arguments == arguments
    kinds = [e.type for e in events]
    added = kinds.index("response.output_item.added")
    assert added < kinds.index("response.function_call_arguments.delta")
    assert [item.type for item in final.output] == ["function_call"]
    assert final.output[0].arguments == arguments and final.output[0].status == "completed"


def test_done_carries_the_repaired_arguments(gw: Gateway) -> None:
    # A final chunk re-sends the whole object after a partial stream (GLM on vLLM does this):
    # the deltas show what the model wrote; `.done` and the stored item carry the repair.
    pieces = ['{"sku": ', '"B-2"']
    chunks = [
        *call_chunks("lookup_stock", pieces),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"sku": "B-2"}'}}]}),
        chunk({}, "tool_calls"),
    ]
    gw.upstream.add(Chunks(chunks))
    events = list(
        gw.client.responses.create(model="m", input="stock?", tools=[STOCK_TOOL], stream=True)
    )
    check_lifecycle(events)
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [orjson.loads(d.arguments) for d in done] == [{"sku": "B-2"}]
    assert orjson.loads(events[-1].response.output[0].arguments) == {"sku": "B-2"}


@pytest.mark.parametrize("strict", [True, False], ids=["enforced_live", "judged_first"])
def test_a_call_found_malformed_is_re_asked(gw: Gateway, strict: bool) -> None:
    gw.upstream.add(
        Chunks([*call_chunks("lookup_stock", ["sku=", "B-2"]), chunk({}, "tool_calls")]),
        Reply(tool_calls=[("lookup_stock", {"sku": "B-2"})]),
    )
    tool = STRICT_STOCK_TOOL if strict else STOCK_TOOL
    events = list(gw.client.responses.create(model="m", input="stock?", tools=[tool], stream=True))
    check_lifecycle(events)
    final = events[-1].response
    calls = [item for item in final.output if item.type == "function_call"]
    # Judged first, the malformed call never shows. Streamed live (an upstream said to enforce
    # the schema, that did not), it stays visible, marked incomplete: never run, never handed
    # back as a call to execute. Either way the model was told and called again.
    assert [c.status for c in calls] == (["incomplete", "completed"] if strict else ["completed"])
    assert orjson.loads(calls[-1].arguments) == {"sku": "B-2"}
    second = gw.upstream.chat_requests[1].body["messages"]
    assert any("could not be used" in str(m.get("content")) for m in second)
    assert final.status == "completed"


def test_server_tool_arguments_come_as_mcp_call_deltas_once_judged(gw: Gateway) -> None:
    arguments = orjson.dumps({"city": "Oslo"}).decode()
    pieces = split(arguments, 3)
    gw.upstream.add(
        Chunks([*call_chunks("get_weather", pieces), chunk({}, "tool_calls")]),
        Reply(text="4 °C."),
    )
    events = list(gw.client.responses.create(model="m", input="Oslo?", stream=True))
    check_lifecycle(events)
    deltas = [e.delta for e in events if e.type == "response.mcp_call_arguments.delta"]
    assert deltas == [arguments]  # checked against the tool's schema first, then whole
    kinds = [e.type for e in events]
    order = [
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ]
    positions = [kinds.index(kind) for kind in order]
    assert positions == sorted(positions)
    item = events[-1].response.output[0]
    assert item.type == "mcp_call" and item.arguments == arguments
    assert item.output == (
        "city: Oslo\ntemperature_c: 4\ntemperature_f: 39\nsky: clear\n"
        "summary: It is 4 °C (39 °F) in Oslo, with clear skies."
    )


@pytest.mark.parametrize("strict", [True, False], ids=["enforced_live", "judged_first"])
def test_an_upstream_dying_mid_call_fails_the_response_and_closes_the_call(
    gw: Gateway, strict: bool
) -> None:
    pieces = ['{"sku"', ': "B']
    gw.upstream.add(Chunks(call_chunks("lookup_stock", pieces), done=False, disconnect_after=4))
    tool = STRICT_STOCK_TOOL if strict else STOCK_TOOL
    events = list(gw.client.responses.create(model="m", input="stock?", tools=[tool], stream=True))
    check_lifecycle(events)
    assert events[-1].type == "response.failed"
    stored = gw.client.responses.retrieve(events[-1].response.id)
    assert stored.status == "failed"
    # a call streaming live when the upstream died is closed incomplete; one held to be judged
    # never showed at all
    shown = [("function_call", "incomplete")] if strict else []
    assert [(i.type, i.status) for i in stored.output] == shown


def test_a_continuation_skips_the_incomplete_call(gw: Gateway) -> None:
    gw.upstream.add(
        Chunks([*call_chunks("lookup_stock", ["sku=", "B-2"]), chunk({}, "tool_calls")]),
        Reply(tool_calls=[("lookup_stock", {"sku": "B-2"})], usage=None),
    )
    first = gw.client.responses.create(model="m", input="stock?", tools=[STOCK_TOOL])
    call = next(i for i in first.output if i.type == "function_call" and i.status == "completed")
    gw.upstream.add(Reply(text="12 in stock."))
    second = gw.client.responses.create(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "12"}],
        tools=[STOCK_TOOL],
    )
    assert second.output_text == "12 in stock."
    messages = gw.upstream.chat_requests[-1].body["messages"]
    called = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert called == answered == [call.call_id]  # no call left without its result


ANSWER = """Here is the fix:

```python
def area(r: float) -> float:
    return 3.14159 * r ** 2
```

- [ ] run the tests
- [x] read [the docs](https://example.com/docs)

Config as JSON: {"retries": 3, "timeout": 2.5}. <b>Done</b>, [1] and `x < y`.
"""


def text_chunks(pieces: list[str]) -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": ""}),
        *[chunk({"content": p}) for p in pieces],
        chunk({}, "stop"),
    ]


def test_code_and_markdown_stream_piece_by_piece(gw: Gateway) -> None:
    pieces = split(ANSWER, 4)
    gw.upstream.add(Chunks(text_chunks(pieces), delay=APART))
    events = list(gw.client.responses.create(model="m", input="fix?", stream=True))
    check_lifecycle(events)
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == ANSWER
    # Live: nearly every upstream piece leaves as its own delta, not one lump at a bracket.
    assert len(deltas) >= 0.9 * len(pieces)
    assert events[-1].response.output_text == ANSWER


def test_a_leaked_call_never_leaves_and_the_retry_is_answered(gw: Gateway) -> None:
    leak = '<tool_call>{"name": "lookup_stock", "arguments": {"sku": "B-2"}}</tool_call>'
    gw.upstream.add(
        Chunks(text_chunks(split("Let me check. " + leak, 3))),
        Reply(tool_calls=[("lookup_stock", {"sku": "B-2"})]),
    )
    events = list(
        gw.client.responses.create(model="m", input="stock?", tools=[STOCK_TOOL], stream=True)
    )
    check_lifecycle(events)
    shown = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert shown == "Let me check. "
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert final.output_text == "Let me check. " and "tool_call" not in str(final.output)
    retry = gw.upstream.chat_requests[1].body["messages"]
    assert "plain text" in retry[-1]["content"]  # the model was told, once
