"""The chat door's single-turn fast path (`loop/quick.py`) and its hand-over to the driver.

A non-streaming chat request whose one model turn needs nothing from the driver is answered
without it; the moment the turn needs repair (a malformed call, a call of an undeclared tool, a
leaked call, an upstream failure) the driver takes over with the turn already received: the
agent gets what the driver alone would have given it, and the upstream is not asked twice for
the same turn. Observers (the Prometheus metrics) see one model call and one run either way.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from prometheus_client import REGISTRY

from tests.inprocess_gateway import AppGateway
from tests.integration.test_chat_proxy import LEAK, WEATHER
from toolwire.loop.driver import LoopDriver
from toolwire.loop.events import LoopEvent, LoopFinished
from toolwire.loop.quick import eligible, run_single_turn
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.observe.setup import Observability
from toolwire.testing import Body, Reply, ScriptedUpstream
from toolwire.transcript import ToolSpec, UserMessage

USER = [{"role": "user", "content": "Oslo?"}]


def _whole(message: dict[str, Any], finish: str = "tool_calls") -> Body:
    return Body(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    )


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


async def test_a_malformed_call_is_handed_over_and_re_asked(gw: AppGateway) -> None:
    gw.upstream.add(
        _whole(_call("get_weather", '{"city": "Os')),
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
    )
    completion = await gw.client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    calls = completion.choices[0].message.tool_calls
    assert calls is not None and [c.function.arguments for c in calls] == ['{"city":"Oslo"}']  # type: ignore[union-attr]
    requests = gw.upstream.chat_requests
    assert len(requests) == 2, "the first turn is replayed to the driver, not asked again"
    told = requests[1].body["messages"][-1]
    assert told["role"] == "tool" and "incomplete JSON" in told["content"]


async def test_a_call_of_an_undeclared_tool_is_handed_over(gw: AppGateway) -> None:
    gw.upstream.add(
        _whole(_call("launch_rockets", "{}")),
        Reply(text="I cannot do that; it is sunny in Oslo."),
    )
    completion = await gw.client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    choice = completion.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert choice.message.content == "I cannot do that; it is sunny in Oslo."
    assert len(gw.upstream.chat_requests) == 2


async def test_a_leaked_call_is_handed_over_and_retried(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text=LEAK), Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    completion = await gw.client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and "<tool_call>" not in (
        choice.message.content or ""
    )
    assert len(gw.upstream.chat_requests) == 2


async def test_an_upstream_error_is_decided_by_the_driver(gw: AppGateway) -> None:
    bad = {"error": {"message": "no such model", "type": "invalid_request_error"}}
    gw.upstream.add(Body(bad, status=404))
    with pytest.raises(openai.APIStatusError) as info:
        await gw.client.chat.completions.create(model="m", messages=USER, tools=WEATHER)
    assert info.value.status_code == 404, "the upstream's status, as the driver maps it"
    assert "no such model" in info.value.message
    assert len(gw.upstream.chat_requests) == 1


def _count(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("repair", [False, True])
async def test_observers_see_one_model_call_and_one_run(repair: bool) -> None:
    """Metrics come out the same on the fast path and after a hand-over: one upstream call per
    model turn, one finished run, the tokens of every turn."""
    spec = ToolSpec("get_weather", "", {"type": "object", "properties": {}})
    turns: list[Any] = [Reply(tool_calls=[("get_weather", {"city": "Oslo"})])]
    if repair:
        turns.insert(0, Reply(text=LEAK))
    upstream = ScriptedUpstream.in_process(turns)
    adapter = upstream.adapter()
    observability = Observability(upstream_name="fast-path-test")
    driver = LoopDriver(adapter, observe=observability.observe)
    calls = {"upstream": "fast-path-test", "outcome": "ok"}
    before = (
        _count("toolwire_upstream_calls_total", calls),
        _count("toolwire_runs_total", {"reason": "tool_calls"}),
    )
    request = LoopRequest(
        model="m",
        input=[UserMessage("Oslo?")],
        client_tools=[spec],
        settings=LoopSettings(stream=False),
    )
    assert eligible(request)
    seen: list[LoopEvent] = []
    try:
        state = await run_single_turn(driver, request, seen.append)
    finally:
        await adapter.aclose()
    finished = seen[-1]
    assert isinstance(finished, LoopFinished)
    assert [c.name for c in finished.pending_calls] == ["get_weather"]
    assert state.usage.input_tokens > 0
    after = (
        _count("toolwire_upstream_calls_total", calls),
        _count("toolwire_runs_total", {"reason": "tool_calls"}),
    )
    assert after[0] - before[0] == (2 if repair else 1)
    assert after[1] - before[1] == 1


async def test_the_fast_path_is_only_taken_when_nothing_can_need_the_driver() -> None:
    base = LoopRequest(model="m", input=[UserMessage("hi")], settings=LoopSettings(stream=False))
    assert eligible(base)
    assert not eligible(
        LoopRequest(model="m", input=[UserMessage("hi")], settings=LoopSettings(stream=True))
    )
    assert not eligible(
        LoopRequest(
            model="m",
            input=[UserMessage("hi")],
            approvals={"mcpr_1": True},
            settings=LoopSettings(stream=False),
        )
    )
