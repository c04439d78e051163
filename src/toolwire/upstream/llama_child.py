"""The managed model server's own process: llama-cpp-python's server, made to behave like a real
model server. Run as `python -m toolwire.upstream.llama_child` by `ManagedLlamaServer`; it is the
only module that imports `llama_cpp`, and only in that child.

What it changes in llama-cpp-python 0.3.x's server, through its public extension points (a
registered chat handler and an ASGI wrapper), never by patching its code:

- **No interruptions.** `interrupt_requests=False`: a second request waits for the model (the
  server holds one lock) instead of cutting the answer being generated.
- **Its own chat handler, `toolwire-chatml`** (ChatML, which SmolLM2 speaks), replacing
  `chatml-function-calling`, which renders no tool results (the model never sees what a tool
  returned), rejects `tool_choice: "required"` with an assertion, and constrains auto-mode text
  answers with a grammar that leaves no room for text. Ours:
  - renders tool calls and their results into the prompt;
  - `tool_choice` `auto` / `required` / a named function: a grammar first picks
    `functions.NAME:` (or `message:` when the choice is `auto`), then a grammar built from the
    function's JSON schema writes the arguments. One call per turn, so `parallel_tool_calls:
    false` always holds;
  - `response_format` `json_object` (with or without a schema) and `json_schema`: the answer is
    generated under a grammar built from the schema;
  - streams everything, tool calls included, and ends every stream with a usage chunk counted
    with the model's own tokenizer (the server knows no `stream_options`).
- **Assistant prefill**, as llama.cpp's own server does: a trailing assistant message (with
  no tool calls) is not a finished turn but the start of the answer, which the model goes on
  writing; vLLM's `continue_final_message` / `add_generation_prompt` flags ask the same and are
  accepted (a fleet's router continues a cut answer this way: `upstream/fleet/resume.py`).
- **A prompt too long for the context window is refused before anything streams** (400
  `context_length_exceeded`, in llama-cpp-python's own words), not cut off after the first chunk.
- **OpenAI's `json_schema` response format** is accepted: the ASGI wrapper rewrites it to the
  `{"type": "json_object", "schema": ...}` shape llama-cpp-python's request model knows.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: this child process imports no more than it needs
    from toolwire.wire.chat import (
        ChatChunk,
        ChatCompletion,
        ChatDelta,
        ChatMessage,
        ChatTool,
        ChatToolCall,
        ChatUsage,
        ChunkMeta,
    )

HANDLER_NAME = "toolwire-chatml"
END = "<|im_end|>"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# --- the prompt -------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _tools_block(tools: list[ChatTool], allow_message: bool) -> str:
    lines = ["You can call these functions:"]
    for tool in tools:
        function = tool.get("function", {})
        description = function.get("description") or ""
        lines.append(
            f"functions.{function.get('name')}: {description}\n"
            f"{json.dumps(function.get('parameters') or {}, separators=(',', ':'))}"
        )
    lines.append(
        "To call a function, answer with the line functions.NAME: and then its JSON arguments."
    )
    if allow_message:
        lines.append("To answer in words, begin with the line message:")
    return "\n".join(lines)


def render_prompt(
    messages: list[ChatMessage], tools: list[ChatTool] | None, allow_message: bool
) -> str:
    """ChatML. Tool calls are written as `functions.NAME:` + arguments; a tool's result becomes
    a user turn that says which call it answers, which even a 135M model reads."""
    out: list[str] = []
    system = [_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")]
    if tools:
        system.append(_tools_block(tools, allow_message))
    if system:
        joined = "\n\n".join(s for s in system if s)
        out.append(f"<|im_start|>system\n{joined}{END}\n")
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "assistant":
            parts = []
            content = _text(message.get("content"))
            if content:
                parts.append(content)
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                names[str(call.get("id"))] = str(function.get("name"))
                parts.append(f"functions.{function.get('name')}:\n{function.get('arguments')}")
            body = "\n".join(parts)
            out.append(f"<|im_start|>assistant\n{body}{END}\n")
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")), "the function")
            out.append(
                f"<|im_start|>user\nThe result of {name}:\n{_text(message.get('content'))}{END}\n"
            )
        else:
            out.append(f"<|im_start|>user\n{_text(message.get('content'))}{END}\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


# --- the handler ------------------------------------------------------------------------------


def _response_grammar(response_format: dict[str, object] | None, grammar: Any) -> Any:
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    if grammar is not None:
        return grammar
    if not response_format or response_format.get("type") == "text":
        return None
    schema = response_format.get("schema")
    spec = response_format.get("json_schema")
    if schema is None and isinstance(spec, dict):
        schema = spec.get("schema")
    if schema:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


def _gbnf_literal(text: str) -> str:
    return json.dumps(text)


class _Turn:
    """One chat request against the model: its sampling settings and token counts."""

    def __init__(self, llama: Any, options: dict[str, object]) -> None:
        self.llama = llama
        self.options = options
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.llama.tokenize(text.encode(), add_bos=False, special=True))

    def complete(
        self, prompt: str, grammar: Any, max_tokens: int | None, *, first: bool = False
    ) -> tuple[str, str]:
        """A whole completion: (text, finish_reason)."""
        result = self.llama.create_completion(
            prompt=prompt, grammar=grammar, max_tokens=max_tokens, stream=False, **self.options
        )
        usage = result.get("usage") or {}
        if first:
            self.prompt_tokens = int(usage.get("prompt_tokens", 0))
        self.completion_tokens += int(usage.get("completion_tokens", 0))
        choice = result["choices"][0]
        return str(choice["text"]), str(choice.get("finish_reason") or "stop")

    def stream(
        self, prompt: str, grammar: Any, max_tokens: int | None, *, first: bool = False
    ) -> Iterator[tuple[str, str | None]]:
        if first:
            self.prompt_tokens = len(self.llama.tokenize(prompt.encode(), special=True))
        pieces: list[str] = []
        for chunk in self.llama.create_completion(
            prompt=prompt, grammar=grammar, max_tokens=max_tokens, stream=True, **self.options
        ):
            choice = chunk["choices"][0]
            text = str(choice.get("text") or "")
            pieces.append(text)
            yield text, choice.get("finish_reason")
        self.completion_tokens += self.count("".join(pieces))

    @property
    def usage(self) -> ChatUsage:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


_SAMPLING = (
    "temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "presence_penalty",
    "frequency_penalty", "repeat_penalty", "tfs_z", "mirostat_mode", "mirostat_tau",
    "mirostat_eta", "logits_processor", "logit_bias",
)  # fmt: skip


def toolwire_chatml(
    llama: Any,
    messages: list[ChatMessage],
    tools: list[ChatTool] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    stop: str | list[str] | None = None,
    response_format: dict[str, object] | None = None,
    max_tokens: int | None = None,
    grammar: Any = None,
    model: str | None = None,
    **kwargs: Any,
) -> Any:
    options = {k: kwargs[k] for k in _SAMPLING if kwargs.get(k) is not None}
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    options["stop"] = [*stops, END]
    turn = _Turn(llama, options)
    functions = [t for t in tools or [] if t.get("type", "function") == "function"]
    choice = tool_choice if functions else "none"
    if choice is None:
        choice = "auto"
    prefill = _prefill(messages)
    if prefill is not None:
        messages = messages[:-1]
    allow_message = choice not in ("required",) and not isinstance(choice, dict)
    prompt = render_prompt(messages, functions if choice != "none" else None, allow_message)
    answer_grammar = _response_grammar(response_format, grammar)
    meta: ChunkMeta = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "created": int(time.time()),
        "model": model,
    }
    if prefill is not None:
        # The answer so far, left open: the prompt the text was being written under (in
        # `auto` with tools, after the `message:` line the route grammar would have picked).
        prompt += ("message:\n" if functions and choice == "auto" else "") + prefill
        _check_fits(llama, prompt)
        if stream:
            return _streamed_text(turn, prompt, answer_grammar, max_tokens, meta, True)
        text, finish = turn.complete(prompt, answer_grammar, max_tokens, first=True)
        return _completion(meta, {"role": "assistant", "content": text}, finish, turn.usage)
    _check_fits(llama, prompt)

    name: str | None = None
    first = True
    if isinstance(choice, dict):
        name = str((choice.get("function") or {}).get("name") or choice.get("name"))
        if name not in {t["function"]["name"] for t in functions}:
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools")
    elif choice in ("auto", "required"):
        from llama_cpp.llama_grammar import LlamaGrammar

        options_ = [_gbnf_literal(f"functions.{t['function']['name']}:") for t in functions]
        if choice == "auto":
            options_.append(_gbnf_literal("message:"))
        route = LlamaGrammar.from_string(f"root ::= {' | '.join(options_)}", verbose=False)
        picked, _ = turn.complete(prompt, route, 32, first=True)
        first = False
        picked = picked.strip()
        if picked.startswith("functions."):
            name = picked[len("functions.") : -1]
            prompt += f"{picked}\n"
        else:
            prompt += "message:\n"

    if name is not None:
        return _call(turn, prompt, name, functions, max_tokens, stream, meta, first)
    if stream:
        return _streamed_text(turn, prompt, answer_grammar, max_tokens, meta, first)
    text, finish = turn.complete(prompt, answer_grammar, max_tokens, first=first)
    message: ChatMessage = {"role": "assistant", "content": text}
    return _completion(meta, message, finish, turn.usage)


def _prefill(messages: list[ChatMessage]) -> str | None:
    """The text of a trailing assistant message without calls: the answer to go on with."""
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    return _text(last.get("content"))


def _check_fits(llama: Any, prompt: str) -> None:
    """A prompt the context window cannot hold is refused before anything streams, in
    llama-cpp-python's own words: its server turns them into OpenAI's 400
    `context_length_exceeded`. (Found mid-stream, after the first chunk, it would only cut the
    stream short.)"""
    n_ctx = llama.n_ctx()
    tokens = len(llama.tokenize(prompt.encode(), special=True))
    if tokens >= n_ctx:
        raise ValueError(f"Requested tokens ({tokens}) exceed context window of {n_ctx}")


def _call(
    turn: _Turn,
    prompt: str,
    name: str,
    functions: list[ChatTool],
    max_tokens: int | None,
    stream: bool,
    meta: ChunkMeta,
    first: bool,
) -> Any:
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    if not prompt.endswith(f"functions.{name}:\n"):
        prompt += f"functions.{name}:\n"
    tool = next(t for t in functions if t["function"]["name"] == name)
    try:
        grammar = LlamaGrammar.from_json_schema(
            json.dumps(tool["function"].get("parameters") or {}), verbose=False
        )
    except Exception:  # a schema the grammar converter does not know: any JSON
        grammar = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    arguments, finish = turn.complete(prompt, grammar, max_tokens or 512, first=first)
    call: ChatToolCall = {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments.strip()},
    }
    reason = "tool_calls" if finish == "stop" else finish
    if not stream:
        message: ChatMessage = {"role": "assistant", "content": None, "tool_calls": [call]}
        return _completion(meta, message, reason, turn.usage)
    delta: ChatDelta = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"index": 0, "id": call["id"], "type": call["type"], "function": {**call["function"]}}
        ],
    }
    return iter(
        [_chunk(meta, delta, None), _chunk(meta, {}, reason), _usage_chunk(meta, turn.usage)]
    )


def _streamed_text(
    turn: _Turn,
    prompt: str,
    grammar: Any,
    max_tokens: int | None,
    meta: ChunkMeta,
    first: bool,
) -> Iterator[ChatChunk]:
    yield _chunk(meta, {"role": "assistant", "content": ""}, None)
    for text, finish in turn.stream(prompt, grammar, max_tokens, first=first):
        if finish is None:
            if text:
                yield _chunk(meta, {"content": text}, None)
        else:
            if text:
                yield _chunk(meta, {"content": text}, None)
            yield _chunk(meta, {}, finish)
    yield _usage_chunk(meta, turn.usage)


def _chunk(meta: ChunkMeta, delta: ChatDelta, finish: str | None) -> ChatChunk:
    return {
        "id": meta["id"],
        "created": meta["created"],
        "model": meta["model"],
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _usage_chunk(meta: ChunkMeta, usage: ChatUsage) -> ChatChunk:
    return {
        "id": meta["id"],
        "created": meta["created"],
        "model": meta["model"],
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": usage,
    }


def _completion(
    meta: ChunkMeta, message: ChatMessage, finish: str, usage: ChatUsage
) -> ChatCompletion:
    return {
        "id": meta["id"],
        "created": meta["created"],
        "model": meta["model"],
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


# --- the HTTP layer ---------------------------------------------------------------------------


def rewrite_body(body: dict[str, object]) -> dict[str, object]:
    """OpenAI's request shapes → the ones llama-cpp-python's request model accepts."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        body["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
    return body


