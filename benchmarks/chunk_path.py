"""CPU per streamed chunk on toolwire's own path, in process (no sockets): the 500-chunk tool
call of `run.py`'s workloads (b) and (f), as raw reads of 16 KiB, through the SSE decoder and the
assembler (`decode`), then the whole run on the Responses door: driver, observers, builder and
SSE framing (`responses`) and on the chat door (`chat`). Best of N, so a loaded machine still
gives a usable figure; compare two source trees with PYTHONPATH, interleaved:

    for i in 1 2 3; do for s in /tmp/base/src src; do
        PYTHONPATH=$s .venv/bin/python benchmarks/chunk_path.py; done; done

`--live`: the tool is `strict` and the upstream said to enforce it, so on the Responses door
its argument deltas stream live (as workload (f)'s target says); without it the call is judged
first and reaches the client whole (one delta), and only decoding and assembly are per chunk.

`--upstream URL` (a running `mock_upstream.py`, e.g. http://127.0.0.1:9100/v1): the doors read
the stream from it over loopback with the real upstream client (aiohttp, the mock's one HTTP
chunk per event) instead of 16 KiB reads; `decode` stays in memory.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_upstream import LONG_TOOL_NAME as TOOL_NAME
from mock_upstream import long_arguments, stream_events

CHUNKS = 500
READ = 16 * 1024
LIVE = "--live" in sys.argv
UPSTREAM = sys.argv[sys.argv.index("--upstream") + 1] if "--upstream" in sys.argv else None


def frames() -> bytes:
    _, pieces = long_arguments(CHUNKS - 4)
    return b"".join(stream_events("mock-stream", pieces, name=TOOL_NAME))


class _Stream(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> Any:
        for k in range(0, len(self.body), READ):
            yield self.body[k : k + READ]


def adapter_for(body: bytes, **settings: Any) -> Any:
    """The chat-completions adapter: over loopback to `--upstream`, or on 16 KiB reads."""
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    if UPSTREAM:
        return ChatCompletionsUpstream(UPSTREAM, **settings)
    return ChatCompletionsUpstream("http://mock/v1", transport=transport(body), **settings)


def transport(body: bytes) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Stream(body)
        )

    return httpx.MockTransport(answer)


def best(times: list[float]) -> float:
    return min(times) / CHUNKS * 1e6


async def decode(body: bytes, rounds: int) -> float:
    from toolwire.upstream.assembler import StreamAssembler
    from toolwire.wire.sse import SSEDecoder

    times = []
    for _ in range(rounds):
        start = time.process_time()
        decoder = SSEDecoder(1 << 20)
        # the events' data as the adapter reads them (`feed_data`; an older tree: `feed`)
        feed = getattr(decoder, "feed_data", None) or (
            lambda raw, decoder=decoder: [sse.data for sse in decoder.feed(raw)]
        )
        assembler = StreamAssembler([TOOL_NAME])
        for k in range(0, len(body), READ):
            for data in feed(body[k : k + READ]):
                if data != "[DONE]":
                    assembler.feed(orjson.loads(data))
        assembler.finish()
        times.append(time.process_time() - start)
    return best(times)


async def responses(body: bytes, rounds: int) -> float:
    from toolwire.loop.driver import LoopDriver
    from toolwire.loop.state import LoopRequest, LoopSettings
    from toolwire.observe.setup import Observability
    from toolwire.transcript import ToolSpec, UserMessage
    from toolwire.wire.sse import encode_event

    live = {"strict_tools": "enforced"} if LIVE else {}
    adapter = adapter_for(body, **live)
    driver = LoopDriver(adapter, observe=Observability().observe)
    spec = ToolSpec(TOOL_NAME, "", {"type": "object", "properties": {}}, True if LIVE else None)
    header = _header(spec)
    times = []
    for _ in range(rounds):
        out: list[bytes] = []

        def emit(event: dict[str, Any], out: list[bytes] = out) -> None:
            frame = getattr(event, "frame", None)  # as ResponsesService.stream frames them
            out.append(frame or encode_event(orjson.dumps(event), event["type"]))

        builder = _sink(header, emit)
        request = LoopRequest(
            model="mock-stream",
            input=[UserMessage("go")],
            client_tools=[spec],
            settings=LoopSettings(stream=True),
        )
        start = time.process_time()
        await driver.run(request, builder)
        times.append(time.process_time() - start)
    await adapter.aclose()
    return best(times)


def _sink(header: Any, emit: Any) -> Any:
    """The Responses door's sink for a stream, whatever the tree (`ab.py` runs this against
    older checkouts): the draft with its event stream, or the older one-piece builder."""
    try:
        from toolwire.server.responses.draft import ResponseDraft
        from toolwire.server.responses.stream import ResponseStream
    except ImportError:
        from toolwire.server.responses.sink import ResponseBuilder  # type: ignore[import-not-found]

        return ResponseBuilder(header, emit)
    return ResponseDraft(header, ResponseStream(header, emit))


def _header_class() -> Any:
    try:
        from toolwire.server.responses.response_object import ResponseHeader
    except ImportError:
        from toolwire.server.responses.sink import ResponseHeader  # type: ignore[import-not-found,no-redef]
    return ResponseHeader


def _header(spec: Any) -> Any:
    """A response header as the Responses door makes one (fields by name, whatever the
    tree)."""
    import dataclasses

    cls = _header_class()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        values[f.name] = {
            "response_id": "resp_bench",
            "created_at": 0,
            "model": "mock-stream",
            "settings": {},
        }.get(f.name, {})
    return cls(**values)


async def chat(body: bytes, rounds: int) -> float:
    from toolwire.loop.driver import LoopDriver
    from toolwire.loop.state import LoopSettings
    from toolwire.observe.setup import Observability
    from toolwire.server.chat.proxy import ChatProxy

    adapter = adapter_for(body)
    driver = LoopDriver(adapter, observe=Observability().observe)
    proxy = ChatProxy(driver, LoopSettings(), None)
    tools = [
        {
            "type": "function",
            "function": {"name": TOOL_NAME, "parameters": {"type": "object"}},
        }
    ]
    times = []
    for _ in range(rounds):
        call = proxy.prepare(
            {
                "model": "mock-stream",
                "messages": [{"role": "user", "content": "go"}],
                "tools": tools,
                "stream": True,
            }
        )
        start = time.process_time()
        async for _frame in proxy.stream(call):
            pass
        times.append(time.process_time() - start)
    await adapter.aclose()
    return best(times)


async def main() -> None:
    body = frames()
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    rounds = int(numbers[0]) if numbers else 40
    # warmed up, then what lives for good frozen out of the collector's generations, as
    # `toolwire serve` does after start-up (server/main.py): a full collection in a timed run
    # walks what a request made, not this process's modules
    for warm_up in (decode, responses, chat):
        await warm_up(body, 2)
    gc.collect()
    gc.freeze()
    parts = {
        "decode": await decode(body, rounds),
        "responses": await responses(body, rounds),
        "chat": await chat(body, rounds),
    }
    print(
        "µs per chunk, best of",
        rounds,
        "(live deltas)" if LIVE else "(calls judged first)",
        "(loopback)" if UPSTREAM else "(16 KiB reads)",
        " ".join(f"{name} {value:.2f}" for name, value in parts.items()),
    )


if __name__ == "__main__":
    if UPSTREAM:  # the server's loop, as the sockets are real
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())
