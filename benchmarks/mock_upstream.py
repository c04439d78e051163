"""A cheap mock OpenAI upstream for the gateway benchmark: answers from pre-encoded bytes.

A raw asyncio HTTP/1.1 server (uvloop when importable) with keep-alive. Every answer is built
once at start-up; a request costs a header scan, two regex searches on the body and one
`transport.write`. Stdlib only, so any Python >= 3.11 runs it.

    python benchmarks/mock_upstream.py --port 9100 [--chunks 500]

Routes (with or without the `/v1` prefix):

- `POST /chat/completions`: the body's `model` picks the scenario, its `stream` flag the shape.
  - model `mock-stream` (or any name containing `stream`): the long stream of workload (b),
    `--chunks` SSE events (default 500) carrying one call of `write_file` whose arguments (a
    path and a file's content) are split across the chunks, then `finish_reason: tool_calls`, a usage chunk and `data: [DONE]`.
  - model `mock-parallel-N`: N parallel calls of `get_weather` in one answer (or stream).
  - any other model: one tool call, `get_weather({"city": "Paris", "unit": "celsius"})`; as a
    `chat.completion` body when `stream` is false, as a short SSE stream (role, call header,
    four argument pieces, finish, usage, `[DONE]`) when it is true.
  Streams are sent with chunked transfer encoding, one HTTP chunk per SSE event, as uvicorn /
  vLLM do, but written in one go.
- `POST /responses`: a native Responses API answer (a `function_call` output item), JSON or SSE:
  the "direct" baseline of workload (d).
- `GET /models`, `GET /health`, and `GET /stats`: per listening port, connections accepted and
  requests answered (chat/responses, streamed/JSON). `--extra-ports` adds listeners, so each
  gateway can have its own port and the harness can see what each sends upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal

MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"]*)"')
STREAM_RE = re.compile(rb'"stream"\s*:\s*true')

TOOL_NAME = "get_weather"
# The long call's tool: its arguments (`long_arguments`: a path and a content) fit `write_file`'s
# schema in run.py's tools, as a model's would; named `get_weather`, the gateway would judge the
# call a misfit and re-ask the model, streaming the 500 chunks twice (workloads (b) and (f)).
LONG_TOOL_NAME = "write_file"
SHORT_ARGS = '{"city": "Paris", "unit": "celsius"}'
CREATED = 1_700_000_000


def long_arguments(pieces: int) -> tuple[str, list[str]]:
    """A JSON object whose text splits into `pieces` small deltas (about 4 characters each)."""
    payload = json.dumps(
        {
            "path": "src/toolwire/upstream/assembler.py",
            "content": "".join(
                f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(40)
            ),
        }
    )
    step = -(-len(payload) // pieces)
    parts = [payload[k : k + step] for k in range(0, len(payload), step)]
    parts += [""] * (pieces - len(parts))
    return payload, parts


def completion_body(model: str, arguments: str, calls: int = 1, name: str = TOOL_NAME) -> bytes:
    """A `chat.completion` with `calls` parallel calls of tool `name`, ids `call_mock_0001`..."""
    body = {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_mock_{k + 1:04d}",
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                        for k in range(calls)
                    ],
                },
                "finish_reason": "tool_calls",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 42, "completion_tokens": 17, "total_tokens": 59},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def stream_events(
    model: str, pieces: list[str], calls: int = 1, name: str = TOOL_NAME
) -> list[bytes]:
    """SSE frames: role, then per call of tool `name` (`calls` in parallel, indexes 0..) its
    header and one frame per argument piece; finish, usage, [DONE]."""
    base = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
    }

    def chunk(delta: dict, finish: str | None = None, **extra: object) -> bytes:
        payload = {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            **extra,
        }
        return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    frames = [chunk({"role": "assistant", "content": None})]
    for k in range(calls):
        frames.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": k,
                            "id": f"call_mock_{k + 1:04d}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        frames += [
            chunk({"tool_calls": [{"index": k, "function": {"arguments": p}}]}) for p in pieces
        ]
    frames.append(chunk({}, "tool_calls"))
    usage = {
        **base,
        "choices": [],
        "usage": {
            "prompt_tokens": 42,
            "completion_tokens": len(pieces) + 2,
            "total_tokens": len(pieces) + 44,
        },
    }
    frames.append(b"data: " + json.dumps(usage, separators=(",", ":")).encode() + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return frames


def responses_object(model: str) -> dict:
    return {
        "id": "resp_mock",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": [
            {
                "id": "fc_mock",
                "type": "function_call",
                "status": "completed",
                "call_id": "call_mock_0001",
                "name": TOOL_NAME,
                "arguments": SHORT_ARGS,
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 42, "output_tokens": 17, "total_tokens": 59},
    }


def responses_events(model: str) -> list[bytes]:
    done = responses_object(model)
    item = done["output"][0]
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    added = {**item, "arguments": "", "status": "in_progress"}
    events: list[dict] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
    ]
    for piece in ('{"city": ', '"Paris", ', '"unit": ', '"celsius"}'):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_mock",
                "output_index": 0,
                "delta": piece,
            }
        )
    events.append(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_mock",
            "output_index": 0,
            "arguments": SHORT_ARGS,
        }
    )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": done})
    frames = []
    for n, event in enumerate(events):
        event["sequence_number"] = n
        frames.append(
            b"event: "
            + event["type"].encode()
            + b"\ndata: "
            + json.dumps(event, separators=(",", ":")).encode()
            + b"\n\n"
        )
    return frames


def http_json(body: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: keep-alive\r\n\r\n"
        + body
    )


def http_sse(frames: list[bytes]) -> bytes:
    out = [
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
    ]
    for frame in frames:
        out.append(b"%x\r\n" % len(frame) + frame + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


class Answers:
    """Every answer, pre-encoded, keyed by (model, stream); unknown models get encoded once."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self._cache: dict[tuple[bytes, bool, bool], bytes] = {}
        self.long_payload, self.long_pieces = long_arguments(chunks - 4)
        self.short_pieces = ['{"city": ', '"Paris", ', '"unit": ', '"celsius"}']
        self.models = http_json(
            json.dumps(
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": CREATED, "owned_by": "mock"}
                        for m in ("mock-tool", "mock-stream")
                    ],
                }
            ).encode()
        )
        self.health = http_json(b'{"status":"ok"}')
        self.not_found = http_json(
            b'{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}',
            b"404 Not Found",
        )

    def get(self, model: bytes, stream: bool, responses: bool) -> bytes:
        key = (model, stream, responses)
        answer = self._cache.get(key)
        if answer is None:
            name = model.decode(errors="replace")
            if responses:
                answer = (
                    http_sse(responses_events(name))
                    if stream
                    else http_json(json.dumps(responses_object(name)).encode())
                )
            elif b"parallel" in model:  # mock-parallel-N: N calls in one turn
                calls = int(model.rsplit(b"-", 1)[1])
                answer = (
                    http_sse(stream_events(name, self.short_pieces, calls))
                    if stream
                    else http_json(completion_body(name, SHORT_ARGS, calls))
                )
            elif b"stream" in model:
                answer = (
                    http_sse(stream_events(name, self.long_pieces, name=LONG_TOOL_NAME))
                    if stream
                    else http_json(completion_body(name, self.long_payload, name=LONG_TOOL_NAME))
                )
            else:
                answer = (
                    http_sse(stream_events(name, self.short_pieces))
                    if stream
                    else http_json(completion_body(name, SHORT_ARGS))
                )
            if len(self._cache) < 64:
                self._cache[key] = answer
        return answer


