"""Floors: the least a Python gateway built like toolwire can add, measured by the same harness.

A bare ASGI callable on uvicorn, served exactly as `toolwire serve` serves its app
(`asyncio.run(uvicorn.Server(...).serve())`, httptools, log level warning), in three modes:

- `bare`: reads the request and answers from pre-encoded bytes; no upstream. The ASGI server's
  own cost per request.
- `httpx`: forwards the client's body unchanged (JSON or stream, as the client asked) on a
  pooled `httpx.AsyncClient`, reads the whole upstream answer with `aiter_raw()`, and answers
  with pre-encoded bytes. The ASGI server plus the httpx client: no SSE decoding, no JSON
  parsing, no loop.
- `aiohttp`: the same with a pooled `aiohttp.ClientSession` (C HTTP parser, no anyio layer).
- `httpx-aiohttp`: httpx's API over aiohttp (`httpx_aiohttp.AiohttpTransport`), as toolwire's
  upstream client is built: the difference to `aiohttp` is what the httpx facade costs.

The answer is the same tool call the mock sends (JSON, or a 4-frame SSE stream when the client
asked for a stream), so the harness's correctness checks pass. Run with the project's venv;
aiohttp comes from `benchmarks/.pip-extras` (appended to sys.path, created by `run.py --floors`).

    .venv/bin/python benchmarks/floors.py --mode httpx --upstream http://127.0.0.1:9100/v1 --port 9400
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE / ".pip-extras"))  # aiohttp when the project venv lacks it
sys.path.insert(0, str(HERE))

from mock_upstream import SHORT_ARGS, TOOL_NAME, completion_body, long_arguments  # noqa: E402

STREAM_RE = re.compile(rb'"stream"\s*:\s*true')
MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"]*)"')


def answers(chunks: int) -> dict[tuple[bool, bool], bytes]:
    """(long?, stream?) -> body."""
    long_args = long_arguments(chunks - 4)[0]
    out = {}
    base = {
        "id": "chatcmpl-floor",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "mock",
    }

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        doc = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    for is_long, args in ((False, SHORT_ARGS), (True, long_args)):
        out[(is_long, False)] = completion_body("mock", args)

        call = {
            "index": 0,
            "id": "call_mock_0001",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": args},
        }
        out[(is_long, True)] = (
            frame({"role": "assistant", "content": ""})
            + frame({"tool_calls": [call]})
            + frame({}, "tool_calls")
            + b"data: [DONE]\n\n"
        )
    return out


def make_app(mode: str, upstream: str, chunks: int) -> Any:
    bodies = answers(chunks)
    url = upstream.rstrip("/") + "/chat/completions"
    state: dict[str, Any] = {}

    async def forward(body: bytes, stream: bool) -> None:
        """The client's body, unchanged, to the upstream; the whole answer is read."""
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if mode in ("httpx", "httpx-aiohttp"):
            client = state["client"]
            request = client.build_request("POST", url, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                async for _ in response.aiter_raw():
                    pass
            finally:
                await response.aclose()
        elif mode == "aiohttp":
            async with state["session"].post(url, data=body, headers=headers) as response:
                async for _ in response.content.iter_any():
                    pass

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if mode == "httpx-aiohttp":
                        import httpx
                        from httpx_aiohttp import AiohttpTransport

                        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
                        state["client"] = httpx.AsyncClient(
                            timeout=60, transport=AiohttpTransport(limits=limits)
                        )
                    elif mode == "httpx":
                        import httpx

                        state["client"] = httpx.AsyncClient(
                            timeout=60,
                            limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
                        )
                    elif mode == "aiohttp":
                        import aiohttp

                        state["session"] = aiohttp.ClientSession(
                            connector=aiohttp.TCPConnector(limit=256)
                        )
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if "client" in state:
                        await state["client"].aclose()
                    if "session" in state:
                        await state["session"].close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"].endswith("/health"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"status":"ok"}'})
            return
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(parts)
        found = MODEL_RE.search(body)
        is_long = bool(found and b"stream" in found.group(1))
        stream = STREAM_RE.search(body) is not None
        if mode != "bare":
            await forward(body, stream)
        answer = bodies[(is_long, stream)]
        kind = b"text/event-stream" if stream else b"application/json"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )
        await send({"type": "http.response.body", "body": answer})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode", choices=["bare", "httpx", "aiohttp", "httpx-aiohttp"], required=True
    )
    parser.add_argument("--upstream", default="http://127.0.0.1:9100/v1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument(
        "--uvloop", action="store_true", help="run on uvloop (toolwire serve does not)"
    )
    args = parser.parse_args()
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            make_app(args.mode, args.upstream, args.chunks),
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
        )
    )
    if args.uvloop:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(server.serve())
    else:
        asyncio.run(server.serve())


if __name__ == "__main__":
    main()
