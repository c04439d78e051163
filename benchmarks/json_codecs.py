"""msgspec vs orjson + pydantic on toolwire's hot-path shapes, in process: the time per operation
of each, best of several repeats (what a codec costs, not what a request costs).

    .venv/bin/python benchmarks/json_codecs.py [--markdown] [--repeat 7]

Shapes (the benchmark's own request and the mock's chunks, as run.py sends them):

- **chat request**: the body of workload (a) (system + user message, two tools), parsed and
  checked. toolwire today: `orjson.loads` then `ChatCompletionRequest.model_validate` (pydantic,
  `server/chat/schemas.py`), the body kept as a dict (unknown fields go upstream untouched).
  msgspec: the same checks as a `Struct` (typed decode straight from bytes), and untyped decode
  plus `msgspec.convert` (which keeps the dict, as toolwire needs).
- **chunk decode**: one `chat.completion.chunk` carrying an argument piece, bytes -> object:
  `orjson.loads` (dict, what the assembler reads) vs `msgspec.json.decode` (dict) vs a typed
  `msgspec.json.Decoder` (Structs).
- **chunk encode**: the same chunk, object -> bytes: `orjson.dumps(dict)` vs msgspec's encoder on
  the dict and on Structs.
- **Responses delta event**: one `response.function_call_arguments.delta` SSE frame: the dict
  through `orjson.dumps` + `encode_event` vs msgspec, vs toolwire's pre-encoded template
  (`wire/sse.py` `delta_template`: only the delta string is encoded per chunk).

Needs msgspec (`benchmarks/.stack-extras`, made by `stacks.py`; appended to sys.path).
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE / ".stack-extras"))

import msgspec  # noqa: E402
import orjson  # noqa: E402

from run import MESSAGES, TOOLS  # noqa: E402
from toolwire.server.chat.schemas import ChatCompletionRequest  # noqa: E402
from toolwire.wire.sse import delta_template, encode_event  # noqa: E402


class StreamOptions(msgspec.Struct, forbid_unknown_fields=False):
    include_usage: bool | None = None


class ChatMessage(msgspec.Struct):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(msgspec.Struct):
    """The fields `ChatCompletionRequest` checks (bounds included, as `Meta`)."""

    messages: list[ChatMessage]
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    temperature: Any = None
    top_p: Any = None
    max_tokens: int | None = None
    response_format: dict[str, Any] | None = None
    n: int | None = None


class Function(msgspec.Struct, omit_defaults=True):
    arguments: str = ""
    name: str | None = None


class ToolCallDelta(msgspec.Struct, omit_defaults=True):
    index: int
    function: Function
    id: str | None = None
    type: str | None = None


class Delta(msgspec.Struct, omit_defaults=True):
    role: str | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class Choice(msgspec.Struct):
    index: int
    delta: Delta
    finish_reason: str | None = None


class Chunk(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[Choice]


class DeltaEvent(msgspec.Struct, tag_field="type", tag="response.function_call_arguments.delta"):
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


def cases() -> list[tuple[str, str, Any]]:
    request = orjson.dumps({"model": "mock-tool", "messages": MESSAGES, "tools": TOOLS})
    chunk_doc = {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "mock-stream",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "ne 1"}}]},
                "finish_reason": None,
            }
        ],
    }
    chunk = orjson.dumps(chunk_doc)
    chunk_struct = msgspec.json.decode(chunk, type=Chunk)
    chunk_decoder = msgspec.json.Decoder(Chunk)
    any_decoder = msgspec.json.Decoder()
    request_decoder = msgspec.json.Decoder(ChatRequest)
    encoder = msgspec.json.Encoder()
    event = {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 41,
        "item_id": "fc_0123456789abcdef",
        "output_index": 0,
        "delta": "ne 1",
    }
    event_struct = DeltaEvent(41, "fc_0123456789abcdef", 0, "ne 1")
    head, middle, tail = delta_template(
        "response.function_call_arguments.delta",
        b'"item_id":"fc_0123456789abcdef","output_index":0,',
    )
    kind = event["type"]
    dumps, loads = orjson.dumps, orjson.loads

    def templated() -> bytes:
        return head + b"41" + middle + dumps(event["delta"]) + tail

    assert templated() == encode_event(dumps(event), kind)
    assert loads(encoder.encode(chunk_struct)) == chunk_doc
    return [
        ("chat request", "orjson.loads + pydantic model_validate (toolwire)",
         lambda: ChatCompletionRequest.model_validate(loads(request))),
        ("chat request", "orjson.loads only (no checks: the lower bound)", lambda: loads(request)),
        ("chat request", "msgspec typed decode (Struct; drops unknown fields)",
         lambda: request_decoder.decode(request)),
        ("chat request", "msgspec decode + convert (keeps the dict)",
         lambda: msgspec.convert(any_decoder.decode(request), ChatRequest)),
        ("chunk decode", "orjson.loads (dict; toolwire)", lambda: loads(chunk)),
        ("chunk decode", "msgspec decode (dict)", lambda: any_decoder.decode(chunk)),
        ("chunk decode", "msgspec typed decode (Structs)", lambda: chunk_decoder.decode(chunk)),
        ("chunk encode", "orjson.dumps(dict) (toolwire)", lambda: dumps(chunk_doc)),
        ("chunk encode", "msgspec encode(dict)", lambda: encoder.encode(chunk_doc)),
        ("chunk encode", "msgspec encode(Struct)", lambda: encoder.encode(chunk_struct)),
        ("Responses delta event", "orjson.dumps + encode_event",
         lambda: encode_event(dumps(event), kind)),
        ("Responses delta event", "msgspec encode(dict) + encode_event",
         lambda: encode_event(encoder.encode(event), kind)),
        ("Responses delta event", "msgspec encode(Struct) + encode_event",
         lambda: encode_event(encoder.encode(event_struct), kind)),
        ("Responses delta event", "pre-encoded template (toolwire: wire/sse.py)", templated),
    ]  # fmt: skip


def measure(repeat: int) -> list[tuple[str, str, float]]:
    out = []
    for shape, name, fn in cases():
        timer = timeit.Timer(fn)
        number, _ = timer.autorange()
        best = min(timer.repeat(repeat=repeat, number=number)) / number
        out.append((shape, name, best * 1e6))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = measure(args.repeat)
    first: dict[str, float] = {}
    lines = [
        f"## msgspec {msgspec.__version__} vs orjson {orjson.__version__} + pydantic "
        "(json_codecs.py, in process, best of "
        f"{args.repeat})",
        "",
        "| shape | how | µs per operation | × toolwire's |",
        "|---|---|---:|---:|",
    ]
    for shape, name, us in rows:
        base = first.setdefault(shape, us)
        lines.append(f"| {shape} | {name} | {us:.3f} | {us / base:.2f}× |")
    text = "\n".join(lines)
    print(text if args.markdown else json.dumps(rows, indent=1) + "\n" + text)


if __name__ == "__main__":
    main()