def new_stats() -> dict[str, int]:
    return {
        "connections": 0,
        "chat_stream": 0,
        "chat_json": 0,
        "responses_stream": 0,
        "responses_json": 0,
        "other": 0,
    }


class MockProtocol(asyncio.Protocol):
    __slots__ = ("answers", "buffer", "stats", "transport")

    def __init__(self, answers: Answers, stats: dict[str, int]) -> None:
        self.answers = answers
        self.stats = stats
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.stats["connections"] += 1

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buffer[:end]
            lower = head.lower()
            start = end + 4
            cl = lower.find(b"\r\ncontent-length:")
            if cl >= 0:
                stop = lower.find(b"\r\n", cl + 2)
                length = int(lower[cl + 17 : stop if stop >= 0 else len(lower)])
                if len(buffer) < start + length:
                    break
                body = buffer[start : start + length]
                buffer = buffer[start + length :]
            elif b"\r\ntransfer-encoding: chunked" in lower:
                parsed = _dechunk(buffer, start)
                if parsed is None:
                    break
                body, consumed = parsed
                buffer = buffer[consumed:]
            else:
                body = b""
                buffer = buffer[start:]
            self.respond(head, body)
        self.buffer = buffer

    def respond(self, head: bytes, body: bytes) -> None:
        line = head[: head.find(b"\r\n")] if b"\r\n" in head else head
        parts = line.split(b" ")
        method, path = parts[0], parts[1] if len(parts) > 1 else b"/"
        path = path.split(b"?", 1)[0]
        if path.startswith(b"/v1/"):
            path = path[3:]
        answers = self.answers
        if method == b"POST" and path in (b"/chat/completions", b"/responses"):
            found = MODEL_RE.search(body)
            model = found.group(1) if found else b"mock-tool"
            stream = STREAM_RE.search(body) is not None
            responses = path == b"/responses"
            answer = answers.get(model, stream, responses)
            self.stats[
                ("responses_" if responses else "chat_") + ("stream" if stream else "json")
            ] += 1
        elif path == b"/models":
            answer = answers.models
        elif path == b"/health":
            answer = answers.health
        elif path == b"/stats":
            answer = http_json(json.dumps(STATS).encode())
        else:
            answer = answers.not_found
            self.stats["other"] += 1
        assert self.transport is not None
        self.transport.write(answer)


