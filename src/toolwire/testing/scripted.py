"""`ScriptedUpstream`: an OpenAI-compatible HTTP server that plays scripted turns, on loopback
or in process.

It speaks `/v1/chat/completions` (streamed or not), `/v1/models`, and vLLM's `/version` when
given one. Started (`with` /
`async with` / `start()`), it serves real sockets, so whatever talks to it (toolwire, the
`openai` client, your own agent) runs its true HTTP path. Made with `ScriptedUpstream.in_process()`
it opens no socket: `.transport` is an httpx transport over the same app, and `.adapter()` a
`ChatCompletionsUpstream` on that transport, so the same scripts play in microseconds. Each POST
to `/chat/completions` takes the next scripted turn:

- `Reply(text=..., tool_calls=[(name, args)], reasoning=...)`: an ordinary answer, streamed as
  chunks or returned whole, whichever the request asked for;
- `Chunks([...])`: exactly these stream chunks (dicts are sent as `data:` JSON, `str`/`bytes` go
  out verbatim), with an optional delay between them, a missing `[DONE]`, or a disconnect;
- `Body(...)`: exactly this body and status (HTTP errors, `Retry-After`, a whole completion).

With `default=` a turn (e.g. `Reply(text="ok")`), it answers every request once the script has
run out, so it can stand behind a fuzzer; without one it answers HTTP 500 then.

Every request received is recorded, decoded, in `.requests`. The app is a bare ASGI callable
rather than Starlette: it must be cheap (benchmarks use it as the mock upstream) and it needs to
break connections on purpose. In process, a broken connection (`disconnect_after`) reaches the
client as the `httpx.RemoteProtocolError` a real one gives, after the chunks before it.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import orjson
import uvicorn

from toolwire.testing.asgi import StreamingASGITransport
from toolwire.wire.chat import (
    ChatChunk,
    ChatCompletion,
    ChatDelta,
    ChatMessage,
    ChatUsage,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

Scope = dict[str, Any]


@dataclass(slots=True)
class Reply:
    """A well-formed answer, shaped to the request: SSE chunks if it asked to stream."""

    text: str = ""
    tool_calls: Sequence[tuple[str, Mapping[str, object] | str]] = ()
    """(name, arguments): the arguments as an object (any JSON) or as the exact text."""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    delay: float = 0.0
    call_ids: Sequence[str] = ()
    """The calls' ids, in order (default `call_<index>_<name>`): real servers give each call
    of a conversation its own id, and some clients rely on it."""

    def call_id(self, index: int, name: str) -> str:
        return self.call_ids[index] if index < len(self.call_ids) else f"call_{index}_{name}"


@dataclass(slots=True)
class Chunks:
    """Exactly these stream chunks. `done=False` omits `data: [DONE]`; `disconnect_after=n`
    drops the connection after n chunks; `delay` waits before each chunk. `gate` (with
    `gate_at=n`): before chunk n the stream waits until the test sets the event (at most
    `gate_timeout` seconds) and appends whether it was set to `gate_opened`, so a test can
    prove its client saw something before the upstream went on (order, not timing)."""

    chunks: Sequence[Mapping[str, object] | str | bytes]
    """Chunks as objects (any JSON: a test may send a malformed one on purpose), or frames as
    text or bytes, sent as they are."""
    delay: float = 0.0
    done: bool = True
    disconnect_after: int | None = None
    status: int = 200
    gate: threading.Event | None = None
    gate_at: int = 0
    gate_timeout: float = 10.0
    gate_opened: list[bool] = field(default_factory=list)


@dataclass(slots=True)
class Body:
    """Exactly this body and status, e.g. `Body({"error": ...}, status=429,
    headers={"retry-after": "1"})`."""

    body: Mapping[str, object] | str | bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Turn = Reply | Chunks | Body


@dataclass(slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _SignallingServer(uvicorn.Server):
    """A uvicorn server that says when it is listening, so `start()` returns a usable URL."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self._ready.set()


class _Disconnect(Exception):
    """Raised inside the app to make the server drop the connection mid-response."""


