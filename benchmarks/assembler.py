"""Tool-call assembly speed: a 10,000-chunk stream carrying 100 tool calls.

Three paths, one run: the assembler alone (decoded chunks in), SSE bytes -> decoder -> orjson ->
assembler (still in memory), and the whole chat-completions adapter reading the stream over HTTP
from a ScriptedUpstream. Prints chunks/s and microseconds per chunk (median of several repeats).
Target: the assembler alone under 5 microseconds per chunk.

    .venv/bin/python benchmarks/assembler.py [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from toolwire.testing import Chunks, ScriptedUpstream
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.assembler import StreamAssembler
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import ToolCallDone
from toolwire.wire.sse import SSEDecoder

CALLS = 100
CHUNKS_PER_CALL = 100
TOOLS = ["read_file", "grep", "terminal", "get_weather"]


def build_chunks() -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    for i in range(CALLS):
        name = TOOLS[i % len(TOOLS)]
        payload = orjson.dumps(
            {"path": f"src/module_{i}.py", "pattern": "x" * 300, "n": i}
        ).decode()
        step = -(-len(payload) // (CHUNKS_PER_CALL - 1))
        pieces = [payload[k : k + step] for k in range(0, len(payload), step)]
        pieces += [""] * (CHUNKS_PER_CALL - 1 - len(pieces))
        first = {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(
            {
                **base,
                "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}],
            }
        )
        for piece in pieces:
            entry = {"index": i, "function": {"arguments": piece}}
            chunks.append(
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}
                    ],
                }
            )
    chunks[-1]["choices"][0]["finish_reason"] = "tool_calls"
    return chunks


def assembler_alone(chunks: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    assembler = StreamAssembler(TOOLS)
    feed = assembler.feed
    for chunk in chunks:
        feed(chunk)
    done = [e for e in assembler.finish() if isinstance(e, ToolCallDone)]
    elapsed = time.perf_counter() - start
    assert len(done) == CALLS and all(e.call.ok for e in done)
    return elapsed


def decode_and_assemble(stream: bytes) -> float:
    start = time.perf_counter()
    decoder = SSEDecoder()
    assembler = StreamAssembler(TOOLS)
    loads = orjson.loads
    for offset in range(0, len(stream), 4096):
        for sse in decoder.feed(stream[offset : offset + 4096]):
            if sse.data != "[DONE]":
                assembler.feed(loads(sse.data))
    done = [e for e in assembler.finish() if isinstance(e, ToolCallDone)]
    elapsed = time.perf_counter() - start
    assert len(done) == CALLS
    return elapsed


async def through_adapter(chunks: list[dict[str, Any]], repeats: int) -> list[float]:
    times = []
    async with ScriptedUpstream() as server:
        upstream = ChatCompletionsUpstream(server.base_url)
        request = TurnRequest("m", [UserMessage("go")], tools=[ToolSpec(n) for n in TOOLS])
        for _ in range(repeats):
            server.add(Chunks(chunks))
            start = time.perf_counter()
            count = 0
            async for event in upstream.stream_turn(request):
                count += isinstance(event, ToolCallDone)
            times.append(time.perf_counter() - start)
            assert count == CALLS
        await upstream.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    chunks = build_chunks()
    stream = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    n = len(chunks)
    rows = [
        ("assembler alone", [assembler_alone(chunks) for _ in range(args.repeats)]),
        (
            "SSE decode + JSON + assembler",
            [decode_and_assemble(stream) for _ in range(args.repeats)],
        ),
        (
            "whole adapter over HTTP (ScriptedUpstream)",
            asyncio.run(through_adapter(chunks, args.repeats)),
        ),
    ]
    table = Table(title=f"Tool-call assembly: {n} chunks, {CALLS} calls, median of {args.repeats}")
    for column in ("path", "chunks/s", "µs/chunk", "target"):
        table.add_column(column, justify="right" if column != "path" else "left")
    for label, times in rows:
        median = statistics.median(times)
        target = "< 5 µs" if label == "assembler alone" else ""
        table.add_row(label, f"{n / median:,.0f}", f"{median / n * 1e6:.2f}", target)
    Console().print(table)


if __name__ == "__main__":
    main()
