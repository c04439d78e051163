"""End to end: the official client against `toolwire serve` over the real local model
(llama-cpp-python serving SmolLM2-135M), with a server-side function tool. Whatever the small
model says, the loop must complete: the tool ran with the arguments the model produced, an answer
came back, the response is stored."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.processes import free_port, toolwire_process

pytest.importorskip("llama_cpp", reason="needs the local extra: pip install 'toolwire[local]'")
pytestmark = pytest.mark.e2e

MODEL = "smollm2-135m-instruct"
FORCE_WEATHER = {"type": "function", "name": "get_weather"}


class Local:
    def __init__(self, base: str, process: Any) -> None:
        self.base = base
        self.process = process
        self.client = openai.OpenAI(
            base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120
        )


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    db = tmp_path_factory.mktemp("e2e") / "toolwire.db"
    port = free_port()
    args = [
        "serve",
        "--db",
        f"sqlite:///{db}",
        "--port",
        str(port),
        "--tool",
        "toolwire.demo_tools:get_weather",
    ]
    env_before = os.environ.get("TOOLWIRE_MAX_ITERATIONS")
    os.environ["TOOLWIRE_MAX_ITERATIONS"] = "4"
    try:
        with toolwire_process(*args, health=f"http://127.0.0.1:{port}/health") as process:
            yield Local(f"http://127.0.0.1:{port}", process)
    finally:
        if env_before is None:
            os.environ.pop("TOOLWIRE_MAX_ITERATIONS", None)
        else:
            os.environ["TOOLWIRE_MAX_ITERATIONS"] = env_before


def weather_calls(response: Any) -> list[Any]:
    return [
        item for item in response.output if item.type == "mcp_call" and item.name == "get_weather"
    ]


def final_of(events: list[Any]) -> Any:
    """The response of a stream's terminal event (`get_final_response` knows only
    `response.completed`; a token budget may end an answer `incomplete`)."""
    terminal = ("response.completed", "response.incomplete", "response.failed")
    finals = [event.response for event in events if event.type in terminal]
    assert len(finals) == 1, [event.type for event in events]
    return finals[0]


def check_loop_completed(local: Local, response: Any) -> None:
    calls = weather_calls(response)
    assert calls, (
        response.status,
        response.error,
        response.incomplete_details,
        [i.type for i in response.output],
    )
    first = calls[0]
    arguments = json.loads(first.arguments)
    assert isinstance(arguments.get("city"), str)
    assert first.error is None and first.output is not None
    city = arguments["city"].strip(" ,.;:!?")  # as get_weather reads it
    # The tool ran with the model's arguments: its `city:` field holds them (a value the
    # model wrote over several lines is rendered as an indented block, one line each).
    shown = first.output.split("city:", 1)[1].split("temperature_c:", 1)[0]
    assert [
        line.strip() for line in shown.strip().removeprefix("|").splitlines() if line.strip()
    ] == [line.strip() for line in city.splitlines() if line.strip()], (city, first.output)
    # max_tool_calls=1: after the tool, one last model call without tools answers.
    assert response.status in ("completed", "incomplete"), response.error
    assert response.output[-1].type == "message", response.model_dump_json(indent=1)
    stored = local.client.responses.retrieve(response.id)
    assert stored.id == response.id and weather_calls(stored)


def test_models_lists_the_local_model(local: Local) -> None:
    assert MODEL in [m.id for m in local.client.models.list()]


def test_non_streaming_tool_loop_over_the_local_model(local: Local) -> None:
    response = local.client.responses.create(
        model=MODEL,
        input="What is the weather in Paris?",
        tool_choice=FORCE_WEATHER,
        max_tool_calls=1,
        max_output_tokens=64,
        temperature=0,
    )
    check_loop_completed(local, response)
    assert response.output_text.strip()  # an answer came back


def test_streaming_tool_loop_over_the_local_model(local: Local) -> None:
    with local.client.responses.stream(
        model=MODEL,
        input="Weather in Oslo?",
        tool_choice=FORCE_WEATHER,
        max_tool_calls=1,
        max_output_tokens=64,
        temperature=0,
    ) as stream:
        events = list(stream)
        kinds = [event.type for event in events]
        final = final_of(events)
    assert kinds[0] == "response.created"
    assert "response.mcp_call.completed" in kinds
    check_loop_completed(local, final)


def test_chat_proxy_over_the_local_model(local: Local) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    completion = local.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Weather in Tokyo?"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=64,
        temperature=0,
    )
    calls = completion.choices[0].message.tool_calls or []
    assert completion.choices[0].finish_reason == "tool_calls"
    assert calls and calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments), dict)


def _llama_server_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"toolwire.upstream.llama_child" in cmdline:
                pids.append(int(entry.name))
    return pids


def test_killed_local_server_is_restarted(local: Local) -> None:
    children = [pid for pid in _llama_server_pids() if _parent(pid) == local.process.pid]
    assert len(children) == 1
    os.kill(children[0], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        fresh = [
            pid
            for pid in _llama_server_pids()
            if _parent(pid) == local.process.pid and pid != children[0]
        ]
        if fresh:
            try:
                if httpx.get(local.base + "/v1/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    response = local.client.responses.create(
        model=MODEL,
        input="Weather in Paris?",
        tool_choice=FORCE_WEATHER,
        max_tool_calls=1,
        max_output_tokens=64,
        temperature=0,
    )
    check_loop_completed(local, response)


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_toolwire_demo_answers_right_from_the_tool(tmp_path: Path) -> None:
    """`toolwire demo` (what `make run` runs), as a user runs it: the model calls get_weather
    for Paris, and its final answer restates what the tool returned, with no number the tool
    did not give (a wrong unit conversion or an invented figure fails)."""
    import asyncio
    import re
    import subprocess
    import sys

    from toolwire.demo_tools import get_weather
    from toolwire.store.database import Store

    db = f"sqlite:///{tmp_path / 'demo.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "demo", "--db", db],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "model call 1" in out and 'tool call get_weather({"city":"Paris"})' in out
    assert "envelope: get_weather" in out and "temperature_f: 64" in out
    assert "final answer" in out and "previous_response_id=" in out
    found = re.search(r"stored response id: (resp_\w+)", out)
    assert found, out

    async def stored() -> dict[str, Any]:
        store = await Store.open(db)
        try:
            body = await store.get_response(found.group(1), owner=None)
        finally:
            await store.close()
        assert body is not None
        return body

    response = asyncio.run(stored())
    assert response["status"] == "completed", response
    calls = [item for item in response["output"] if item["type"] == "mcp_call"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    facts = asyncio.run(get_weather.run(get_weather.validate({"city": "Paris"})))
    assert calls[0]["output"] == get_weather.render(facts) and calls[0]["error"] is None
    message = response["output"][-1]
    assert message["type"] == "message"
    answer = " ".join(part["text"] for part in message["content"])
    # the answer carries the tool's facts, and every number in it is one the tool gave
    assert "18" in answer and "rain" in answer.lower(), answer
    numbers = re.findall(r"\d+(?:[.,]\d+)?", answer)
    given = {str(facts["temperature_c"]), str(facts["temperature_f"])}
    assert set(numbers) <= given, (answer, given)
    assert " ".join(answer.split()[:6]) in " ".join(out.split()), out  # and it was shown


def test_the_local_server_dies_with_a_killed_gateway(tmp_path: Path) -> None:
    import subprocess
    import sys

    port = free_port()
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolwire",
            "serve",
            "--db",
            f"sqlite:///{tmp_path / 'db.sqlite'}",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        children: list[int] = []
        while time.monotonic() < deadline and not children:
            children = [pid for pid in _llama_server_pids() if _parent(pid) == gateway.pid]
            time.sleep(0.2)
        assert children, "the gateway started no local model server"
        gateway.send_signal(signal.SIGKILL)
        gateway.wait(10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in children
        ):
            time.sleep(0.1)
        assert not [pid for pid in children if Path(f"/proc/{pid}").exists() and _state(pid) != "Z"]
    finally:
        if gateway.poll() is None:
            gateway.kill()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# --- the local model behaves like a real model server ----------------------------------------


def test_concurrent_streams_all_complete_uncut(local: Local) -> None:
    """Three streamed answers at once: the model server queues them (it never interrupts one
    for the next), so each completes with its full text, and each carries real usage."""
    from concurrent.futures import ThreadPoolExecutor

    def ask(n: int) -> tuple[Any, str]:
        with local.client.responses.stream(
            model=MODEL,
            input=f"Count from 1 to {n + 5}.",
            tool_choice="none",
            max_output_tokens=40,
            temperature=0,
        ) as stream:
            events = list(stream)
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        return final_of(events), text

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(ask, range(3)))
    for final, streamed in results:
        assert final.status in ("completed", "incomplete"), (final.status, final.error)
        assert final.output_text == streamed and streamed.strip()
        if final.status == "incomplete":  # only the token budget may stop it
            assert final.incomplete_details.reason == "max_output_tokens"
        assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
        assert final.usage.total_tokens == final.usage.input_tokens + final.usage.output_tokens


def test_streamed_chat_reports_usage(local: Local) -> None:
    stream = local.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=16,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    usage = [c.usage for c in chunks if c.usage is not None]
    assert usage and usage[-1].prompt_tokens > 0 and usage[-1].completion_tokens > 0


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_structured_output_on_responses(local: Local) -> None:
    response = local.client.responses.create(
        model=MODEL,
        input="Bob is 30 years old. Give his name and age.",
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON}},
        tool_choice="none",
        max_output_tokens=60,
        temperature=0,
    )
    assert response.status == "completed", (response.error, response.incomplete_details)
    value = json.loads(response.output_text)
    assert isinstance(value["name"], str) and isinstance(value["age"], int)
    assert set(value) == {"name", "age"}


def test_structured_output_on_chat_completions(local: Local) -> None:
    completion = local.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Alice is 41. Give her name and age."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON},
        },
        max_tokens=60,
        temperature=0,
    )
    value = json.loads(completion.choices[0].message.content or "")
    assert isinstance(value["name"], str) and isinstance(value["age"], int)


def test_required_tool_choice_makes_a_call(local: Local) -> None:
    response = local.client.responses.create(
        model=MODEL,
        input="Tell me something about Tokyo.",
        tool_choice="required",
        parallel_tool_calls=False,
        max_tool_calls=1,
        max_output_tokens=64,
        temperature=0,
    )
    check_loop_completed(local, response)
    assert len(weather_calls(response)) == 1
