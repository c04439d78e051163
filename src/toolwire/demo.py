"""`toolwire demo`: a real model calling a real tool through the gateway, traced live.

Starts the managed local model (SmolLM2-135M via llama-cpp-python), serves toolwire on a free
loopback port with the demo weather tool (its result is written for a 135M model to restate), and
drives one request with the official `openai` client, printing each step: the model call, the
tool call, the envelope the tool returned (what the model read), the final answer, and the stored
response id to continue from.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from toolwire.config import ServerConfig
from toolwire.server.main import build_app
from toolwire.tools.envelope import render_envelope

PROMPT = "What is the weather in Paris right now?"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_local_demo(model_path: Path | None, db: str | None, console: Console) -> int:
    import openai

    port = _free_port()
    config = ServerConfig(
        port=port,
        db=db,
        model_path=str(model_path) if model_path else None,
        tools=["toolwire.demo_tools:get_weather"],
        log_level="warning",
        log_format="off",  # the trace is the demo's output; request log lines would interleave
    )
    console.print(
        "[bold]toolwire demo[/]: starting the local model (SmolLM2-135M, llama-cpp-python)…"
    )
    app = await build_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving
            return 1
        await asyncio.sleep(0.05)
    base_url = f"http://127.0.0.1:{port}/v1"
    console.print(f"gateway at {base_url}\n[bold]prompt:[/] {PROMPT}")
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused")
    status = 1
    try:
        status = await _trace(client, console)
    finally:
        await client.close()
        server.should_exit = True
        await serving
    return status


async def _trace(client: Any, console: Console) -> int:
    model_calls = 1
    console.rule(f"model call {model_calls}", style="blue")
    final: Any = None
    stream = await client.responses.create(
        model="smollm2-135m-instruct",
        input=PROMPT,
        # A 135M model: force the first call, then let it answer (max_tool_calls is a soft
        # stop: one last model call without tools), greedily and with a fixed seed for a
        # repeatable demo; the answer is one sentence, far under the token budget.
        tool_choice={"type": "function", "name": "get_weather"},
        max_tool_calls=1,
        temperature=0,
        max_output_tokens=200,
        extra_body={"seed": 7},
        stream=True,
    )
    names: dict[str, str] = {}  # mcp_call item id -> tool name
    async for event in stream:
        kind = event.type
        if kind == "response.output_text.delta":
            console.print(Text(event.delta), end="")
        elif kind == "response.output_item.added" and event.item.type == "mcp_call":
            names[event.item.id] = event.item.name
        elif kind == "response.mcp_call_arguments.done":
            name = names.get(event.item_id, "tool")
            console.print(f"\n[cyan]tool call[/] {name}({Text(event.arguments).markup})")
        elif kind == "response.output_item.done" and event.item.type == "mcp_call":
            item = event.item
            envelope = render_envelope(
                item.name, ok=item.error is None, output=item.output or "", error=item.error or ""
            )
            style = "green" if item.error is None else "red"
            console.print(Panel(Text(envelope), title=f"envelope: {item.name}", border_style=style))
            model_calls += 1
            console.rule(f"model call {model_calls} (with the tool result)", style="blue")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    console.print()
    if final is None:
        console.print("[red]the stream ended without a final response[/]")
        return 1
    style = "green" if final.status == "completed" else "red"
    console.rule(f"[{style}]{final.status}[/]", style=style)
    if final.output_text:
        console.print(Panel(Text(final.output_text), title="final answer", border_style=style))
    details = final.incomplete_details or final.error
    if details is not None:
        console.print(f"[{style}]reason:[/] {orjson.dumps(details.model_dump()).decode()}")
    console.print(f"stored response id: [bold]{final.id}[/]")
    console.print(
        "Continue the conversation: run [bold]toolwire serve[/] (it starts the same local model "
        "and uses the same database), then:\n"
        "  from openai import OpenAI\n"
        '  client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused")\n'
        '  client.responses.create(model="smollm2-135m-instruct",\n'
        f'                         previous_response_id="{final.id}",\n'
        '                         input="And in Oslo?")'
    )
    return 0 if final.status == "completed" else 1
