"""The entries of a run that hands a call back (`observe/timeline.py`): their fields and field
order are what `/ui` and the stored JSON had when every entry went through `_add`."""

from __future__ import annotations

from tests.inprocess_gateway import AppGateway
from toolwire.testing import Reply

STOCK_TOOL = {
    "type": "function",
    "name": "lookup_stock",
    "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}},
}


async def test_a_returned_call_s_timeline_keeps_its_fields_in_order(gw: AppGateway) -> None:
    gw.upstream.add(Reply(tool_calls=[("lookup_stock", {"sku": "A-1"})]))
    answer = await gw.client.responses.create(model="m", input="Stock?", tools=[STOCK_TOOL])
    entries = await gw.store.ui.timeline(answer.id)
    model_call = "type t iteration tools_offered ttft duration input_tokens output_tokens"
    assert [list(entry) for entry in entries] == [
        ["type", "t", "at", "model"],
        [*model_call.split(), "finish_reason", "text", "calls"],
        ["type", "t", "calls"],
        ["type", "t", "reason", "status", "message", "code", "input_tokens", "output_tokens"],
    ]
    call_id = entries[1]["calls"][0]["call_id"]
    assert entries[1]["calls"] == [{"name": "lookup_stock", "call_id": call_id, "target": "caller"}]
    assert entries[2]["calls"] == [
        {"name": "lookup_stock", "call_id": call_id, "arguments": '{"sku":"A-1"}'}
    ]
    assert entries[3]["reason"] == "tool_calls" and entries[3]["status"] == "completed"
    assert type(entries[3]["reason"]) is str and entries[3]["code"] is None