def openai_shapes(app: ASGIApp) -> ASGIApp:
    """Rewrites `/v1/chat/completions` request bodies with `rewrite_body`."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).endswith("/chat/completions"):
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                raw = json.dumps(rewrite_body(parsed)).encode()
        except ValueError:
            pass
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await app(scope, replay, send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    import llama_cpp.llama_chat_format as chat_format
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    parser = argparse.ArgumentParser(prog="python -m toolwire.upstream.llama_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--chat-format", default=HANDLER_NAME)
    parser.add_argument(
        "--cache",
        action="store_true",
        help="keep evaluated prompts in RAM and reuse the longest cached prefix",
    )
    args = parser.parse_args(argv)

    registry: Any = chat_format.LlamaChatCompletionHandlerRegistry()  # type: ignore[no-untyped-call]
    registry.register_chat_completion_handler(HANDLER_NAME, toolwire_chatml, overwrite=True)
    server = ServerSettings(host="127.0.0.1", port=args.port, interrupt_requests=False)
    model = ModelSettings(
        model=args.model,
        model_alias=args.model_alias,
        n_ctx=args.n_ctx,
        chat_format=args.chat_format,
        cache=args.cache,
        verbose=False,
    )
    app = create_app(server_settings=server, model_settings=[model])
    uvicorn.run(openai_shapes(app), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