def _dechunk(buffer: bytes, start: int) -> tuple[bytes, int] | None:
    parts: list[bytes] = []
    pos = start
    while True:
        eol = buffer.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(buffer[pos:eol].split(b";")[0], 16)
        if size == 0:
            trailer = buffer.find(b"\r\n\r\n", eol)
            if buffer[eol : eol + 4] == b"\r\n\r\n":
                return b"".join(parts), eol + 4
            if trailer < 0:
                return None
            return b"".join(parts), trailer + 4
        if len(buffer) < eol + 2 + size + 2:
            return None
        parts.append(buffer[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2


STATS: dict[int, dict[str, int]] = {}


async def main(host: str, ports: list[int], chunks: int) -> None:
    """One listener per port, all answering alike; `GET /stats` counts connections and requests
    per listening port (give each gateway its own port to see what it sends upstream)."""
    answers = Answers(chunks)
    loop = asyncio.get_running_loop()
    servers = []
    for port in ports:
        stats = STATS.setdefault(port, new_stats())
        servers.append(
            await loop.create_server(
                lambda stats=stats: MockProtocol(answers, stats),
                host,
                port,
                backlog=1024,
                reuse_address=True,
            )
        )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"mock upstream on {', '.join(f'http://{host}:{p}/v1' for p in ports)} ({chunks}-chunk stream)",
        flush=True,
    )
    await stop.wait()
    for server in servers:
        server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument(
        "--extra-ports",
        default="",
        help="more ports to listen on, comma-separated (stats are kept per port)",
    )
    parser.add_argument(
        "--chunks", type=int, default=500, help="SSE events in the long stream (>= 8)"
    )
    args = parser.parse_args()
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        ports = [args.port, *(int(p) for p in args.extra_ports.split(",") if p.strip())]
        runner.run(main(args.host, ports, max(args.chunks, 8)))
