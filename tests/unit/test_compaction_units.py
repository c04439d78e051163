"""Pure parts of compaction: the upstream's context-full refusals as OpenAI's
`context_length_exceeded` (real servers' words), the compaction item's seal, and how a history
with compaction items expands."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from toolwire.errors import InvalidRequestError
from toolwire.loop.compaction import (
    SUMMARY_PREFIX,
    CompactedContext,
    CompactionCodec,
    context_window,
    expand_compactions,
)
from toolwire.server.responses.prepare.validation.compactions import open_compaction
from toolwire.upstream.chat_completions import _http_error

LLAMA_CPP = {
    "error": {
        "code": 400,
        "message": "request (4390 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4390,
        "n_ctx": 4096,
    }
}


def refusal(status: int, body: Any) -> tuple[int, str | None]:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    error = _http_error(httpx.Response(status, content=content), content)
    return error.status, error.code


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # vLLM (and OpenAI, DeepSeek): the classic wording
        (
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 8192 tokens. However, you "
                "requested 8203 tokens (7691 in the messages, 512 in the completion).",
                "type": "BadRequestError",
                "code": 400,
            },
        ),
        # vLLM, newer
        (
            400,
            {
                "message": "The decoder prompt (length 9000) is longer than the maximum model length of 8192."
            },
        ),
        # SGLang
        (
            400,
            {
                "error": {
                    "message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."
                }
            },
        ),
        # llama.cpp server, by error type, with its 500 of some versions
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "the request exceeds the available context size. try increasing "
                    "the context size or enable context shift",
                    "type": "exceed_context_size_error",
                }
            },
        ),
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "Context size has been exceeded.",
                    "type": "server_error",
                }
            },
        ),
        # llama-cpp-python's own words, if they come through unformatted
        (400, b"Requested tokens (2285) exceed context window of 2048"),
        # OpenAI, by code
        (
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model.",
                    "code": "context_length_exceeded",
                }
            },
        ),
        (413, b"Payload Too Large"),
    ],
)
def test_context_full_refusals_are_context_length_exceeded(status: int, body: Any) -> None:
    assert refusal(status, body) == (400, "context_length_exceeded")


def test_other_refusals_keep_their_mapping() -> None:
    assert refusal(400, {"error": {"message": "temperature must be at most 2"}}) == (
        400,
        "invalid_value",
    )
    assert refusal(500, {"error": {"message": "CUDA out of memory"}}) == (502, "server_error")


def test_the_seal_opens_only_unaltered_for_its_key() -> None:
    codec = CompactionCodec(b"s" * 32)
    context = CompactedContext("the summary", ("first", [{"type": "text", "text": "second"}]))
    token = codec.seal(context, "key_1")
    assert codec.open(token, "key_1") == context
    assert b"the summary" not in token.encode()
    # the loop's refusal, answered as a 400 by the server's validation layer
    with pytest.raises(InvalidRequestError, match="another API key"):
        open_compaction(codec, token, "key_2", None)
    with pytest.raises(InvalidRequestError, match="could not be verified"):
        open_compaction(CompactionCodec(b"t" * 32), token, "key_1", None)
    with pytest.raises(InvalidRequestError) as caught:
        open_compaction(codec, token[:-8] + "AAAAAAAA", "key_1", "input[2].encrypted_content")
    assert caught.value.code == "invalid_encrypted_content"
    assert caught.value.param == "input[2].encrypted_content"


def test_the_latest_compaction_stands_for_everything_before_it() -> None:
    codec = CompactionCodec(b"s" * 32)

    def item(summary: str) -> dict[str, Any]:
        sealed = codec.seal(CompactedContext(summary, ("kept",)), None)
        return {"type": "compaction", "encrypted_content": sealed}

    def user(text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }

    history = [user("old"), item("first"), user("between")]
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    orphan = {"type": "function_call_output", "call_id": "c0", "output": "7"}
    expanded = expand_compactions(history, [item("second"), orphan, call, output], codec, None)

    texts = [part["text"] for i in expanded if i.get("type") == "message" for part in i["content"]]
    assert texts == ["kept", SUMMARY_PREFIX + "second", "[result of the earlier tool call c0]\n7"]
    assert expanded[-2:] == [call, output]
    assert expand_compactions([user("a")], [user("b")], codec, None) == [user("a"), user("b")]


@pytest.mark.parametrize(
    ("status", "body", "window"),
    [
        (
            400,
            {"message": "This model's maximum context length is 2048 tokens. However, ..."},
            2048,
        ),
        (400, LLAMA_CPP, 4096),
        (
            400,
            {
                "error": {
                    "message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."
                }
            },
            8192,
        ),
        (
            400,
            {
                "message": "The decoder prompt (length 9000) is longer than the maximum model length of 8192."
            },
            8192,
        ),
        (
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model.",
                    "code": "context_length_exceeded",
                }
            },
            None,
        ),
    ],
)
def test_the_window_a_refusal_names(status: int, body: Any, window: int | None) -> None:
    content = orjson.dumps(body)
    assert context_window(_http_error(httpx.Response(status, content=content), content)) == window
