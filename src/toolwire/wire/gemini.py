"""Google's Gemini API shapes (`/v1beta/models/...`): pure data and codecs, no decisions.

The request is read by `server/gemini/translate.py`; what is built here is what goes out: the
`GenerateContentResponse` (whole, or one per stream chunk), the stream's framings (SSE with
`alt=sse`, else one JSON array written element by element), `countTokens`' and the model
listing's answers, and the error body `{"error": {"code", "message", "status"}}`. Field names
and enums follow Google's API reference (v1beta) and the official SDKs' types
(`google.genai.types`, `@google/genai`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Literal, TypedDict

import orjson

FinishReason = Literal[
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "OTHER",
    "MALFORMED_FUNCTION_CALL",
    "TOO_MANY_TOOL_CALLS",
]
"""The `Candidate.finishReason` values toolwire sends (Google's enum has more)."""


class FunctionCall(TypedDict, total=False):
    id: str
    name: str
    args: dict[str, object]
    """The call's arguments: arbitrary JSON."""


class Part(TypedDict, total=False):
    """One part of a `Content` (toolwire writes `text`, `thought`, `thoughtSignature` and
    `functionCall`)."""

    text: str
    thought: bool
    thoughtSignature: str
    functionCall: FunctionCall


class Content(TypedDict):
    role: str
    parts: list[Part]


class Candidate(TypedDict, total=False):
    content: Content
    finishReason: FinishReason
    finishMessage: str
    index: int


class UsageMetadata(TypedDict, total=False):
    promptTokenCount: int
    candidatesTokenCount: int
    thoughtsTokenCount: int
    cachedContentTokenCount: int
    totalTokenCount: int


class GenerateContentResponse(TypedDict, total=False):
    candidates: list[Candidate]
    usageMetadata: UsageMetadata
    modelVersion: str
    responseId: str


class ModalityTokenCount(TypedDict):
    modality: str
    tokenCount: int


class CountTokensResponse(TypedDict):
    totalTokens: int
    promptTokensDetails: list[ModalityTokenCount]


class Model(TypedDict, total=False):
    """A `Model` of `models.list` / `models.get`."""

    name: str
    baseModelId: str
    version: str
    displayName: str
    description: str
    inputTokenLimit: int
    outputTokenLimit: int
    supportedGenerationMethods: list[str]


class ModelList(TypedDict):
    models: list[Model]


class ErrorDetail(TypedDict):
    code: int
    message: str
    status: str


class ErrorBody(TypedDict):
    error: ErrorDetail


PATH_PREFIXES = ("/v1beta/", "/v1/models/")
"""Paths that are Gemini's alone (`/v1beta/...`, and `/v1/models/{model}...`, where no other
door has a route): every answer there is in Google's shape."""


def carries_google_key(headers: Iterable[tuple[bytes, bytes]], query: bytes) -> bool:
    """Whether a request presents its key as Google's clients do (`x-goog-api-key`, `key=`)."""
    if b"key=" in query and any(p.startswith(b"key=") for p in query.split(b"&")):
        return True
    return any(name == b"x-goog-api-key" for name, _ in headers)


#: google.rpc's canonical status name for each HTTP status the door answers with.
STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def status_name(code: int) -> str:
    if code in STATUS_NAMES:
        return STATUS_NAMES[code]
    return "INVALID_ARGUMENT" if code < 500 else "INTERNAL"


def error_body(code: int, message: str, status: str | None = None) -> ErrorBody:
    return {"error": {"code": code, "message": message, "status": status or status_name(code)}}


def response_id() -> str:
    return secrets.token_urlsafe(16)


def usage(prompt: int, output: int, thoughts: int = 0, cached: int = 0) -> UsageMetadata:
    """`candidatesTokenCount` counts the answer without its thoughts, as Google's does."""
    metadata: UsageMetadata = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(output - thoughts, 0),
        "totalTokenCount": prompt + output,
    }
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if cached:
        metadata["cachedContentTokenCount"] = cached
    return metadata


def candidate(
    parts: list[Part], finish: FinishReason | None = None, message: str | None = None
) -> Candidate:
    out: Candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        out["finishReason"] = finish
    if message:
        out["finishMessage"] = message
    return out


def response(
    resp_id: str,
    model: str,
    parts: list[Part],
    finish: FinishReason | None = None,
    metadata: UsageMetadata | None = None,
    message: str | None = None,
) -> GenerateContentResponse:
    out: GenerateContentResponse = {"candidates": [candidate(parts, finish, message)]}
    if metadata is not None:
        out["usageMetadata"] = metadata
    out["modelVersion"] = model
    out["responseId"] = resp_id
    return out


# -- stream framings ------------------------------------------------------------------------


def sse_frame(chunk: Mapping[str, object]) -> bytes:
    """One chunk with `alt=sse`, framed as Google frames it (`\\r\\n\\r\\n`)."""
    return b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


KEEPALIVE = b"\r\n"
"""Sent while nothing else goes out: a blank line, which both SDKs' readers skip in SSE and
which is whitespace between the elements of the JSON-array stream."""


def array_element(chunk: Mapping[str, object], first: bool) -> bytes:
    """One chunk of the stream without `alt=sse`: one JSON array, written as it grows."""
    return (b"[" if first else b"\r\n,") + orjson.dumps(chunk)


ARRAY_END = b"]"
EMPTY_ARRAY = b"[]"


def stream_error(code: int, message: str, status: str | None = None) -> bytes:
    """An error after an SSE stream opened, as Google sends one: the bare error object, not a
    `data:` event. Both SDKs raise it as an API error (Python reads lines that are not events
    as JSON and counts braces, so braces inside the message are escaped)."""
    text = orjson.dumps(message).replace(b"{", b"\\u007b").replace(b"}", b"\\u007d")
    name = (status or status_name(code)).encode()
    return b'{"error":{"code":%d,"message":%s,"status":"%s"}}\r\n' % (code, text, name)
