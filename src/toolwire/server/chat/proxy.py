"""`POST /v1/chat/completions`: the hardening proxy.

Existing agents point their base URL here and get clean tool calls from quirky servers. The
request runs through the same loop driver with the agent's tools as caller-side tools: calls come
out of the assembler (one per index, clean ids and names, arguments as JSON strings), leaked
calls are retried or salvaged per config, a malformed call is reported to the model (which
re-issues it) instead of reaching the agent, and whatever cannot be fixed comes back as an error
in OpenAI's shape. The surface parses no model output itself.

Text streams live (only what could still become a leaked call is held back), but tool calls
reach the agent whole, once the turn has ended: a chat-completions agent acts on `tool_calls` as
they arrive, so a call must be final (repaired, validated, re-asked if malformed) before the
agent sees any of it. On the Responses door, by contrast, argument deltas stream live because
the `.done` event there is where a client takes the final arguments from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire.errors import (
    MISSING_MODEL,
    InvalidRequestError,
    StopReason,
    ToolwireError,
    run_error,
)
from toolwire.loop.chat_history import chat_to_transcript
from toolwire.loop.driver import LoopDriver
from toolwire.loop.events import (
    LoopEvent,
    LoopFinished,
    OutputTextDelta,
    ReasoningTextDelta,
)
from toolwire.loop.pump import pump_batches
from toolwire.loop.quick import run_single_turn
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.server.chat.schemas import check_chat_body
from toolwire.server.chat.validation import check_chat_messages
from toolwire.transcript import ToolCall, ToolSpec
from toolwire.upstream.base import NO_HINTS, RoutingHints, Sampling, ensure_served
from toolwire.wire.chat import (
    ChatChunk,
    ChatCompletion,
    ChatDelta,
    ChatMessage,
    ChatToolCall,
    ChatUsage,
    ToolCallDelta,
)
from toolwire.wire.responses import now, plain_id
from toolwire.wire.sse import DONE_FRAME, encode_event

_HANDLED = {
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "functions",
    "function_call",
    "n",
}


#: The events the agent's answer is made of (a tuple: `isinstance` reads it faster than a union).
_SHOWN = (OutputTextDelta, ReasoningTextDelta, LoopFinished)


@dataclass(slots=True)
class ProxyCall:
    request: LoopRequest
    model: str
    stream: bool
    include_usage: bool
    completion_id: str = field(default_factory=lambda: plain_id("chatcmpl-", 48))
    created: int = field(default_factory=now)


class ChatProxy:
    def __init__(
        self, driver: LoopDriver, settings: LoopSettings, default_model: str | None
    ) -> None:
        self.driver = driver
        self.settings = settings
        self.default_model = default_model
        # Calls reach the agent whole (see the module docstring): never shown while streaming,
        # so a model server failing mid-call is replaced unseen (a fleet's failover). Stream
        # from the upstream only when the agent streams: a whole body is cheaper to relay, and
        # a streamed one is what lets text reach a streaming agent live. Made once, not per
        # request (`dataclasses.replace` was ~1.5% of a proxied request).
        self._settings = {
            stream: replace(settings, stream=stream, live_calls=False) for stream in (False, True)
        }

    def prepare(self, body: Any, *, session: str | None = None) -> ProxyCall:
        """`session`: the client's session id (a header), a routing hint for a fleet."""
        body = check_chat_body(body)  # the documented schema: server/chat/schemas.py
        model = body.get("model") or self.default_model
        if not isinstance(model, str) or not model:
            raise InvalidRequestError(MISSING_MODEL, param="model")
        ensure_served(self.driver.upstream, model)
        if body.get("n") not in (None, 1):
            raise InvalidRequestError("only n=1 is supported", param="n")
        tools = _tools(body.get("tools"), body.get("functions"))
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise InvalidRequestError("max_tokens must be a positive integer", param="max_tokens")
        for name, low, high in (("temperature", 0, 2), ("top_p", 0, 1)):
            value = body.get(name)
            if value is not None and (
                not isinstance(value, int | float) or not low <= value <= high
            ):
                raise InvalidRequestError(
                    f"{name} must be a number between {low} and {high}", param=name
                )
        settings = self._settings[bool(body.get("stream"))]
        tool_choice = body.get("tool_choice")
        if tool_choice is None and isinstance(body.get("function_call"), (str, dict)):
            legacy = body["function_call"]
            tool_choice = (
                legacy if isinstance(legacy, str) else {"type": "function", "function": legacy}
            )
        _check_tool_choice(tool_choice, tools)
        request = LoopRequest(
            model=model,
            input=chat_to_transcript(check_chat_messages(body.get("messages"))),
            client_tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=body.get("parallel_tool_calls"),
            sampling=_sampling(body, max_tokens),
            settings=settings,
            routing=RoutingHints(session=session) if session else NO_HINTS,
        )
        options = body.get("stream_options") or {}
        return ProxyCall(
            request,
            model,
            bool(body.get("stream")),
            bool(options.get("include_usage")),
            plain_id("chatcmpl-", 48),
            now(),
        )

    # -- non-streaming --------------------------------------------------------------------

    async def complete(self, call: ProxyCall) -> ChatCompletion:
        events: list[LoopEvent] = []

        def keep(event: LoopEvent) -> None:
            if isinstance(event, _SHOWN):
                events.append(event)

        state = await run_single_turn(self.driver, call.request, keep)
        finished = events[-1]
        assert isinstance(finished, LoopFinished)
        _raise_if_unanswered(finished)
        texts: list[str] = []
        reasonings: list[str] = []
        for event in events:
            if isinstance(event, OutputTextDelta):
                texts.append(event.text)
            elif isinstance(event, ReasoningTextDelta):
                reasonings.append(event.text)
        text = "".join(texts)
        reasoning = "".join(reasonings)
        message: ChatMessage = {"role": "assistant", "content": text or None, "refusal": None}
        if reasoning:
            message["reasoning_content"] = reasoning
        if finished.pending_calls:
            message["tool_calls"] = [_call_json(c) for c in finished.pending_calls]
        return {
            "id": call.completion_id,
            "object": "chat.completion",
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _finish_reason(finished),
                    "logprobs": None,
                }
            ],
            "usage": _usage(state.usage),
        }

    # -- streaming ------------------------------------------------------------------------

    async def stream(self, call: ProxyCall) -> AsyncIterator[bytes]:
        def head() -> ChatChunk:
            return {
                "id": call.completion_id,
                "object": "chat.completion.chunk",
                "created": call.created,
                "model": call.model,
            }

        def chunk(delta: ChatDelta, finish: str | None = None) -> bytes:
            payload = head()
            payload["choices"] = [
                {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            ]
            return encode_event(orjson.dumps(payload))

        text_frames = DeltaFrames(dict(head()))

        async def run(emit: Callable[[LoopEvent], None]) -> None:
            def relay(event: LoopEvent) -> None:
                # Only what the agent sees crosses the queue: not the per-chunk call deltas.
                if isinstance(event, _SHOWN):
                    emit(event)

            await self.driver.run(call.request, relay)

        # Nothing goes out before the run's first event: a run that fails before any content
        # raises from the first step, which the route turns into a real HTTP error; after
        # content, a failure is an in-band error frame and the stream ends without [DONE].
        opened = False
        async for batch in pump_batches(run):  # what is ready goes out in one write
            frames: list[bytes] = []
            for event in batch:
                if isinstance(event, LoopFinished):
                    try:
                        _raise_if_unanswered(event)
                    except ToolwireError as exc:
                        if not opened:
                            raise
                        frames.append(encode_event(orjson.dumps(exc.to_body())))
                        yield b"".join(frames)
                        return
                if not opened:
                    opened = True
                    frames.append(chunk({"role": "assistant", "content": ""}))
                if isinstance(event, OutputTextDelta):
                    frames.append(text_frames.delta("content", event.text))
                elif isinstance(event, ReasoningTextDelta):
                    frames.append(text_frames.delta("reasoning_content", event.text))
                elif isinstance(event, LoopFinished):
                    for index, pending in enumerate(event.pending_calls):
                        whole = _call_json(pending)
                        piece: ToolCallDelta = {
                            "index": index,
                            "id": whole["id"],
                            "type": whole["type"],
                            "function": {**whole["function"]},
                        }
                        frames.append(chunk({"tool_calls": [piece]}))
                    frames.append(chunk({}, _finish_reason(event)))
                    if call.include_usage:
                        usage = head()
                        usage["choices"] = []
                        usage["usage"] = _usage(event.usage)
                        frames.append(encode_event(orjson.dumps(usage)))
            if frames:
                yield frames[0] if len(frames) == 1 else b"".join(frames)
        yield DONE_FRAME


#: Sampling as the upstream's defaults (frozen: one for every request that sets none).
_DEFAULT_SAMPLING = Sampling()


def _sampling(body: dict[str, Any], max_tokens: Any) -> Sampling:
    """The body's sampling fields, and every field the door does not handle, passed on."""
    extra = (
        None if body.keys() <= _HANDLED else {k: v for k, v in body.items() if k not in _HANDLED}
    )
    temperature, top_p = body.get("temperature"), body.get("top_p")
    response_format = body.get("response_format")
    if temperature is top_p is max_tokens is response_format is extra is None:
        return _DEFAULT_SAMPLING
    return Sampling(
        temperature=temperature,
        top_p=top_p,
        max_output_tokens=max_tokens,
        response_format=response_format,
        extra_body=extra or None,
    )


class DeltaFrames:
    """The SSE frames of text and reasoning deltas, from a template made once per stream:
    byte for byte what dumping the whole chunk gives (`base` holds id, object, created and
    model, in that order), at the cost of dumping the delta's string alone."""

    __slots__ = ("_head", "_tail")

    def __init__(self, base: dict[str, Any]) -> None:
        self._head = b"data: " + orjson.dumps(base)[:-1] + b',"choices":[{"index":0,"delta":{"'
        self._tail = b'},"finish_reason":null,"logprobs":null}]}\n\n'

    def delta(self, field: str, text: str) -> bytes:
        """`field`: `content` or `reasoning_content` (plain names: no escaping needed)."""
        return self._head + field.encode() + b'":' + orjson.dumps(text) + self._tail


#: Tool lists read before, by their JSON: agents send the same tools with every request, and
#: reading them again (a `ToolSpec` each, their checks) was ~3% of a proxied request. Bounded
#: in entries and in the JSON they stand for; cleared when either bound is reached.
_KNOWN_TOOLS: dict[bytes, tuple[ToolSpec, ...]] = {}
KNOWN_TOOLS_ENTRIES = 32
KNOWN_TOOLS_BYTES = 256 * 1024
_known_bytes = 0


def _tools(tools: Any, functions: Any) -> list[ToolSpec]:
    """The request's tools as specs: from `_KNOWN_TOOLS` when the same list was read before
    (the specs are frozen and their schemas never changed, so sharing them is safe)."""
    global _known_bytes
    if functions is not None or type(tools) is not list or not tools:
        return _read_tools(tools, functions)
    try:
        key = orjson.dumps(tools)
    except TypeError:  # not JSON (a caller's own objects): read as they are
        return _read_tools(tools, functions)
    known = _KNOWN_TOOLS.get(key)
    if known is not None:
        return list(known)
    specs = _read_tools(tools, None)
    if len(key) <= KNOWN_TOOLS_BYTES:
        if len(_KNOWN_TOOLS) >= KNOWN_TOOLS_ENTRIES or _known_bytes + len(key) > KNOWN_TOOLS_BYTES:
            _KNOWN_TOOLS.clear()
            _known_bytes = 0
        _KNOWN_TOOLS[key] = tuple(specs)
        _known_bytes += len(key)
    return specs


def _read_tools(tools: Any, functions: Any) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    entries: list[tuple[str, Any]] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise InvalidRequestError("tools must be a list", param="tools")
        for index, tool in enumerate(tools):
            if (
                not isinstance(tool, dict)
                or tool.get("type") != "function"
                or not isinstance(tool.get("function"), dict)
            ):
                raise InvalidRequestError(
                    f"tools[{index}] must be {{type: function, function: {{...}}}}",
                    param=f"tools[{index}]",
                )
            entries.append((f"tools[{index}].function", tool["function"]))
    if isinstance(functions, list):
        entries.extend((f"functions[{i}]", f) for i, f in enumerate(functions))
    for where, function in entries:
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise InvalidRequestError(
                f"{where}.name must be a non-empty string", param=f"{where}.name"
            )
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidRequestError(
                f"{where}.parameters must be a JSON Schema object", param=f"{where}.parameters"
            )
        parameters = parameters or {"type": "object", "properties": {}}
        specs.append(
            ToolSpec(name, function.get("description") or "", parameters, function.get("strict"))
        )
    return specs


_CHOICE_MODES = ("auto", "none", "required")


def _check_tool_choice(choice: Any, tools: list[ToolSpec]) -> None:
    """Chat's `tool_choice` (or legacy `function_call`): a mode, or a declared function by
    name (`allowed_tools` and `custom` choices pass through to the upstream as sent)."""
    if choice is None or choice in _CHOICE_MODES:
        return
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind in ("allowed_tools", "custom"):
            return
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if kind == "function" and isinstance(name, str):
            if name not in {spec.name for spec in tools}:
                raise InvalidRequestError(
                    f"tool_choice names a function that is not in tools: {name!r}",
                    param="tool_choice",
                    code="invalid_value",
                )
            return
    raise InvalidRequestError(
        "Invalid value for 'tool_choice': expected 'auto', 'none', 'required' or "
        "{type: function, function: {name}}.",
        param="tool_choice",
        code="invalid_value",
    )


def _call_json(call: ToolCall) -> ChatToolCall:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json()},
    }


_FINISH_REASONS = {
    StopReason.MAX_OUTPUT_TOKENS: "length",
    StopReason.CONTENT_FILTER: "content_filter",
}


def _finish_reason(finished: LoopFinished) -> str:
    if finished.pending_calls:
        return "tool_calls"
    return _FINISH_REASONS.get(finished.reason, "stop")


def _raise_if_unanswered(finished: LoopFinished) -> None:
    """Failures and runs that ended without an answer the agent can use become errors."""
    if finished.reason in (StopReason.ANSWERED, StopReason.TOOL_CALLS) or (
        finished.reason in _FINISH_REASONS
    ):
        return
    raise run_error(finished.reason, finished.message, finished.error)


def _usage(usage: Any) -> ChatUsage:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }
