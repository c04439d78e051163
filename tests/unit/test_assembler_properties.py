"""Property: any set of tool calls, rendered in any delta shape real servers use and split at
arbitrary byte boundaries of the SSE stream, assembles to exactly the original calls."""

from __future__ import annotations

import itertools
from typing import Any
from unittest import mock

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolwire.upstream.assembler import StreamAssembler
from toolwire.upstream.events import ToolCallDone
from toolwire.wire.sse import SSEDecoder, SSEEventTooLarge

NAMES = ["get_weather", "terminal", "read_file", "search"]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=4)
calls_strategy = st.lists(st.tuples(st.sampled_from(NAMES), arguments), min_size=1, max_size=4)


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


def delta(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": None}]}


def render(
    shape: str, calls: list[tuple[str, dict[str, Any]]], cuts: list[int]
) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(calls):
        raw = orjson.dumps(args).decode()
        cid = f"call_{i}"
        pieces = split(raw, cuts)
        if shape == "spec":
            chunks.append(
                delta(
                    [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                )
            )
            chunks += [delta([{"index": i, "function": {"arguments": p}}]) for p in pieces]
        elif shape == "whole":
            chunks.append(
                delta([{"index": i, "id": cid, "function": {"name": name, "arguments": raw}}])
            )
        elif shape == "id_repeated":
            chunks += [
                delta([{"index": i, "id": cid, "function": {"name": name, "arguments": p}}])
                for p in pieces
            ]
        elif shape == "no_index":
            chunks.append(delta([{"id": cid, "function": {"name": name}}]))
            chunks += [delta([{"id": cid, "function": {"arguments": p}}]) for p in pieces]
        elif shape == "index_zero":
            chunks.append(
                delta([{"index": 0, "id": cid, "function": {"name": name, "arguments": ""}}])
            )
            chunks += [delta([{"index": 0, "function": {"arguments": p}}]) for p in pieces]
        elif shape == "id_churn":
            chunks.append(delta([{"index": i, "id": cid, "function": {"name": name}}]))
            chunks += [
                delta([{"index": i, "id": f"{cid}_{n}", "function": {"arguments": p}}])
                for n, p in enumerate(pieces)
            ]
        elif shape == "object":
            chunks.append(
                delta([{"index": i, "id": cid, "function": {"name": name, "arguments": args}}])
            )
        elif shape == "responses_events":
            chunks.append(
                {
                    "type": "response.output_item.added",
                    "item": {
                        "type": "function_call",
                        "id": f"fc_{i}",
                        "call_id": cid,
                        "name": name,
                        "arguments": "",
                    },
                }
            )
            chunks += [
                {"type": "response.function_call_arguments.delta", "item_id": f"fc_{i}", "delta": p}
                for p in pieces
            ]
            chunks.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": f"fc_{i}",
                    "arguments": "",
                }
            )
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=calls_strategy,
    shape=st.sampled_from(
        [
            "spec",
            "whole",
            "id_repeated",
            "no_index",
            "index_zero",
            "id_churn",
            "object",
            "responses_events",
        ]
    ),
    arg_cuts=st.lists(st.integers(0, 10_000), max_size=6),
    byte_cuts=st.lists(st.integers(0, 100_000), max_size=12),
)
def test_any_calls_in_any_shape_split_anywhere_assemble_exactly(
    calls: list[tuple[str, dict[str, Any]]], shape: str, arg_cuts: list[int], byte_cuts: list[int]
) -> None:
    stream = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in render(shape, calls, arg_cuts))
    stream += b"data: [DONE]\n\n"
    points = sorted({c % (len(stream) + 1) for c in byte_cuts} | {0, len(stream)})
    decoder = SSEDecoder()
    assembler = StreamAssembler(NAMES)
    events = []
    for a, b in itertools.pairwise(points):
        for sse in decoder.feed(stream[a:b]):
            if sse.data != "[DONE]":
                events += assembler.feed(orjson.loads(sse.data))
    events += assembler.finish()
    done = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.name, c.arguments, c.parse_error) for c in done] == [(n, a, None) for n, a in calls]


@given(
    text=st.text(alphabet=st.characters(blacklist_categories=["Cs"])),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
)
def test_sse_decoder_reassembles_text_split_anywhere(text: str, cuts: list[int]) -> None:
    payload = orjson.dumps({"t": text})
    stream = b"data: " + payload + b"\r\n\r\n"
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    decoder = SSEDecoder()
    got = []
    for a, b in itertools.pairwise(points):
        got += decoder.feed(stream[a:b])
    assert [orjson.loads(e.data)["t"] for e in got] == [text]


