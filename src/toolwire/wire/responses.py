"""OpenAI Responses API shapes: ids, output items, the response object, usage, stream events.

Pure data: dicts exactly as OpenAI sends them, so the official SDK and strict clients accept
them. The server fills them; nothing here does I/O.
"""

from __future__ import annotations

import os
import random
import secrets
import time
from collections import deque
from collections.abc import Mapping

from toolwire.wire.items import ContentPart, ErrorObject, Item, ResponseObject, UsageObject


def new_id(prefix: str) -> str:
    """OpenAI-looking ids: `resp_…`, `msg_…`, `fc_…`, `call_…`, `rs_…`, `conv_…`.
    Unguessable (the OS's CSPRNG, as `secrets` reads it): a response or conversation id is
    what a client reads it by."""
    while True:
        try:
            return f"{prefix}_{_tokens.popleft()}"
        except IndexError:  # empty (or emptied by another thread meanwhile): read a block
            _refill()


#: 24 random bytes as hex per id, read from `os.urandom` a block at a time: one system call
#: for 64 ids instead of one each (a response takes three or more). `popleft` is atomic, so
#: threads never share a token; a forked child (`--workers`) drops its parent's.
_TOKEN_BYTES = 24
_TOKENS_PER_READ = 64
_tokens: deque[str] = deque()


def _refill() -> None:
    block = os.urandom(_TOKEN_BYTES * _TOKENS_PER_READ).hex()
    step = 2 * _TOKEN_BYTES
    _tokens.extend(block[at : at + step] for at in range(0, len(block), step))


os.register_at_fork(after_in_child=_tokens.clear)


_plain = random.Random(secrets.randbits(128))


def plain_id(prefix: str, hex_digits: int = 24) -> str:
    """An id that names something and grants nothing (a chat completion, a tool call id):
    unique in practice (random bits from a generator seeded once per process), without the
    system call per id that `secrets` makes. Never for what a client reads data by."""
    return f"{prefix}{_plain.getrandbits(hex_digits * 4):0{hex_digits}x}"


def now() -> int:
    return int(time.time())


def message_item(item_id: str, text: str, status: str = "completed") -> Item:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [output_text_part(text)],
    }


def output_text_part(text: str) -> ContentPart:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def function_call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> Item:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def reasoning_text_part(text: str) -> ContentPart:
    return {"type": "reasoning_text", "text": text}


def summary_text_part(text: str) -> ContentPart:
    return {"type": "summary_text", "text": text}


def reasoning_item(item_id: str, text: str) -> Item:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "encrypted_content": None,
        "status": "completed",
    }


def mcp_call_item(
    item_id: str,
    server_label: str,
    name: str,
    arguments: str,
    *,
    output: str | None,
    error: str | None,
    status: str = "completed",
    approval_request_id: str | None = None,
) -> Item:
    return {
        "id": item_id,
        "type": "mcp_call",
        "status": status,
        "server_label": server_label,
        "name": name,
        "arguments": arguments,
        "output": output,
        "error": error,
        "approval_request_id": approval_request_id,
    }


def usage_object(
    input_tokens: int, output_tokens: int, reasoning_tokens: int = 0, cached_tokens: int = 0
) -> UsageObject:
    return {
        "input_tokens": input_tokens,
        # toolwire cannot see cache writes upstream; OpenAI's document requires the count.
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def error_object(code: str, message: str) -> ErrorObject:
    return {"code": code, "message": message}


def response_object(
    *,
    response_id: str,
    created_at: int,
    status: str,
    model: str,
    output: list[Item],
    settings: Mapping[str, object],
    usage: UsageObject | None,
    error: ErrorObject | None = None,
    incomplete_reason: str | None = None,
    completed_at: int | None = None,
) -> ResponseObject:
    """The full response object; `settings` echoes the request's settings and defaults (the
    client's JSON, passed on: hence `object` values)."""
    body: ResponseObject = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": settings.get("background", False),
        "completed_at": completed_at,
        "conversation": settings.get("conversation"),
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": settings.get("instructions"),
        "max_output_tokens": settings.get("max_output_tokens"),
        "max_tool_calls": settings.get("max_tool_calls"),
        "metadata": settings.get("metadata") or {},
        "model": model,
        "output": output,
        "parallel_tool_calls": settings.get("parallel_tool_calls", True),
        "previous_response_id": settings.get("previous_response_id"),
        "prompt": settings.get("prompt"),
        "prompt_cache_key": settings.get("prompt_cache_key"),
        "prompt_cache_retention": settings.get("prompt_cache_retention"),
        "presence_penalty": settings.get("presence_penalty", 0.0),
        "frequency_penalty": settings.get("frequency_penalty", 0.0),
        "reasoning": settings.get("reasoning") or {"effort": None, "summary": None},
        "safety_identifier": settings.get("safety_identifier"),
        "service_tier": settings.get("service_tier") or "default",
        "store": settings.get("store", True),
        "temperature": settings.get("temperature", 1.0),
        "text": settings.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": settings.get("tool_choice", "auto"),
        "tools": settings.get("tools") or [],
        "top_logprobs": settings.get("top_logprobs", 0),
        "top_p": settings.get("top_p", 1.0),
        "truncation": settings.get("truncation", "disabled"),
        "usage": usage,
    }
    # `user` is a string when set; OpenAI's document has no null for it, so it is left out.
    if settings.get("user") is not None:
        body["user"] = settings["user"]
    return body
