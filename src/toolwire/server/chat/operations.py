"""The chat door's operation in `/openapi.json` (`server/http/openapi.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from toolwire.server.chat.schemas import ChatCompletionRequest
from toolwire.server.http.openapi import API, ApiSpec, Operation

UPSTREAM = (502, 504)


class ChatCompletion(BaseModel):
    model_config = ConfigDict(extra="allow", title="ChatCompletion")
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[dict[str, Any]]


class ChatCompletionChunk(BaseModel):
    """One `data:` frame of a streamed chat completion (the stream ends with `data: [DONE]`)."""

    model_config = ConfigDict(extra="allow", title="ChatCompletionChunk")
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[dict[str, Any]]


OPERATIONS = (
    Operation(
        "post",
        "/v1/chat/completions",
        "createChatCompletion",
        "Chat completions through the hardening proxy",
        "Chat",
        ChatCompletion,
        body=ChatCompletionRequest,
        stream_event=ChatCompletionChunk,
        errors=(422, 424, *UPSTREAM),
        description=(
            'With `"stream": true` the answer is `text/event-stream`: `data: ChatCompletionChunk` '
            "frames, then `data: [DONE]`."
        ),
    ),
)


def register(spec: ApiSpec = API) -> None:
    spec.ensure(*OPERATIONS)