_SSE_BLOCKS = st.sampled_from(
    [
        b"data: {}\n\n",
        b'data:{"a":1}\n\n',
        b"data: one\ndata: two\n\n",
        b": keep-alive\n\n",
        b"event: ping\ndata: x\n\n",
        b"id: 7\ndata: y\n\n",
        b"\n",
        b"data: [DONE]\n\n",
        b"data: caf\xc3\xa9\r\n\r\n",
        b"data: \xff broken utf-8\n\n",
        b"retry: 10\ndata: z\n\n",
    ]
)


@given(
    blocks=st.lists(_SSE_BLOCKS, max_size=12),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
    limit=st.sampled_from([None, 8, 64]),
)
def test_sse_decoder_fast_path_matches_line_by_line(
    blocks: list[bytes], cuts: list[int], limit: int | None
) -> None:
    """Whole one-line events are cut out of a read at once; every split of every shape of
    stream must decode to what the line-by-line decoder makes of it (or fail alike)."""
    stream = b"".join(blocks)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})

    def decode(fast: bool) -> list[tuple[str, str | None, str | None]] | str:
        decoder = SSEDecoder(limit)
        feed = decoder.feed if fast else decoder._feed_lines
        got = []
        try:
            for a, b in itertools.pairwise(points):
                got += feed(stream[a:b])
            got += decoder.close()
        except SSEEventTooLarge:
            return "too large"
        return [(e.data, e.event, e.id) for e in got]

    assert decode(True) == decode(False)


@given(
    blocks=st.lists(
        _SSE_BLOCKS
        | st.sampled_from([b'data: {"b": 2}\n\n', b"data: \n\n", b"data:  x\n\n", b"\n\n\n"]),
        max_size=12,
    ),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
    limit=st.sampled_from([None, 8, 64]),
)
# a line begun after a line end `feed` buffered, finished line by line: its length was counted
# from the buffer's start, and a line of exactly the limit raised
@example(blocks=[b"\n", b"data: {}\n\n"], cuts=[4, 9], limit=8)
def test_sse_decoder_data_only_reads_match_line_by_line(
    blocks: list[bytes], cuts: list[int], limit: int | None
) -> None:
    """`feed_data` cuts a read of one-line `data:` events with one split and no event objects;
    every split of every shape of stream gives the data the line-by-line decoder gives (or
    fails alike), and a stream read with both keeps its place."""
    stream = b"".join(blocks)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})

    def decode(how: str) -> list[str] | str:
        decoder = SSEDecoder(limit)
        got: list[str] = []
        try:
            for k, (a, b) in enumerate(itertools.pairwise(points)):
                if how == "lines" or (how == "mixed" and k % 2):
                    got += [e.data for e in decoder._feed_lines(stream[a:b])]
                else:
                    got += decoder.feed_data(stream[a:b])
            got += [e.data for e in decoder.close()]
        except SSEEventTooLarge:
            return "too large"
        return got

    assert decode("data") == decode("lines") == decode("mixed")


@settings(max_examples=200, deadline=None)
@given(
    calls=calls_strategy,
    shape=st.sampled_from(["spec", "index_zero", "id_repeated", "no_index"]),
    arg_cuts=st.lists(st.integers(0, 10_000), max_size=6),
    extra=st.lists(
        st.sampled_from([" ", " x", "{}", ' {"a": 1}', '"k"', "\n[1]", "y" * 5000, "é"])
    ),
)
def test_the_one_piece_fast_lane_assembles_as_the_general_path(
    calls: list[tuple[str, dict[str, Any]]], shape: str, arg_cuts: list[int], extra: list[str]
) -> None:
    """`feed` appends a call's next argument piece without the general path's lookups
    (`_continued`); whatever the pieces (whitespace first, a new object, past the delta size,
    a repeat), the events are the general path's."""
    chunks = render(shape, calls, arg_cuts)
    index = 0 if shape == "index_zero" else len(calls) - 1
    chunks[-1:-1] = [delta([{"index": index, "function": {"arguments": p}}]) for p in extra]

    def events(fast: bool) -> list[Any]:
        ids = (f"call_new_{n}" for n in itertools.count())
        with mock.patch("toolwire.upstream.assembler._new_call_id", lambda: next(ids)):
            assembler = StreamAssembler(NAMES)
            if not fast:
                assembler._continued = lambda entry, events: False  # type: ignore[method-assign]
            out = [event for chunk in chunks for event in assembler.feed(chunk)]
            return out + assembler.finish()

    assert events(True) == events(False)
