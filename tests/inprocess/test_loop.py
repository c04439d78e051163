"""The loop driver in process: `Agent` and `LoopDriver` over an in-process ScriptedUpstream.

The loop's scripts, with no socket between the adapter and the
scripted model: the adapter still parses real SSE bytes and real JSON bodies.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolwire import Agent, LoopSettings, tool
from toolwire.errors import StopReason, StoreError
from toolwire.loop.driver import LoopDriver
from toolwire.loop.events import (
    ArgumentsMisfit,
    ArgumentsRepaired,
    CallArgumentsDelta,
    CallStreamStarted,
    CancelCause,
    LeakDetected,
    LoopEvent,
    LoopFinished,
    ModelCallStarted,
    ModelTurnCompleted,
    OutputTextDelta,
    ReasoningTextDelta,
    RunStarted,
    ToolCallsReturned,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from toolwire.loop.state import Cancellation, LoopRequest, RunServices
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream
from toolwire.testing.script import WEATHER_DEMO
from toolwire.transcript import ToolCall, ToolSpec, UserMessage

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


def agent(upstream: ScriptedUpstream, *tools: Any, **settings: Any) -> Agent:
    return Agent(
        upstream.adapter(),
        "scripted-model",
        list(tools) or [get_weather, convert_temperature, flaky],
        settings=LoopSettings(**settings),
    )


def shown_text(events: list[LoopEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, OutputTextDelta))


LEAKED = 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


# -- text and tools --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_plain_text_answer(fake_upstream: ScriptedUpstream, stream: bool) -> None:
    fake_upstream.add(Reply(text="Hello there, how can I help?", reasoning="greet them"))
    result = await agent(fake_upstream, stream=stream).run("hi")
    assert result.status == "completed" and result.reason == "answered"
    assert result.text == "Hello there, how can I help?"
    assert shown_text(result.events) == result.text
    thought = "".join(e.text for e in result.events if isinstance(e, ReasoningTextDelta))
    assert thought == "greet them"
    assert result.usage.total_tokens == 15
    sent = fake_upstream.chat_requests[0].body
    assert sent["stream"] is stream
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "get_weather",
        "convert_temperature",
        "flaky",
    ]


async def test_multi_step_loop_runs_tools_and_answers(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(*WEATHER_DEMO())
    result = await agent(fake_upstream).run("Paris or Oslo?")
    assert result.status == "completed"
    assert result.text.startswith("Paris is warmer")
    assert ran == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
        ("convert_temperature", {"celsius": 18.0}),
    ]
    assert len(fake_upstream.chat_requests) == 3
    first_results = tool_messages(fake_upstream, 1)
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


async def test_a_second_run_continues_the_conversation(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Reply(text="Nice to meet you, Ada."), Reply(text="You are Ada."))
    bot = agent(fake_upstream)
    await bot.run("I am Ada.")
    result = await bot.run("Who am I?")
    assert result.text == "You are Ada."
    messages = fake_upstream.chat_requests[1].body["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "I am Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "Who am I?"),
    ]


async def test_parallel_calls_run_concurrently_and_results_keep_call_order(
    fake_upstream: ScriptedUpstream,
) -> None:
    both_started = asyncio.Event()
    second_done = asyncio.Event()
    started: list[str] = []
    finished: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Waits until both calls have started: deadlocks if calls ran one after the other."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)
        if name == "first":  # finish second, without a clock
            await asyncio.wait_for(second_done.wait(), 5)
        finished.append(name)
        second_done.set()
        return f"done {name}"

    fake_upstream.add(
        Reply(tool_calls=[("slow", {"name": "first"}), ("slow", {"name": "second"})]),
        Reply(text="both done"),
    )
    result = await agent(fake_upstream, slow).run("go")
    assert result.status == "completed"
    assert finished == ["second", "first"]
    contents = [m["content"] for m in tool_messages(fake_upstream, 1)]
    assert contents[0].endswith("output:\ndone first")
    assert contents[1].endswith("output:\ndone second")


async def test_malformed_arguments_are_reported_and_corrected_next_turn(
    fake_upstream: ScriptedUpstream,
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
    fake_upstream.add(
        Chunks(broken), Reply(tool_calls=[("get_weather", {"city": "Paris"})]), Reply(text="18 °C")
    )
    result = await agent(fake_upstream).run("weather in Paris?")
    assert result.status == "completed" and result.text == "18 °C"
    assert ran == [("get_weather", {"city": "Paris"})]  # never ran with {} or half an argument
    error = tool_messages(fake_upstream, 1)[0]["content"]
    assert error.startswith("status:\nerror\n\ntoolName:\nget_weather\n\nerror:\n")
    assert "incomplete JSON" in error and '{"city": "Par' in error
    assistant = fake_upstream.chat_requests[1].body["messages"][1]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_unknown_tool_and_invalid_arguments_become_error_results(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Reply(tool_calls=[("get_wether", {"city": "Paris"}), ("get_weather", {"town": "Paris"})]),
        Reply(text="sorry"),
    )
    result = await agent(fake_upstream).run("weather?")
    assert result.status == "completed"
    assert ran == []
    unknown, invalid = (m["content"] for m in tool_messages(fake_upstream, 1))
    assert "unknown tool 'get_wether'" in unknown and "get_weather" in unknown
    # checked against the tool's schema before anything ran: what is missing, and where
    assert "do not fit the input schema of get_weather" in invalid
    assert 'at $: "city" is a required property' in invalid


async def test_max_tool_calls_is_a_soft_stop(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]),
        Reply(text="Paris is 18 °C; I could not check Oslo."),
    )
    result = await agent(fake_upstream, max_tool_calls=1).run("both cities?")
    assert result.status == "completed"
    assert result.text.startswith("Paris is 18")
    assert ran == [("get_weather", {"city": "Paris"})]
    refused = tool_messages(fake_upstream, 1)[1]["content"]
    assert "not executed" in refused and "max_tool_calls" in refused
    assert "tools" not in fake_upstream.chat_requests[1].body  # the last call is offered no tools


async def test_a_call_made_after_tools_ran_out_is_taken_as_the_answer(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(text="Paris: 18 °C.", tool_calls=[("get_weather", {"city": "Oslo"})]),
    )
    result = await agent(fake_upstream, max_tool_calls=1).run("weather?")
    assert result.status == "completed" and result.text == "Paris: 18 °C."
    assert ran == [("get_weather", {"city": "Paris"})]
    assert len(fake_upstream.chat_requests) == 2


async def test_iteration_cap_ends_incomplete(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(*[Reply(tool_calls=[("get_weather", {"city": f"c{i}"})]) for i in range(5)])
    result = await agent(fake_upstream, max_iterations=3).run("loop forever")
    assert result.status == "incomplete"
    assert result.reason == "max_iterations"
    assert len(fake_upstream.chat_requests) == 3


async def test_the_same_failing_call_three_times_stops_the_loop(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(*[Reply(tool_calls=[("flaky", {"path": "a.txt"})]) for _ in range(5)])
    result = await agent(fake_upstream).run("read a.txt")
    assert result.status == "incomplete"
    assert result.reason == "repeated_failure"
    assert result.message is not None
    assert "FileNotFoundError: no such file: a.txt" in result.message
    assert len(fake_upstream.chat_requests) == 3


async def test_a_cut_off_answer_is_incomplete(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Reply(text="The answer is", finish_reason="length"))
    result = await agent(fake_upstream).run("long story?")
    assert result.status == "incomplete"
    assert result.reason == "max_output_tokens"
    assert result.text == "The answer is"


async def test_a_forced_tool_choice_is_relaxed_once_a_tool_ran(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]), Reply(text="4 °C"))
    bot = Agent(fake_upstream.adapter(), "m", [get_weather], tool_choice="required")
    result = await bot.run("Oslo?")
    assert result.status == "completed"
    choices = [r.body.get("tool_choice") for r in fake_upstream.chat_requests]
    assert choices == ["required", "auto"]


# -- leaks -----------------------------------------------------------------------------------


async def test_leaked_call_is_retried_and_the_retry_succeeds(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Reply(text=LEAKED),
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
        Reply(text="18 °C in Paris."),
    )
    result = await agent(fake_upstream).run("weather in Paris?")
    assert result.status == "completed"
    assert ran == [("get_weather", {"city": "Paris"})]
    leaks = [e for e in result.events if isinstance(e, LeakDetected)]
    assert [e.action for e in leaks] == ["retry"]
    retry_messages = fake_upstream.chat_requests[1].body["messages"]
    assert not any("<tool_call>" in str(m.get("content")) for m in retry_messages)
    assert retry_messages[-1]["role"] == "user" and "plain text" in retry_messages[-1]["content"]
    shown = shown_text(result.events)
    assert "<tool_call>" not in shown and shown.startswith("I will check.")


async def test_leak_retries_are_capped_with_a_visible_reason(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(*[Reply(text=LEAKED) for _ in range(3)])
    result = await agent(fake_upstream).run("weather in Paris?")
    assert result.status == "incomplete"
    assert result.reason == "leaked_tool_call"
    assert result.message is not None and "tool-call parser" in result.message
    assert ran == []
    assert len(fake_upstream.chat_requests) == 3  # the first try and two retries
    actions = [e.action for e in result.events if isinstance(e, LeakDetected)]
    assert actions == ["retry", "retry", "gave_up"]


async def test_salvage_runs_a_well_formed_leaked_call(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Reply(text=LEAKED), Reply(text="18 °C in Paris."))
    result = await agent(fake_upstream, leak_mode="salvage").run("weather in Paris?")
    assert result.status == "completed"
    assert ran == [("get_weather", {"city": "Paris"})]
    assert len(fake_upstream.chat_requests) == 2
    assert [e.action for e in result.events if isinstance(e, LeakDetected)] == ["salvaged"]


async def test_a_salvaged_call_of_a_server_tool_is_judged_as_a_structured_one(
    fake_upstream: ScriptedUpstream,
) -> None:
    """A call read from leaked text meets the tool's schema as any call does: `"21.5"` for a
    number is repaired and run; a missing property is re-asked with what did not fit (before:
    a leak re-ask, the model told only that it wrote a call as text)."""
    wrong = '<tool_call>\n{"name": "convert_temperature", "arguments": {}}\n</tool_call>'
    fixable = wrong.replace("{}", '{"celsius": "21.5"}')
    fake_upstream.add(Reply(text=wrong), Reply(text=fixable), Reply(text="70.7 °F."))
    result = await agent(fake_upstream, leak_mode="salvage").run("21.5 °C in °F?")
    assert result.status == "completed" and ran == [("convert_temperature", {"celsius": 21.5})]
    assert [e.action for e in result.events if isinstance(e, LeakDetected)] == ["salvaged"] * 2
    (misfit,) = [e for e in result.events if isinstance(e, ArgumentsMisfit)]
    assert misfit.action == "retry" and '"celsius" is a required property' in misfit.problems
    (repaired,) = [e for e in result.events if isinstance(e, ArgumentsRepaired)]
    assert [r.kind for r in repaired.repairs] == ["numeric_string"]
    second = fake_upstream.chat_requests[1].body["messages"]
    assert "do not fit the input schema of convert_temperature" in second[-1]["content"]


async def test_salvage_refuses_an_undeclared_tool_and_retries(
    fake_upstream: ScriptedUpstream,
) -> None:
    bad = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'
    fake_upstream.add(Reply(text=bad), Reply(text="I cannot do that."))
    result = await agent(fake_upstream, leak_mode="salvage").run("clean up")
    assert result.status == "completed"
    assert [e.action for e in result.events if isinstance(e, LeakDetected)] == ["retry"]
    assert len(fake_upstream.chat_requests) == 2


async def test_leak_mode_off_takes_the_text_as_the_answer(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Reply(text=LEAKED))
    result = await agent(fake_upstream, leak_mode="off").run("weather?")
    assert result.status == "completed" and result.text == LEAKED
    assert ran == [] and len(fake_upstream.chat_requests) == 1


async def test_prose_mentioning_tool_syntax_is_not_a_leak(fake_upstream: ScriptedUpstream) -> None:
    prose = "Models such as Hermes write `<tool_call>` tags; the server parses them. That's all."
    fake_upstream.add(Reply(text=prose))
    result = await agent(fake_upstream).run("how do tool calls work?")
    assert result.status == "completed" and result.text == prose
    assert shown_text(result.events) == prose
    assert not [e for e in result.events if isinstance(e, LeakDetected)]


# -- events, failures ------------------------------------------------------------------------


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
async def test_stream_yields_events_in_a_sensible_order(
    fake_upstream: ScriptedUpstream, checked: bool
) -> None:
    fake_upstream.add(*WEATHER_DEMO())
    bot = agent(fake_upstream, check_arguments=checked)
    events = [e async for e in bot.stream("Paris or Oslo?")]
    assert isinstance(events[0], RunStarted) and isinstance(events[1], ModelCallStarted)
    assert isinstance(events[-1], LoopFinished)
    assert sum(isinstance(e, LoopFinished) for e in events) == 1
    assert [e.iteration for e in events if isinstance(e, ModelCallStarted)] == [1, 2, 3]
    # every call: started, its argument deltas (which concatenate to the final arguments),
    # then its turn completes, then it executes
    # (checked against their tools' schemas, calls are judged whole before they show)
    started = {e.key: i for i, e in enumerate(events) if isinstance(e, CallStreamStarted)}
    assert len(started) == (0 if checked else 2)  # keys are per turn: turns 1, 2 use 0 and 1
    completed = [i for i, e in enumerate(events) if isinstance(e, ModelTurnCompleted)]
    calls = [c for i in completed for c in events[i].message.tool_calls]  # type: ignore[union-attr]
    assert [c.name for c in calls] == ["get_weather", "get_weather", "convert_temperature"]
    first_turn = events[: completed[0]]
    for key, call in enumerate(calls[:2] if not checked else []):
        pieces = [e.delta for e in first_turn if isinstance(e, CallArgumentsDelta) and e.key == key]
        assert "".join(pieces) == call.raw_arguments
    for call in calls:
        begin = next(
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolExecutionStarted) and e.call.id == call.id
        )
        end = next(
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolExecutionFinished) and e.call.id == call.id
        )
        assert begin < end
    assert events[-1].final_text.startswith("Paris is warmer")  # type: ignore[union-attr]
    assert isinstance(bot.history[0], UserMessage) and len(bot.history) == 7  # history kept


async def test_client_tools_end_the_run_with_the_calls(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Reply(text="Let me see.", tool_calls=[("lookup", {"sku": "A-1"})]))
    events: list[LoopEvent] = []
    request = LoopRequest(
        model="m", input=[UserMessage("stock?")], client_tools=[ToolSpec("lookup")]
    )
    state = await LoopDriver(fake_upstream.adapter()).run(request, events.append)
    assert state.status == "completed"
    assert [(c.name, c.arguments) for c in state.pending_calls] == [("lookup", {"sku": "A-1"})]
    returned = [e for e in events if isinstance(e, ToolCallsReturned)]
    assert [c.id for c in returned[0].calls] == [c.id for c in state.pending_calls]
    assert not [e for e in events if isinstance(e, ToolExecutionStarted)]
    assert len(fake_upstream.chat_requests) == 1


async def test_upstream_failure_ends_the_run_failed(fake_upstream: ScriptedUpstream) -> None:
    fake_upstream.add(Body({"error": {"message": "no such model"}}, status=404))
    result = await agent(fake_upstream).run("hi")
    assert result.status == "failed"
    assert result.reason == "upstream_error"
    assert result.message is not None and "no such model" in result.message
    assert not [e for e in result.events if isinstance(e, ToolExecutionFinished)]


async def test_a_stream_broken_mid_answer_ends_the_run_failed(
    fake_upstream: ScriptedUpstream,
) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    fake_upstream.add(Chunks([chunk, chunk], disconnect_after=1))
    result = await agent(fake_upstream).run("hi")
    assert result.status == "failed"
    assert result.reason == "upstream_error"
    assert result.message is not None and "broke" in result.message
    assert shown_text(result.events) == "partial "


async def test_tool_timeout_is_an_error_result(fake_upstream: ScriptedUpstream) -> None:
    @tool(timeout=0.01)
    async def sleepy() -> str:
        """Never finishes in time."""
        await asyncio.Event().wait()
        return "late"

    fake_upstream.add(Reply(tool_calls=[("sleepy", {})]), Reply(text="gave up"))
    result = await agent(fake_upstream, sleepy).run("go")
    assert result.status == "completed"
    assert "sleepy timed out after 0.01 seconds" in tool_messages(fake_upstream, 1)[0]["content"]


async def test_file_with_a_regex_reaches_the_model_with_one_backslash(
    fake_upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    source = tmp_path / "find.ts"
    source.write_text('const pattern = /\\.ts$/;\nconst s = "tab\\there";\n', encoding="utf-8")

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return Path(path).read_text(encoding="utf-8")

    fake_upstream.add(Reply(tool_calls=[("read_file", {"path": str(source)})]), Reply(text="ok"))
    await agent(fake_upstream, read_file).run("read it")
    content = tool_messages(fake_upstream, 1)[0]["content"]  # the JSON-decoded request body
    assert "/\\.ts$/" in content and "\\\\.ts$" not in content
    assert '"tab\\there"' in content


async def test_assistant_argument_strings_go_back_unchanged(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(
        Reply(tool_calls=[("get_weather", '{ "city" :  "Paris" }')]), Reply(text="ok")
    )
    await agent(fake_upstream).run("weather?")
    assistant = fake_upstream.chat_requests[1].body["messages"][1]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{ "city" :  "Paris" }'


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


# -- the run's end: the final write is part of the run ----------------------------------------


async def test_the_final_write_happens_before_any_sink_sees_the_outcome(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Reply(text="stored first"))
    order: list[str] = []

    def sink(event: LoopEvent) -> None:
        if isinstance(event, LoopFinished):
            order.append("announced")

    async def checkpoint(event: LoopEvent) -> None:
        if isinstance(event, LoopFinished):
            await asyncio.sleep(0)  # a real write yields to the event loop
            order.append(f"stored {event.reason}")

    request = LoopRequest(model="m", input=[UserMessage("hi")])
    state = await LoopDriver(fake_upstream.adapter()).run(request, sink, checkpoint=checkpoint)
    assert order == ["stored answered", "announced"]
    assert state.status == "completed"


async def test_a_failed_final_write_is_the_store_error_outcome(
    fake_upstream: ScriptedUpstream,
) -> None:
    fake_upstream.add(Reply(text="never recorded"))
    events: list[LoopEvent] = []

    async def checkpoint(event: LoopEvent) -> None:
        if isinstance(event, LoopFinished):
            raise StoreError("the response could not be stored: disk full")

    request = LoopRequest(model="m", input=[UserMessage("hi")])
    state = await LoopDriver(fake_upstream.adapter()).run(
        request, events.append, checkpoint=checkpoint
    )
    finished = [e for e in events if isinstance(e, LoopFinished)]
    assert len(finished) == 1 and finished[0].reason is StopReason.STORE_ERROR
    assert finished[0].message == "the response could not be stored: disk full"
    assert isinstance(finished[0].error, StoreError)
    assert state.status == "failed"


@pytest.mark.parametrize(
    ("told", "reported"),
    [(None, CancelCause.CLIENT), (CancelCause.SHUTDOWN, CancelCause.SHUTDOWN)],
)
async def test_a_cancelled_run_reports_who_cancelled_it(
    fake_upstream: ScriptedUpstream, told: CancelCause | None, reported: CancelCause
) -> None:
    fake_upstream.add(Reply(text="slow", tool_calls=[("wait_a_while", {})]))
    started = asyncio.Event()

    @tool
    async def wait_a_while() -> str:
        """Waits."""
        started.set()
        await asyncio.sleep(60)
        return "late"

    events: list[LoopEvent] = []
    cancellation = Cancellation()
    request = LoopRequest(model="m", input=[UserMessage("go")], tools=[wait_a_while])
    run = asyncio.create_task(
        LoopDriver(fake_upstream.adapter()).run(request, events.append, cancellation=cancellation)
    )
    await started.wait()
    if told is not None:
        cancellation.cancel(told)
    cancellation.cancel(CancelCause.CLIENT)  # a later cause does not replace the first
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    finished = events[-1]
    assert isinstance(finished, LoopFinished)
    assert finished.reason is StopReason.CANCELLED and finished.cause is reported


async def test_the_driver_never_edits_its_request_and_reports_the_decisions_it_applied(
    fake_upstream: ScriptedUpstream,
) -> None:
    """The request is data: a decision already used elsewhere is dropped from the run's own
    view (and from `LoopFinished.decisions`), not from the request a caller may reuse."""
    fake_upstream.add(Reply(text="done"))

    class UsedLedger:
        async def claim_approval(self, *args: Any) -> bool:
            return False  # decided before, on another branch of history

    call = ToolCall("mcpr_1", "get_weather", {"city": "Oslo"}, '{"city": "Oslo"}')
    request = LoopRequest(
        model="m",
        input=[UserMessage("weather?")],
        tools=[get_weather],
        approvals={"mcpr_1": True},
        resume_calls=[call],
    )
    events: list[LoopEvent] = []
    await LoopDriver(fake_upstream.adapter()).run(
        request, events.append, services=RunServices(ledger=UsedLedger())
    )
    assert request.approvals == {"mcpr_1": True} and request.resume_calls == [call]
    finished = events[-1]
    assert isinstance(finished, LoopFinished) and finished.decisions == {}
    assert ran == []  # the used decision ran nothing