class ScriptedUpstream:
    """Start with `async with ScriptedUpstream([...]) as upstream:` (or `with`); then point a
    client at `upstream.base_url`. Runs in its own thread, so blocking clients work too.

    `ScriptedUpstream.in_process([...])` opens no socket and starts no thread (`with` and
    `async with` do nothing then): give `.transport` to an `httpx.AsyncClient`, or use
    `.adapter()`. The in-process path needs a running event loop (async clients only)."""

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        models: Sequence[str] = ("scripted-model",),
        host: str = "127.0.0.1",
        port: int = 0,
        default: Turn | Callable[[Any], Turn] | None = None,
        version: str | None = None,
    ) -> None:
        """`version`: answer `GET /version` as vLLM does (`{"version": ...}`); None: 404."""
        self.version = version
        self._turns: collections.deque[Turn] = collections.deque(turns)
        #: played whenever no scripted turn is left (None: answer HTTP 500 then); a function
        #: gets the decoded request body and picks the turn, for clients whose requests come
        #: in no fixed order (a concurrent test suite)
        self.default = default
        self.models = list(models)
        self.requests: list[RecordedRequest] = []
        self._host = host
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = port
        self._in_process = False
        self._transport: StreamingASGITransport | None = None

    @classmethod
    def in_process(
        cls,
        turns: Iterable[Turn] = (),
        *,
        models: Sequence[str] = ("scripted-model",),
        version: str | None = None,
    ) -> ScriptedUpstream:
        """A scripted upstream reached through `.transport` only: no socket, no thread."""
        upstream = cls(turns, models=models, version=version)
        upstream._in_process = True
        return upstream

    @property
    def transport(self) -> StreamingASGITransport:
        """An httpx transport that calls this app in process (streams chunk by chunk)."""
        if self._transport is None:
            self._transport = StreamingASGITransport(self)
        return self._transport

    def adapter(self, **overrides: Any) -> ChatCompletionsUpstream:
        """A `ChatCompletionsUpstream` on this upstream: over `.transport` when in process,
        over the socket when started. `overrides` are `ChatCompletionsConfig` fields."""
        from toolwire.upstream.chat_completions import ChatCompletionsUpstream

        transport = self.transport if self._in_process else None
        return ChatCompletionsUpstream(self.base_url, transport=transport, **overrides)

    # -- scripting ----------------------------------------------------------------------

    def add(self, *turns: Turn) -> None:
        self._turns.extend(turns)

    def reset(self) -> None:
        """Forget the turns not yet played and the requests recorded."""
        self._turns.clear()
        self.requests.clear()

    @property
    def remaining(self) -> int:
        return len(self._turns)

    @property
    def base_url(self) -> str:
        if self._in_process:
            return "http://scripted-upstream.invalid/v1"
        return f"http://{self._host}:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> ScriptedUpstream:
        if self._in_process:
            return self
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP.
        # Without it, Nagle holds each small SSE write until the client ACKs the one before,
        # and a client's delayed ACK stalls the start of every stream on a kept-alive
        # connection by ~40 ms (real servers bind through getaddrinfo and get it right).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self._host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self, log_level="critical", lifespan="off", access_log=False, timeout_keep_alive=30
        )
        ready = threading.Event()
        self._server = server = _SignallingServer(config, ready)

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            finally:
                ready.set()

        self._thread = threading.Thread(target=run, name="scripted-upstream", daemon=True)
        self._thread.start()
        ready.wait(10)
        if not server.started:
            raise RuntimeError("ScriptedUpstream failed to start")
        return self

    def stop(self) -> None:
        if self._server is not None:
            # Do not wait for scripted delays still sleeping in open connections.
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedUpstream:
        if self._in_process:
            return self
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._transport is not None:
            await self._transport.shutdown()  # scripted delays still sleeping in process
        if not self._in_process:
            await asyncio.to_thread(self.stop)

    # -- the ASGI app -------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path: str = scope["path"]
        body: Any = None
        if raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.requests.append(RecordedRequest(scope["method"], path, headers, body))
        if path.endswith("/models") and scope["method"] == "GET":
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"}
                for m in self.models
            ]
            await _send_json(send, 200, {"object": "list", "data": data})
            return
        if path == "/version" and scope["method"] == "GET" and self.version is not None:
            await _send_json(send, 200, {"version": self.version})
            return
        if not path.endswith("/chat/completions") or scope["method"] != "POST":
            await _send_json(
                send, 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
            )
            return
        if not self._turns and self.default is None:
            await _send_json(
                send,
                500,
                {
                    "error": {
                        "message": "ScriptedUpstream: no scripted turn left",
                        "type": "scripted",
                    }
                },
            )
            return
        if self._turns:
            turn: Turn | None = self._turns.popleft()
        elif callable(self.default):
            turn = self.default(body)
        else:
            turn = self.default
        assert turn is not None
        wants_stream = isinstance(body, dict) and bool(body.get("stream"))
        model = body.get("model", "scripted-model") if isinstance(body, dict) else "scripted-model"
        if isinstance(turn, Reply):
            if turn.delay:
                await asyncio.sleep(turn.delay)
            if wants_stream:
                await self._stream(send, Chunks(reply_chunks(turn, model)))
            else:
                await _send_json(send, 200, reply_body(turn, model))
        elif isinstance(turn, Chunks):
            await self._stream(send, turn)
        else:
            if turn.delay:
                await asyncio.sleep(turn.delay)
            body = turn.body
            if isinstance(body, bytes):
                payload = body
            elif isinstance(body, str):
                payload = body.encode()
            else:
                payload = orjson.dumps(body)
            headers = {"content-type": "application/json", **turn.headers}
            await _send_raw(send, turn.status, payload, headers)

    async def _stream(self, send: Any, turn: Chunks) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": turn.status,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        for position, chunk in enumerate(turn.chunks):
            if turn.disconnect_after is not None and position >= turn.disconnect_after:
                raise _Disconnect
            if turn.delay:
                await asyncio.sleep(turn.delay)
            if turn.gate is not None and position == turn.gate_at:
                opened = await asyncio.to_thread(turn.gate.wait, turn.gate_timeout)
                turn.gate_opened.append(opened)
            await send({"type": "http.response.body", "body": _frame(chunk), "more_body": True})
        if turn.disconnect_after is not None and turn.disconnect_after <= len(turn.chunks):
            raise _Disconnect
        tail = b"data: [DONE]\n\n" if turn.done else b""
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def _frame(chunk: Mapping[str, object] | str | bytes) -> bytes:
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, str):
        return chunk.encode()
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


