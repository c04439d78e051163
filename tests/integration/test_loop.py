"""The agent loop through the real HTTP path: ScriptedUpstream plays the model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolwire import Agent, LoopSettings, tool
from toolwire.loop.events import (
    LeakDetected,
    LoopFinished,
    OutputTextDelta,
    ToolExecutionFinished,
)
from toolwire.testing import Chunks, Reply, ScriptedUpstream
from toolwire.testing.script import WEATHER_DEMO

ran: list[tuple[str, dict[str, Any]]] = []


@tool
def get_weather(city: str) -> dict[str, object]:
    """Weather for a city."""
    ran.append(("get_weather", {"city": city}))
    return {"city": city, "temperature_c": 18}


@tool
def convert_temperature(celsius: float) -> str:
    """Celsius to Fahrenheit."""
    ran.append(("convert_temperature", {"celsius": celsius}))
    return f"{celsius * 9 / 5 + 32:g} °F"


@tool
def flaky(path: str) -> str:
    """Always fails."""
    raise FileNotFoundError(f"no such file: {path}")


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


def tool_messages(upstream: ScriptedUpstream, request: int) -> list[dict[str, Any]]:
    return [m for m in upstream.chat_requests[request].body["messages"] if m["role"] == "tool"]


def agent(upstream: ScriptedUpstream, **settings: Any) -> Agent:
    return Agent(
        upstream.base_url,
        "scripted-model",
        [get_weather, convert_temperature, flaky],
        settings=LoopSettings(**settings),
    )


async def test_multi_step_loop_runs_tools_and_answers(scripted: ScriptedUpstream) -> None:
    scripted.add(*WEATHER_DEMO())
    result = await agent(scripted).run("Paris or Oslo?")
    assert result.status == "completed"
    assert result.text.startswith("Paris is warmer")
    assert ran == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
        ("convert_temperature", {"celsius": 18.0}),
    ]
    assert len(scripted.chat_requests) == 3
    first_results = tool_messages(scripted, 1)
    assert [m["tool_call_id"] for m in first_results] == [
        "call_0_get_weather",
        "call_1_get_weather",
    ]
    assert first_results[0]["content"] == (
        "status:\nsuccess\n\ntoolName:\nget_weather\n\nerror:\n\n\n"
        "output:\ncity: Paris\ntemperature_c: 18"
    )
    assert result.usage.input_tokens == 30
    assert isinstance(result.events[-1], LoopFinished)


async def test_parallel_calls_run_concurrently_and_results_keep_call_order(
    scripted: ScriptedUpstream,
) -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Waits until both calls have started: deadlocks if calls ran one after the other."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)
        await asyncio.sleep(0.05 if name == "first" else 0)
        return f"done {name}"

    scripted.add(Reply(tool_calls=[("slow", {"name": "first"}), ("slow", {"name": "second"})]))
    scripted.add(Reply(text="both done"))
    result = await Agent(scripted.base_url, "m", [slow]).run("go")
    assert result.status == "completed"
    contents = [m["content"] for m in tool_messages(scripted, 1)]
    assert contents[0].endswith("output:\ndone first")
    assert contents[1].endswith("output:\ndone second")


async def test_malformed_arguments_are_reported_and_corrected_next_turn(
    scripted: ScriptedUpstream,
) -> None:
    head = {"index": 0, "id": "call_bad", "type": "function"}
    broken = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                **head,
                                "function": {"name": "get_weather", "arguments": '{"city": "Par'},
                            }
                        ]
                    },
                    "finish_reason": None,
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    scripted.add(
        Chunks(broken), Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="18 °C")
    )
    result = await agent(scripted).run("weather in Paris?")
    assert result.status == "completed"
    assert ran == [("get_weather", {"city": "Paris"})]  # never ran with {} or half an argument
    error = tool_messages(scripted, 1)[0]["content"]
    assert error.startswith("status:\nerror\n\ntoolName:\nget_weather\n\nerror:\n")
    assert "incomplete JSON" in error and '{"city": "Par' in error
    echoed = scripted.chat_requests[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert echoed == "{}"  # malformed text is not echoed as if it were valid JSON


async def test_unknown_tool_and_invalid_arguments_become_error_results(
    scripted: ScriptedUpstream,
) -> None:
    scripted.add(
        Reply(tool_calls=[("get_wether", {"city": "Paris"}), ("get_weather", {"town": "Paris"})]),
        Reply(text="sorry"),
    )
    result = await agent(scripted).run("weather?")
    assert result.status == "completed"
    assert ran == []
    unknown, invalid = (m["content"] for m in tool_messages(scripted, 1))
    assert "unknown tool 'get_wether'" in unknown and "get_weather" in unknown
    assert "invalid arguments for get_weather" in invalid
    assert "city: Field required" in invalid and '"required":["city"]' in invalid


async def test_tool_timeout_is_an_error_result(scripted: ScriptedUpstream) -> None:
    @tool(timeout=0.1)
    async def sleepy() -> str:
        """Never finishes in time."""
        await asyncio.sleep(10)
        return "late"

    scripted.add(Reply(tool_calls=[("sleepy", {})]), Reply(text="gave up"))
    result = await Agent(scripted.base_url, "m", [sleepy]).run("go")
    assert result.status == "completed"
    assert "sleepy timed out after 0.1 seconds" in tool_messages(scripted, 1)[0]["content"]


async def test_max_tool_calls_is_a_soft_stop(scripted: ScriptedUpstream) -> None:
    scripted.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]),
        Reply(text="Paris is 18 °C; I could not check Oslo."),
    )
    result = await agent(scripted, max_tool_calls=1).run("both cities?")
    assert result.status == "completed"
    assert result.text.startswith("Paris is 18")
    assert ran == [("get_weather", {"city": "Paris"})]
    refused = tool_messages(scripted, 1)[1]["content"]
    assert "not executed" in refused and "max_tool_calls" in refused
    assert "tools" not in scripted.chat_requests[1].body  # the last call is offered no tools


async def test_iteration_cap_ends_incomplete(scripted: ScriptedUpstream) -> None:
    scripted.add(*[Reply(tool_calls=[("get_weather", {"city": f"c{i}"})]) for i in range(5)])
    result = await agent(scripted, max_iterations=3).run("loop forever")
    assert result.status == "incomplete"
    assert result.reason == "max_iterations"
    assert result.message is not None and "cap of 3 model calls" in result.message
    assert len(scripted.chat_requests) == 3


async def test_the_same_failing_call_three_times_stops_the_loop(scripted: ScriptedUpstream) -> None:
    scripted.add(*[Reply(tool_calls=[("flaky", {"path": "a.txt"})]) for _ in range(5)])
    result = await agent(scripted).run("read a.txt")
    assert result.status == "incomplete"
    assert result.reason == "repeated_failure"
    assert result.message is not None
    assert "FileNotFoundError: no such file: a.txt" in result.message
    assert len(scripted.chat_requests) == 3


LEAKED = 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


async def test_leaked_call_is_retried_and_the_retry_succeeds(scripted: ScriptedUpstream) -> None:
    scripted.add(
        Reply(text=LEAKED),
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(text="18 °C in Paris."),
    )
    result = await agent(scripted).run("weather in Paris?")
    assert result.status == "completed"
    assert ran == [("get_weather", {"city": "Paris"})]
    leaks = [e for e in result.events if isinstance(e, LeakDetected)]
    assert leaks[0].action == "retry"
    retry_messages = scripted.chat_requests[1].body["messages"]
    assert not any("<tool_call>" in str(m.get("content")) for m in retry_messages)
    assert retry_messages[-1]["role"] == "user" and "plain text" in retry_messages[-1]["content"]
    shown = "".join(e.text for e in result.events if isinstance(e, OutputTextDelta))
    assert "<tool_call>" not in shown and shown.startswith("I will check.")


async def test_leak_retries_are_capped_with_a_visible_reason(scripted: ScriptedUpstream) -> None:
    scripted.add(*[Reply(text=LEAKED) for _ in range(3)])
    result = await agent(scripted).run("weather in Paris?")
    assert result.status == "incomplete"
    assert result.reason == "leaked_tool_call"
    assert result.message is not None and "tool-call parser" in result.message
    assert ran == []
    assert len(scripted.chat_requests) == 3  # the first try and two retries


async def test_salvage_runs_a_well_formed_leaked_call(scripted: ScriptedUpstream) -> None:
    scripted.add(Reply(text=LEAKED), Reply(text="18 °C in Paris."))
    result = await agent(scripted, leak_mode="salvage").run("weather in Paris?")
    assert result.status == "completed"
    assert ran == [("get_weather", {"city": "Paris"})]
    assert len(scripted.chat_requests) == 2
    assert [e.action for e in result.events if isinstance(e, LeakDetected)] == ["salvaged"]


async def test_salvage_refuses_an_undeclared_tool_and_retries(scripted: ScriptedUpstream) -> None:
    bad = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'
    scripted.add(Reply(text=bad), Reply(text="I cannot do that."))
    result = await agent(scripted, leak_mode="salvage").run("clean up")
    assert result.status == "completed"
    assert [e.action for e in result.events if isinstance(e, LeakDetected)] == ["retry"]
    assert len(scripted.chat_requests) == 2


async def test_prose_mentioning_tool_syntax_is_not_a_leak(scripted: ScriptedUpstream) -> None:
    prose = "Models such as Hermes write `<tool_call>` tags; the server parses them. That's all."
    scripted.add(Reply(text=prose))
    result = await agent(scripted).run("how do tool calls work?")
    assert result.status == "completed" and result.text == prose
    assert not [e for e in result.events if isinstance(e, LeakDetected)]


async def test_file_with_a_regex_reaches_the_model_with_one_backslash(
    scripted: ScriptedUpstream, tmp_path: Path
) -> None:
    source = tmp_path / "find.ts"
    source.write_text('const pattern = /\\.ts$/;\nconst s = "tab\\there";\n', encoding="utf-8")

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return Path(path).read_text(encoding="utf-8")

    scripted.add(Reply(tool_calls=[("read_file", {"path": str(source)})]), Reply(text="ok"))
    await Agent(scripted.base_url, "m", [read_file]).run("read it")
    content = tool_messages(scripted, 1)[0]["content"]  # the JSON-decoded request body
    assert "/\\.ts$/" in content and "\\\\.ts$" not in content
    assert '"tab\\there"' in content


async def test_assistant_argument_strings_go_back_unchanged(scripted: ScriptedUpstream) -> None:
    scripted.add(Reply(tool_calls=[("get_weather", '{ "city" :  "Paris" }')]), Reply(text="ok"))
    await agent(scripted).run("weather?")
    echoed = scripted.chat_requests[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert echoed == '{ "city" :  "Paris" }'


async def test_stream_yields_events_live_and_ends_with_loop_finished(
    scripted: ScriptedUpstream,
) -> None:
    scripted.add(*WEATHER_DEMO())
    kinds = [type(e).__name__ async for e in agent(scripted).stream("Paris or Oslo?")]
    assert kinds[:2] == ["RunStarted", "ModelCallStarted"] and kinds[-1] == "LoopFinished"
    assert kinds.count("ToolExecutionFinished") == 3


async def test_upstream_failure_ends_the_run_failed(scripted: ScriptedUpstream) -> None:
    from toolwire.testing import Body

    scripted.add(Body({"error": {"message": "no such model"}}, status=404))
    result = await agent(scripted).run("hi")
    assert result.status == "failed"
    assert result.reason == "upstream_error"
    assert result.message is not None and "no such model" in result.message
    assert not [e for e in result.events if isinstance(e, ToolExecutionFinished)]


async def test_an_adapter_bug_ends_the_run_failed_not_crashed() -> None:
    class BrokenUpstream:
        name = "broken"

        async def stream_turn(self, request: object) -> Any:
            raise RuntimeError("boom")
            yield  # pragma: no cover - makes this an async generator

        async def list_models(self) -> list[dict[str, Any]]:
            return []

        async def aclose(self) -> None:
            return None

    result = await Agent(BrokenUpstream(), "m", [get_weather]).run("hi")
    assert result.status == "failed"
    assert result.reason == "upstream_error"
    assert result.message == "the upstream adapter failed: RuntimeError: boom"
    assert isinstance(result.events[-1], LoopFinished)
