"""Argument chunks read by their piece alone (`upstream/piece_template.py`): the adapter's
events are, chunk for chunk, the ones it makes parsing every chunk whole, whatever the stream
(pieces with escapes, chunks that only look alike, parallel calls, servers that format or pad
their chunks otherwise); and the template does take the chunks of a compact server."""

from __future__ import annotations

import itertools
import json
from typing import Any
from unittest import mock

import httpx
import orjson
import pytest

from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.assembler import StreamAssembler
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.piece_template import PieceTemplate

HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
PIECES = ['{"path": "a\\\\b', '\\"q\\"', " é\\u00e9", "\\n", '", "x": ', "[1, {}]", "}"]


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {**HEAD, "choices": [choice], **extra}


def start(index: int, name: str = "write_file") -> dict[str, Any]:
    call = {"index": index, "id": f"call_{index}", "type": "function"}
    return chunk({"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]})


def piece(index: int, text: str) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})


def one_call() -> list[Any]:
    return [chunk({"role": "assistant"}), start(0), *(piece(0, p) for p in PIECES)]


def finished(chunks: list[Any]) -> list[Any]:
    return [*chunks, chunk({}, "tool_calls")]


STREAMS: dict[str, list[Any]] = {
    "one call": finished(one_call()),
    # same text around the piece, but the middle is no one string: parsed whole
    "look-alike": finished(
        [*one_call(), '@{"index":0,"function":{"arguments":"a","name":"b"}}', piece(0, "z")]
    ),
    "two calls, interleaved": finished(
        [
            *one_call(),
            start(1, "read_file"),
            piece(1, '{"p": 1'),
            piece(0, " more"),
            piece(1, "}"),
        ]
    ),
    "usage in every chunk": finished(
        [start(0), *(piece(0, p) | {"usage": {"prompt_tokens": 5}} for p in PIECES)]
    ),
    "finish with the last piece": [
        *one_call(),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "!"}}]}, "tool_calls"),
    ],
    "padded chunks": finished(
        [start(0), *(piece(0, p) | {"obfuscation": "x" * k} for k, p in enumerate(PIECES))]
    ),
    "empty pieces": finished([start(0), piece(0, ""), piece(0, "{}"), piece(0, ""), piece(0, " ")]),
}


def sse(chunks: list[Any], spaced: bool) -> bytes:
    """The stream's bytes; `@` marks a chunk written by hand: its delta, in the chunk template."""
    frames = []
    for c in chunks:
        if isinstance(c, str):
            text = orjson.dumps(piece(0, "TEXT")).decode()
            delta = orjson.dumps(piece(0, "TEXT")["choices"][0]["delta"]["tool_calls"][0]).decode()
            text = text.replace(delta, c[1:])
        else:
            text = json.dumps(c) if spaced else orjson.dumps(c).decode()
        frames.append(b"data: " + text.encode() + b"\n\n")
    return b"".join(frames) + b"data: [DONE]\n\n"


class _Reads(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size

    async def __aiter__(self) -> Any:
        for k in range(0, len(self.body), self.size):
            yield self.body[k : k + self.size]


async def batches(body: bytes, read: int) -> list[list[Any]]:
    def answer(request: httpx.Request) -> httpx.Response:
        stream = _Reads(body, read)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    upstream = ChatCompletionsUpstream("http://mock/v1", transport=httpx.MockTransport(answer))
    tools = [ToolSpec(n, "", {"type": "object"}) for n in ("write_file", "read_file")]
    request = TurnRequest("m", [UserMessage("go")], tools=tools, stream=True)
    ids = (f"call_new_{n}" for n in itertools.count())  # a call without one gets one made up
    try:
        with mock.patch("toolwire.upstream.assembler._new_call_id", lambda: next(ids)):
            return [batch async for batch in upstream.stream_turn_batches(request)]
    finally:
        await upstream.aclose()


@pytest.mark.parametrize("read", [1 << 16, 150, 7])
@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
@pytest.mark.parametrize("name", list(STREAMS))
async def test_pieces_read_alone_make_the_events_of_chunks_parsed_whole(
    name: str, spaced: bool, read: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = sse(STREAMS[name], spaced)
    taken: list[str] = []
    feed_piece = StreamAssembler.feed_piece

    def counted(self: StreamAssembler, index: int, arguments: str) -> Any:
        taken.append(arguments)
        return feed_piece(self, index, arguments)

    monkeypatch.setattr(StreamAssembler, "feed_piece", counted)
    fast = await batches(body, read)
    monkeypatch.setattr(PieceTemplate, "learning", property(lambda self: False))
    whole = await batches(body, read)

    assert fast == whole
    if name == "one call" and not spaced:
        assert len(taken) == len(PIECES) - 1  # all but the piece the template was learned from
    if spaced:
        assert taken == []  # `"arguments": "..."`: not how orjson writes it, never learned


def test_a_template_is_learned_only_where_the_piece_is_found_once() -> None:
    template = PieceTemplate()
    data = '{"a":{"arguments":"x"},"b":{"arguments":"x"}}'
    template.learn(data, 0, "x", lambda chunk: (0, chunk["a"]["arguments"]))
    assert template.piece(data) is None and template.learning
    for _ in range(3):
        template.learn(data, 0, "x", lambda chunk: (0, chunk["a"]["arguments"]))
    assert not template.learning  # a stream that never gives a template stops trying


def test_a_piece_is_the_middle_only_when_it_is_one_string() -> None:
    template = PieceTemplate()
    template.learn('{"f":{"arguments":"ab"},"n":1}', 0, "ab", lambda c: (0, c["f"]["arguments"]))
    assert template.piece('{"f":{"arguments":"c\\"d"},"n":1}') == 'c"d'
    assert template.piece('{"f":{"arguments":"c","x":"d"},"n":1}') is None
    assert template.piece('{"f":{"arguments":1},"n":1}') is None
    assert template.piece('{"f":{"arguments":"c"},"n":2}') is None
    assert template.piece('{"f":{"arguments":},"n":1}') is None


def test_the_same_text_in_another_field_is_not_taken_for_the_piece() -> None:
    """A server that escapes the real arguments otherwise (`\\u0061` for `a`) and puts the
    plain text in a field of its own: the template would read that field. The probe finds
    the call's piece elsewhere, so nothing is learned and every chunk is parsed whole."""
    chunk = (
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
        '{"arguments":"\\u0061b"}}]}}],"x":{"arguments":"ab"}}'
    )
    template = PieceTemplate()
    template.learn(chunk, 0, "ab", StreamAssembler.piece_of)
    assert template.prefix == ""
    decoy = chunk.replace('"x":{"arguments":"ab"}', '"x":{"arguments":"rm -rf ~"}')
    assert template.piece(decoy) is None