async def _send_json(send: Any, status: int, body: Mapping[str, object]) -> None:
    await _send_raw(send, status, orjson.dumps(body), {"content-type": "application/json"})


async def _send_raw(send: Any, status: int, body: bytes, headers: dict[str, str]) -> None:
    encoded = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": encoded})
    await send({"type": "http.response.body", "body": body})


def _arguments_text(arguments: Mapping[str, object] | str) -> str:
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def reply_chunks(reply: Reply, model: str = "scripted-model") -> list[ChatChunk]:
    """A `Reply` as the chunk sequence a well-behaved server streams."""

    def base() -> ChatChunk:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }

    def chunk(delta: ChatDelta, finish: str | None = None) -> ChatChunk:
        out = base()
        out["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning:
        chunks.append(chunk({"reasoning_content": reply.reasoning}))
    text = reply.text
    step = max(1, len(text) // 3) if text else 1
    for start in range(0, len(text), step):
        chunks.append(chunk({"content": text[start : start + step]}))
    for index, (name, arguments) in enumerate(reply.tool_calls):
        args = _arguments_text(arguments)
        head: ToolCallDelta = {
            "index": index,
            "id": reply.call_id(index, name),
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            if piece:
                chunks.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    chunks.append(chunk({}, finish))
    last = base()
    last["choices"] = []
    last["usage"] = _usage(reply)
    chunks.append(last)
    return chunks


def _usage(reply: Reply) -> ChatUsage:
    if not reply.usage:
        return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return cast(ChatUsage, reply.usage)  # a test's own counts, as it wrote them


def reply_body(reply: Reply, model: str = "scripted-model") -> ChatCompletion:
    """A `Reply` as a whole (non-streamed) chat completion."""
    message: ChatMessage = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": reply.call_id(i, name),
                "type": "function",
                "function": {"name": name, "arguments": _arguments_text(args)},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(reply),
    }
