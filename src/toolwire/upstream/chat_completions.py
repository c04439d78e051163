"""The adapter for OpenAI-compatible `/v1/chat/completions` servers.

One pooled HTTP client per upstream (aiohttp; httpx through an injected transport: see
upstream/transport.py). Streams SSE (or not), feeds every chunk to the
`StreamAssembler`, and owns the fault handling: typed HTTP errors, bounded retries with backoff
before anything was yielded, timeouts (an idle deadline on streams: no event for
`idle_timeout` seconds, however many bytes trickle in), streams that end early, and servers
that refuse to stream tool calls (remembered per upstream for `fallback_seconds`, then tried
again: a proxy's one bad answer never turns streaming off for good).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Literal, TypedDict, cast
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
from pydantic import BaseModel, Field, SecretStr

from toolwire.errors import (
    ConfigError,
    UpstreamConnectionError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamStreamDropped,
    UpstreamStreamError,
    UpstreamTimeoutError,
    UpstreamTooLargeError,
)
from toolwire.trace_context import trace_headers
from toolwire.transcript import ToolSpec
from toolwire.upstream.assembler import StreamAssembler, matched_stop, usage_from
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.events import (
    FirstToken,
    ModelEvent,
    Repair,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    UpstreamRetry,
    coalesce,
)
from toolwire.upstream.lowering import chat_messages, chat_tool_choice, chat_tools
from toolwire.upstream.piece_template import PieceTemplate
from toolwire.upstream.retry import RETRYABLE_STATUSES, RetryPolicy, parse_retry_after
from toolwire.upstream.scrub import UpstreamScrubber
from toolwire.upstream.strict import StrictSupport, StrictTools
from toolwire.upstream.transport import Answer, sender
from toolwire.wire.chat import ChatRequest
from toolwire.wire.sse import SSEDecoder, SSEEventTooLarge

MiB = 1024 * 1024
#: How much of an error answer is read (the rest is dropped): enough for any real message.
_ERROR_BODY_BYTES = 64 * 1024

_STREAM_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
_JSON_HEADERS = {"content-type": "application/json"}

_STREAM_REFUSALS = (
    "streaming tool choice is not supported",
    "streaming is not supported with tools",
    "tool calls are not supported in streaming",
    "stream is not supported",
    "cannot use tools with stream",
)


class ChatCompletionsConfig(BaseModel):
    """How to reach one chat-completions server. Every field has a sensible default."""

    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    api_key: SecretStr | None = None
    api_key_env: str | None = Field(default=None, description="read the key from this variable")
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    max_retries: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    max_connections: int = 256
    name: str = "default"
    max_event_bytes: int = Field(
        default=8 * MiB, gt=0, description="the largest stream event (SSE data) accepted"
    )
    max_response_bytes: int = Field(
        default=64 * MiB, gt=0, description="the largest answer accepted, streamed or not"
    )
    vision: bool = Field(
        default=True,
        description="the model can see images: image parts are sent to it (else a one-line note)",
    )
    reasoning_replay: Literal["auto", "reasoning_content", "reasoning", "off"] = Field(
        default="auto",
        description="the field an assistant turn's reasoning goes back to the model in: `auto` "
        "is the field the upstream writes it in (`reasoning_content` until it has); `off` "
        "sends none (for servers that refuse unknown message fields)",
    )
    idle_timeout: float = Field(
        default=120.0,
        gt=0,
        description="seconds a stream may go without one event (bytes that never complete an "
        "event do not count) before the turn fails",
    )
    fallback_seconds: float = Field(
        default=300.0,
        ge=0,
        description="how long a fallback learned from this upstream (not streaming tool calls) "
        "holds before streaming is tried again",
    )
    strict_tools: StrictTools = Field(
        default="auto",
        description="whether this upstream enforces a `strict` tool's schema (then `strict` is "
        "passed on, and such calls stream live): `auto` learns it (vLLM >= 0.27 from its "
        "/version, OpenAI's API by its host); `enforced` / `ignored` say it (upstream/strict.py)",
    )

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if value is None:
                raise ConfigError(f"the environment variable {self.api_key_env} is not set")
            return value
        return None


class ChatCompletionsUpstream:
    """An `Upstream` speaking OpenAI chat completions."""

    def __init__(
        self,
        config: ChatCompletionsConfig | str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **overrides: Any,
    ) -> None:
        """`transport`: send every request through this httpx transport instead of opening
        connections (tests: `ScriptedUpstream.in_process().transport`, `httpx.MockTransport`).
        Connection limits and TLS settings do not apply to it; timeouts are passed to it in each
        request's extensions, as httpx does."""
        if isinstance(config, str):
            config = ChatCompletionsConfig(base_url=config, **overrides)
        self.config = config
        self.name = config.name
        self.retry = RetryPolicy(config.max_retries, config.initial_backoff, config.max_backoff)
        self._no_streamed_tools_until = 0.0  # monotonic; a fallback learned from this upstream
        self._reasoning_field = "reasoning_content"  # until the upstream writes reasoning
        headers = {"accept": "application/json", **config.headers}
        key = config.resolved_api_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        # Every error leaving this adapter goes through it: servers quote the key they got.
        self._scrubber = UpstreamScrubber([key])
        base = config.base_url.rstrip("/")
        self._completions_url = base + "/chat/completions"
        self._models_url = base + "/models"
        root = base.removesuffix("/v1")
        self._version_url = root + "/version"
        self._strict = StrictSupport(config.strict_tools, base, config.fallback_seconds)
        # Tokenizers (loop/compaction.py counts prompts with them): llama-cpp-python's, then
        # the `/tokenize` of llama.cpp's server and vLLM's (SGLang's too).
        self._tokenizers = [(root + "/extras/tokenize/count", False), (root + "/tokenize", True)]
        self._no_tokenizer_until = 0.0  # monotonic: none answered; estimate until then
        # aiohttp over real sockets, httpx through an injected transport (upstream/transport.py)
        self._sender = sender(
            headers,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            max_connections=config.max_connections,
            transport=transport,
        )

    @property
    def refuses_streamed_tools(self) -> bool:
        """Whether tool calls are asked for without streaming: for `fallback_seconds` after
        this upstream refused to stream them (or answered a stream with nothing)."""
        return time.monotonic() < self._no_streamed_tools_until

    @refuses_streamed_tools.setter
    def refuses_streamed_tools(self, value: bool) -> None:
        self._no_streamed_tools_until = (
            time.monotonic() + self.config.fallback_seconds if value else 0.0
        )

    @property
    def enforces_strict(self) -> bool:
        """This upstream constrains calls of `strict` tools to their schema (as far as toolwire
        knows: `upstream/strict.py`); the loop then streams such calls live."""
        return self._strict.enforced

    def _strict_probe_due(self, request: TurnRequest) -> bool:
        """Whether `_learn_strict` asks now: a request has a `strict` tool (not before: most
        never do), first and again after `fallback_seconds`."""
        return self._strict.needs_probe() and any(t.strict for t in request.tools or ())

    async def _learn_strict(self) -> None:
        """Ask the upstream its version (`_strict_probe_due` says when)."""
        try:
            status, content = await self._send("GET", self._version_url, None, most=64 * 1024)
        except UpstreamError:
            self._strict.learn(None)
            return
        self._strict.learn(content if status == 200 else None)

    async def aclose(self) -> None:
        await self._sender.aclose()

    async def list_models(self) -> list[dict[str, object]]:
        try:
            _, content = await self._send("GET", self._models_url, None)
        except UpstreamError as exc:
            raise self._scrubber.error(exc) from exc.__cause__
        try:
            data = orjson.loads(content).get("data", [])
        except (orjson.JSONDecodeError, AttributeError) as exc:
            raise UpstreamError("the upstream's /models answer is not JSON") from exc
        return [m for m in data if isinstance(m, dict)]

    async def count_tokens(self, model: str, text: str) -> int | None:
        """Tokens in `text` by the model's own tokenizer, where the server offers one (the
        first that answers is kept); None when none does (then for `fallback_seconds`)."""
        if time.monotonic() < self._no_tokenizer_until:
            return None
        for url, named in list(self._tokenizers):
            body: dict[str, str] = {"input": text}
            if named:
                body = {"model": model, "prompt": text, "content": text}
            try:
                _, content = await self._send("POST", url, body)
                count = _token_count(orjson.loads(content))
            except (UpstreamError, orjson.JSONDecodeError):
                count = None
            if count is not None:
                self._tokenizers = [(url, named)]
                return count
        self._no_tokenizer_until = time.monotonic() + self.config.fallback_seconds
        return None

    def request_body(self, request: TurnRequest, *, stream: bool) -> dict[str, object]:
        """The request: the fields toolwire sets (`ChatRequest`), then the door's extras."""
        body: ChatRequest = {
            "model": request.model,
            "messages": chat_messages(
                request.transcript,
                vision=self.config.vision,
                reasoning_field=self.reasoning_field(),
            ),
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = _tools_json(request.tools, self.enforces_strict)  # type: ignore[typeddict-item]
            if request.tool_choice is not None:
                body["tool_choice"] = chat_tool_choice(request.tool_choice)
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        sampling = request.sampling
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if sampling.max_output_tokens is not None:
            body["max_tokens"] = sampling.max_output_tokens
        if sampling.response_format is not None:
            body["response_format"] = sampling.response_format
        return {**body, **(sampling.extra_body or {})}

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ModelEvent]:
        async for batch in self.stream_turn_batches(request):
            for event in batch:
                yield event

    def stream_turn_batches(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """`stream_turn`, in lists: the events of one network read together. The driver reads
        a turn this way when an adapter offers it (`upstream/base.py`): each event crossing
        three async generators cost more than decoding it (~3 µs an argument delta). A turn
        asked without streaming is one generator deep (`_whole_turn`)."""
        if request.tools and request.parallel_tool_calls is False:
            return self._first_call_only(request)
        if request.stream:
            return self._turn(request)
        return self._whole_turn(request, _declared(request))

    async def _first_call_only(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """A turn asked with `parallel_tool_calls: false`. The server may ignore the flag (many
        do): one call per turn is kept, the first; the model sees its result and can ask for
        the next in the next turn."""
        first: list[int] = []
        async for batch in self._turn(request):
            yield [event for event in batch if _first_call(event, first)]

    async def _turn(self, request: TurnRequest) -> AsyncIterator[list[ModelEvent]]:
        """A turn asked with streaming (or without it, once the upstream refused to stream
        it); its errors are scrubbed here: it is `stream_turn_batches`' own generator."""
        try:
            declared = _declared(request)
            if self._strict_probe_due(request):
                await self._learn_strict()
            stream = request.stream and not (request.tools and self.refuses_streamed_tools)
            attempt = 0
            while stream:
                yielded = False
                try:
                    async for batch in self._streamed(request, declared):
                        yielded = yielded or any(not isinstance(e, UpstreamRetry) for e in batch)
                        yield batch
                    return
                except UpstreamStreamDropped:
                    # A stream that broke before its first event (a keep-alive connection the
                    # server had closed, a restarting server) is retried like a refused connect;
                    # once events went out, a retry would duplicate them.
                    delay = None if yielded else self.retry.delay(attempt)
                    if delay is None:
                        raise
                    yield [UpstreamRetry("stream_dropped", attempt + 1, delay)]
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                except UpstreamHTTPError as exc:
                    if not (request.tools and _refuses_streamed_tools(exc)):
                        raise
                    self.refuses_streamed_tools = True
                    yield [
                        Repair("streaming_refused"),
                        UpstreamRetry("streaming_refused", attempt + 1, 0.0),
                    ]
                    break
                except _EmptyStream:
                    # llama-cpp-python answers 200 and then nothing when it cannot stream a tool
                    # call, or when it fails before its first chunk (a prompt over its context
                    # window): nothing was yielded, so asking again without streaming is safe, and
                    # the whole answer says what went wrong with a real status.
                    notes: list[ModelEvent] = []
                    if request.tools:
                        self.refuses_streamed_tools = True
                        notes.append(Repair("streaming_refused"))
                    yield [*notes, UpstreamRetry("empty_stream", attempt + 1, 0.0)]
                    break
            async for batch in self._whole_turn(request, declared, probed=True):
                yield batch
        except UpstreamError as exc:
            raise self._scrubber.error(exc) from exc.__cause__

    async def _whole_turn(
        self, request: TurnRequest, declared: list[str] | None, *, probed: bool = False
    ) -> AsyncIterator[list[ModelEvent]]:
        """The turn asked without streaming: its events in one list, after the retries'
        notes. Its errors are scrubbed here: it is `stream_turn_batches`' own generator."""
        notes: list[ModelEvent] = []
        try:
            if not probed and self._strict_probe_due(request):
                await self._learn_strict()
            events = await self._whole(request, declared, notes)
        except UpstreamError as exc:
            if notes:  # the retries made before giving up are part of the story
                yield notes
            raise self._scrubber.error(exc) from exc.__cause__
        yield events

    async def _whole(
        self, request: TurnRequest, declared: list[str] | None, notes: list[ModelEvent]
    ) -> list[ModelEvent]:
        # A whole answer is parsed in one piece, like one stream event: both limits hold.
        most = min(self.config.max_response_bytes, self.config.max_event_bytes)
        status, content = await self._send(
            "POST", self._completions_url, self.request_body(request, stream=False), notes, most
        )
        notes.append(FirstToken())
        try:
            body = orjson.loads(content)
            choice = body["choices"][0]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise UpstreamError(
                "the upstream answered without a choice",
                upstream_status=status,
                upstream_body=content[:2000].decode("utf-8", "replace"),
            ) from exc
        assembler = StreamAssembler(declared)
        events = notes + assembler.feed_message(
            choice.get("message") or {}, choice.get("finish_reason"), matched_stop(choice)
        )
        if body.get("usage"):
            events.append(usage_from(body["usage"]))
        if assembler.argument_chars() > OFF_LOOP_FINISH_CHARS:  # as `finished`, inline
            events.extend(await asyncio.to_thread(assembler.finish))
        else:
            events.extend(assembler.finish())
        self._learn_reasoning_field(assembler)
        return events

    async def _streamed(
        self, request: TurnRequest, declared: list[str] | None
    ) -> AsyncIterator[list[ModelEvent]]:
        body = orjson.dumps(self.request_body(request, stream=True))
        notes: list[ModelEvent] = []
        try:
            response = await self._open_stream(body, notes)
        except UpstreamError:
            if notes:  # the retries made before giving up are part of the story
                yield notes
            raise
        if "text/html" in response.headers.get("content-type", ""):
            # A proxy's or portal's page, not an event stream: an error, not a capability.
            try:
                page = await _read_bounded(response, _ERROR_BODY_BYTES, truncate=True)
            except httpx.HTTPError:  # the page is only quoted: its error is the stream's
                page = b""
            finally:
                await response.aclose()
            raise UpstreamStreamError(
                f"the upstream answered HTTP {response.status_code} with an HTML page instead "
                "of an event stream",
                upstream_status=response.status_code,
                upstream_body=(page or b"")[:2000].decode("utf-8", "replace"),
            )
        if notes:
            yield notes
        assembler = StreamAssembler(declared)
        decoder = SSEDecoder(self.config.max_event_bytes)
        template = PieceTemplate()  # argument chunks read by their piece alone
        loads = orjson.loads
        done = False
        total = 0
        most = self.config.max_response_bytes
        first = True
        saw_call = False
        idle = self.config.idle_timeout
        clock = asyncio.get_running_loop().time
        idle_until = [clock() + idle]  # moved on by every event
        chunks = response.aiter_raw()
        # a body all in already (plain_http's `ended`, a short answer) is read with no wait:
        # no idle timer to set, and one generator less between the reads and the turn
        ended = getattr(response, "ended", False)
        reads = (
            cast(AsyncGenerator[bytes, None], chunks) if ended else _until(chunks, idle_until, idle)
        )
        try:
            async for raw in reads:
                total += len(raw)
                if total > most:
                    raise _too_large_answer(most)
                batch: list[ModelEvent] = []
                try:
                    decoded = decoder.feed_data(raw)
                    if decoded:
                        idle_until[0] = clock() + idle
                    for data in decoded:
                        if data == "[DONE]":
                            done = True
                            break
                        piece = template.piece(data) if template.prefix else None
                        if piece is not None:
                            events = assembler.feed_piece(template.index, piece)
                            if events is not None:  # as `feed` makes them of the whole chunk
                                if events and first:
                                    first = False
                                    batch.append(FirstToken())
                                batch += events
                                continue
                        try:
                            chunk = loads(data)
                        except orjson.JSONDecodeError as exc:
                            raise UpstreamStreamError(
                                f"the upstream sent a stream event that is not JSON: {data[:200]!r}"
                            ) from exc
                        if isinstance(chunk, dict):
                            if "error" in chunk and not chunk.get("choices"):
                                raise UpstreamStreamError(
                                    "the upstream reported an error mid-stream: "
                                    + _error_text(chunk),
                                    upstream_body=data[:2000],
                                )
                            events = assembler.feed(chunk)
                            if events:
                                if first:
                                    first = False
                                    batch.append(FirstToken())
                                if not saw_call:
                                    saw_call = any(isinstance(e, ToolCallStarted) for e in events)
                                batch += events
                            if template.learning and (one := assembler.piece_of(chunk)):
                                template.learn(data, *one, assembler.piece_of)
                except Exception:
                    if batch:  # what came before the failure, as it would have one by one
                        yield batch
                    raise
                if batch:
                    # one read's adjacent pieces as one delta each (`events.coalesce`)
                    yield coalesce(batch) if len(batch) > 1 else batch
                if done:
                    await _drain(chunks, ended=getattr(response, "ended", False))
                    break
            if not done:
                for sse in decoder.close():
                    if sse.data == "[DONE]":
                        done = True
        except SSEEventTooLarge as exc:
            raise UpstreamTooLargeError(
                f"the upstream sent a stream event larger than {exc.limit} bytes "
                "(max_upstream_event_bytes); the turn was abandoned"
            ) from None
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(
                "the upstream stopped sending mid-stream (read timeout)"
            ) from exc
        except httpx.TransportError as exc:
            raise UpstreamStreamDropped(
                f"the upstream stream broke mid-turn: {exc.__class__.__name__}: {exc}"
            ) from exc
        finally:
            # closed here, not by the loop's finalizer hook: that is a task per turn
            await reads.aclose()
            await response.aclose()
        if not done and not assembler.saw_chunk:
            raise _EmptyStream("the upstream answered 200 with an empty stream")
        if assembler.finish_reason is None and assembler.is_empty:
            # llama-cpp-python, first request after a restart: the role chunk, then [DONE].
            # Nothing was said, so asking again is safe; a turn of nothing is never an answer.
            raise UpstreamStreamDropped(
                "the upstream ended the stream with no content, no call and no finish reason"
            )
        if not done and assembler.finish_reason is None:
            raise UpstreamStreamDropped(
                "the upstream stream ended without [DONE] or a finish reason; "
                "the turn is incomplete (connection dropped?)"
            )
        if assembler.finish_reason is None and not saw_call:
            # `[DONE]` after text with no finish reason: the server stopped generating
            # mid-answer (an interrupted request on llama-cpp-python, a server shutting down).
            # What was said is cut, never a complete answer. (A turn with calls stands: proxies
            # that drop finish reasons exist, and assembly judges a call's arguments.)
            raise UpstreamStreamError(
                "the upstream ended the stream without a finish reason: the answer was cut off"
            )
        self._learn_reasoning_field(assembler)
        yield await finished(assembler)

    def _learn_reasoning_field(self, assembler: StreamAssembler) -> None:
        """Remember the field this upstream writes reasoning in: where `auto` replays it."""
        if assembler.saw_reasoning:
            self._reasoning_field = assembler.reasoning_field

    def reasoning_field(self) -> str | None:
        """The field an assistant turn's reasoning goes back in (None: not sent)."""
        mode = self.config.reasoning_replay
        if mode == "off":
            return None
        return self._reasoning_field if mode == "auto" else mode

    async def _open_stream(self, body: bytes, notes: list[ModelEvent]) -> Answer:
        headers = _STREAM_HEADERS
        traced = trace_headers()  # observe/: W3C trace context, only when tracing is on
        if traced:
            headers = {**headers, **traced}

        return await self._with_retries("POST", self._completions_url, body, headers, notes)

    async def _send(
        self,
        method: str,
        url: str,
        body: Mapping[str, object] | None,
        notes: list[ModelEvent] | None = None,
        most: int | None = None,
    ) -> tuple[int, bytes]:
        """Send, and read the answer within `most` bytes (`max_response_bytes` unless
        given): its status and body."""
        content = orjson.dumps(body) if body is not None else None
        headers = _JSON_HEADERS if body is not None else None
        traced = trace_headers()  # observe/: W3C trace context, only when tracing is on
        if traced:
            headers = {**(headers or {}), **traced}

        response = await self._with_retries(method, url, content, headers, notes)
        limit = self.config.max_response_bytes if most is None else most
        try:
            data = await _read_bounded(response, limit)
            if data is None:
                raise _too_large_answer(limit, whole=limit < self.config.max_response_bytes)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError("the upstream did not answer in time") from exc
        except httpx.TransportError as exc:
            raise _connection_error(exc, url) from exc
        finally:
            await response.aclose()
        return response.status_code, data

    async def _with_retries(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: Mapping[str, str] | None,
        notes: list[ModelEvent] | None = None,
    ) -> Answer:
        """Send until a success, retrying 429 / 5xx / connection errors within the policy. A
        final error names the URL tried and how many attempts were made: the retries are part
        of what went wrong (the client's error, the CLI trace, the /ui timeline show them)."""
        attempt = 0
        while True:
            try:
                response = await self._sender.send(method, url, content, headers)
            except httpx.ConnectTimeout as exc:
                cause = "connect_timeout"
                delay = self.retry.delay(attempt)
                if delay is None:
                    raise _connection_error(exc, url, attempt + 1) from exc
            except httpx.TimeoutException as exc:
                raise UpstreamTimeoutError("the upstream did not answer in time") from exc
            except httpx.TransportError as exc:
                # refused, reset, or a pooled keep-alive connection the server had closed
                cause = "connection"
                delay = self.retry.delay(attempt)
                if delay is None:
                    raise _connection_error(exc, url, attempt + 1) from exc
            else:
                if response.status_code < 400:
                    return response
                try:
                    body = await _read_bounded(response, _ERROR_BODY_BYTES, truncate=True)
                except httpx.HTTPError:
                    body = b""
                finally:
                    await response.aclose()
                error = _http_error(response, body or b"", url, self.config.base_url)
                error.retry_after = parse_retry_after(response.headers.get("retry-after"))
                # a prompt too long for the model stays too long, whatever the status said
                retryable = (
                    response.status_code in RETRYABLE_STATUSES
                    and error.code != "context_length_exceeded"
                )
                delay = (
                    self.retry.delay(attempt, response.headers.get("retry-after"))
                    if retryable and not _refuses_streamed_tools(error)
                    else None
                )
                if delay is None:
                    if attempt:
                        error.message += f" (after {_attempts(attempt + 1)})"
                        error.args = (error.message,)
                    raise error
                cause = f"http_{response.status_code}"
            if notes is not None:  # observe/: reported as a ModelEvent by the caller
                notes.append(UpstreamRetry(cause, attempt + 1, delay))
            await asyncio.sleep(delay)
            attempt += 1


#: The tools of the latest turns as JSON, by the identity of their specs (held here, so an id
#: is never reused while listed): the chat door shares the specs of a tool list it read before
#: (`server/chat/proxy.py`), and lowering and encoding them again was ~1% of its request.
_TOOLS_JSON: dict[tuple[object, ...], tuple[tuple[ToolSpec, ...], orjson.Fragment]] = {}
TOOLS_JSON_SIZE = 16


def _tools_json(tools: list[ToolSpec], strict: bool) -> orjson.Fragment:
    """`chat_tools(tools, strict=strict)` as the JSON it encodes to, byte for byte."""
    key = (strict, *map(id, tools))
    known = _TOOLS_JSON.get(key)
    if known is not None:
        return known[1]
    fragment = orjson.Fragment(orjson.dumps(chat_tools(tools, strict=strict)))
    if len(_TOOLS_JSON) >= TOOLS_JSON_SIZE:
        _TOOLS_JSON.clear()
    _TOOLS_JSON[key] = (tuple(tools), fragment)
    return fragment


async def _until(
    chunks: AsyncIterator[bytes], deadline: list[float], idle: float
) -> AsyncGenerator[bytes, None]:
    """The chunks, each awaited until `deadline[0]` (loop time, moved on by every event).

    One loop timer for the whole stream, moved on only when it fires before the deadline (an
    `asyncio.timeout_at` around each read was ~3% of a streamed turn): it cancels the task
    only while a read is awaited, and that cancellation alone becomes the idle timeout
    (`asyncio.timeout`'s rule: another cancellation that came too goes on)."""
    iterator = aiter(chunks)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    cancelling = task.cancelling()
    waiting = expired = False
    handle: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal handle, expired
        now = loop.time()
        if waiting and now >= deadline[0]:
            handle = None
            expired = True
            task.cancel()
        elif not task.done():  # not waiting: a read that starts late is checked soon after
            handle = loop.call_at(max(deadline[0], now + min(idle, 0.05)), check)

    handle = loop.call_at(deadline[0], check)
    try:
        while True:
            waiting = True
            try:
                raw = await anext(iterator)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if expired and task.uncancel() <= cancelling:
                    raise UpstreamTimeoutError(
                        f"the upstream sent no stream event for {idle:g} s (idle_timeout)",
                        code="upstream_idle_timeout",
                    ) from None
                raise
            finally:
                waiting = False
            yield raw
    finally:
        if handle is not None:
            handle.cancel()


async def _drain(chunks: AsyncIterator[bytes], *, ended: bool) -> None:
    """Read what follows `[DONE]` (the end of the chunked body) so the connection goes back to
    the pool: closing a half-read response makes httpx drop the connection, and every later
    request would pay a new TCP connect. A server that keeps talking after `[DONE]` gets a
    second; then the connection is dropped after all. When the answer says its end is in
    (`ended`: plain_http's), nothing can wait, and the timer is not set."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        if ended:
            async for _ in chunks:
                pass
            return
        async with asyncio.timeout(1.0):
            async for _ in chunks:
                pass


class _EmptyStream(Exception):
    """A 200 whose stream carried no event at all."""


def _refuses_streamed_tools(error: UpstreamError) -> bool:
    text = (error.upstream_body or "").lower()
    return error.upstream_status in (400, 422, 500, 501) and any(
        s in text for s in _STREAM_REFUSALS
    )


async def _read_bounded(response: Answer, most: int, *, truncate: bool = False) -> bytes | None:
    """The (decoded) body, or None once it passes `most` bytes; with `truncate`, its first
    `most` bytes. Never holds more than `most` plus one network chunk. A body whose size the
    headers state (`_stated_size`) is read in one call when it fits, and not at all when not."""
    size = _stated_size(response.headers)
    if size is not None and (size <= most or not truncate):
        return await response.aread() if size <= most else None
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        size += len(part)
        if size > most:
            if not truncate:
                return None
            parts.append(part[: most - (size - len(part))])
            break
        parts.append(part)
    return b"".join(parts)


def _stated_size(headers: Mapping[str, str]) -> int | None:
    """The body's exact size, where `content-length` gives it: an unencoded body (a decoded
    one may be larger than what was sent). The HTTP parser never reads past it."""
    length = headers.get("content-length")
    if length is None or headers.get("content-encoding") or not length.isdigit():
        return None
    return int(length) if length.isascii() else None


def _too_large_answer(most: int, *, whole: bool = False) -> UpstreamTooLargeError:
    limits = (
        "max_upstream_event_bytes: a whole answer is read in one piece"
        if whole
        else "max_upstream_response_bytes"
    )
    return UpstreamTooLargeError(
        f"the upstream's answer is larger than {most} bytes ({limits}); the turn was abandoned"
    )


_CONTEXT_LENGTH = (
    "maximum context length",  # OpenAI, vLLM, llama-cpp-python, DeepSeek
    "context length",  # SGLang: "longer than the model's context length"
    "context_length",
    "too many tokens",
    "exceeds the context",
    "exceeds the available context size",  # llama.cpp server
    "context size has been exceeded",  # llama.cpp server (HTTP 500)
    "exceed context window",  # llama-cpp-python's own words
    "maximum model length",  # vLLM: "longer than the maximum model length"
    "prompt is too long",
)
_CONTEXT_LENGTH_TYPES = ("context_length_exceeded", "exceed_context_size_error")
"""`error.code` / `error.type` values meaning the same (OpenAI, llama.cpp)."""


def _http_error(
    response: Answer, content: bytes, url: str = "", base_url: str = ""
) -> UpstreamHTTPError:
    """An upstream's HTTP error as the client error it amounts to, with OpenAI's codes: the
    upstream's own message (its first line: never a traceback), never a home-made code. A
    prompt that does not fit the model's context is OpenAI's 400 `context_length_exceeded`
    whatever status the server chose (llama.cpp has answered it with a 500). A 404 or a
    refused key names the URL tried and the likely fix: those are set-up mistakes."""
    status = response.status_code
    body = content[:4000].decode(response.charset_encoding or "utf-8", "replace")
    detail = strip_traceback(body)
    marks: tuple[Any, ...] = ()
    try:
        parsed = orjson.loads(content)
        if isinstance(parsed, dict):
            detail = _error_text(parsed)
            error = parsed.get("error")
            if isinstance(error, dict):
                marks = (error.get("code"), error.get("type"))
    except orjson.JSONDecodeError:
        pass
    detail = _first_line(detail)
    message = f"the upstream answered HTTP {status}" + (f": {detail}" if detail else "")
    lowered = detail.lower()
    overflow = any(mark in _CONTEXT_LENGTH_TYPES for mark in marks) or (
        status in (400, 413, 422, 500) and any(s in lowered for s in _CONTEXT_LENGTH)
    )
    kind: _ErrorKind
    if overflow or status == 413:
        kind = {
            "status": 400,
            "error_type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    elif status in (400, 422):
        code = marks[0] if marks and _specific_code(marks[0]) else "invalid_value"
        kind = {"status": 400, "error_type": "invalid_request_error", "code": code}
    elif status == 404 and "model" in lowered:
        kind = {"status": 404, "error_type": "invalid_request_error", "code": "model_not_found"}
    elif status == 429:
        kind = {"status": 429, "error_type": "requests", "code": "rate_limit_exceeded"}
    elif status in (401, 403):
        message = (
            f"the upstream at {shown_url(url)} refused toolwire's credentials (HTTP {status}); "
            "the gateway's operator must fix its upstream key (`--api-key-env VAR`, VAR "
            "holding the key)"
        )
        kind = {"status": 424, "error_type": "server_error", "code": "server_error"}
    elif status == 404:
        message = f"the upstream answered HTTP 404 for {shown_url(url)}" + (
            f": {detail}" if detail else ""
        )
        message += "; " + base_url_hint(base_url)
        kind = {"status": 424, "error_type": "server_error", "code": "server_error"}
    elif status < 500:
        kind = {"status": 424, "error_type": "server_error", "code": "server_error"}
    else:
        kind = {"status": 502, "error_type": "server_error", "code": "server_error"}
    return UpstreamHTTPError(message, upstream_status=status, upstream_body=body, **kind)


class _ErrorKind(TypedDict):
    """How toolwire answers an upstream's HTTP error: its own status, type and code."""

    status: int
    error_type: str
    code: str


_GENERIC_CODES = frozenset(
    {"invalid_request_error", "invalid_request", "bad_request", "badrequesterror", "error"}
)
#: A turn whose calls hold more argument text than this is finished on a worker thread:
#: repairing a megabyte of broken JSON (json-repair, pure Python) takes seconds, which on the
#: event loop would hold every other request; on a thread the interpreter hands the loop the
#: GIL every few milliseconds.
OFF_LOOP_FINISH_CHARS = 64 * 1024


async def finished(assembler: StreamAssembler) -> list[ModelEvent]:
    """`assembler.finish()`, off the event loop when its arguments are long."""
    if assembler.argument_chars() > OFF_LOOP_FINISH_CHARS:
        return await asyncio.to_thread(assembler.finish)
    return assembler.finish()


_CODE = re.compile(r"[a-z][a-z0-9_]{2,63}")


def _specific_code(code: Any) -> bool:
    """An upstream's own error code that says more than "bad request" (OpenAI's
    `invalid_base64_image`, say): relayed as it is, never flattened to `invalid_value`."""
    return (
        isinstance(code, str)
        and _CODE.fullmatch(code) is not None
        and code.lower() not in _GENERIC_CODES
    )


def _token_count(answer: Any) -> int | None:
    """`{"count": n}` (llama-cpp-python, vLLM) or `{"tokens": [...]}` (llama.cpp)."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def _first_line(text: str) -> str:
    """The first meaningful line of an upstream message, bounded; nothing of a traceback."""
    for line in text.strip().splitlines():
        line = line.strip()
        if line.startswith("Traceback"):
            return ""
        if line:
            return line[:500]
    return ""


def _connection_error(exc: Exception, url: str = "", attempts: int = 1) -> UpstreamConnectionError:
    where = f" at {shown_url(url)}" if url else ""
    tries = f" ({_attempts(attempts)})" if attempts > 1 else ""
    return UpstreamConnectionError(
        f"could not reach the upstream{where}{tries}: {exc.__class__.__name__}: {exc}; "
        "is the model server running, and is the URL right?",
        code="upstream_unreachable",
    )


def _attempts(count: int) -> str:
    return f"{count} attempts, {count - 1} of them retries"


def shown_url(url: str) -> str:
    """A URL fit for a message: no user:password, no query (either may hold a secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def base_url_hint(base_url: str) -> str:
    """The likely fix for a base URL the server answers 404 under: most servers serve the
    OpenAI API under `/v1`, and the base URL must include it."""
    base = shown_url(base_url.rstrip("/"))
    if not base.endswith("/v1"):
        return f"did you mean {base}/v1? (the base URL includes the API's /v1)"
    return f"is {base} the server's OpenAI-compatible base URL?"


def _error_text(body: dict[str, object]) -> str:
    error = body.get("error", body)
    if isinstance(error, dict):
        return strip_traceback(str(error.get("message") or error))
    return strip_traceback(str(error))


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\n\s*File \"[^\"]*\", line \d+")


def strip_traceback(text: str) -> str:
    """An upstream's message without the stack trace some servers append (llama-cpp-python
    does): file paths and code lines of the model server never reach a client."""
    match = _TRACEBACK.search(text)
    if match is None:
        return text
    return text[: match.start()].rstrip() or "the upstream failed (details withheld)"


def _declared(request: TurnRequest) -> list[str] | None:
    """The names of the tools a turn offers (what the assembler matches a call's name to)."""
    return [tool.name for tool in request.tools] if request.tools else None


def _first_call(event: ModelEvent, first: list[int]) -> bool:
    """Whether `event` is kept when only the turn's first call is (`first`: its key, once
    seen)."""
    if isinstance(event, ToolCallStarted | ToolCallArgumentsDelta | ToolCallDone):
        if not first:
            first.append(event.key)
        return event.key == first[0]
    return True
