"""Per-chunk cost of the assembler as one call's arguments grow (the `restarts` hot spot).

A streamed call's arguments arrive as token-sized pieces, and most JSON tokens that start a key
or a string value begin with `"`. For every such piece `StreamAssembler._restarts` joins all the
parts received so far and tries to parse them, so the cost per chunk grows with the arguments'
length (quadratic in total). This prints microseconds per chunk for arguments of ~1 KB to ~90 KB,
as in `src/`, then with the guard proposed in `toolwire_patched.py` (`restarts`).

    .venv/bin/python benchmarks/assembler_long_args.py
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from toolwire.upstream.assembler import StreamAssembler


def chunks_for(keys: int) -> tuple[int, list[dict[str, Any]]]:
    text = orjson.dumps({f"key_{i}": f"value number {i}" for i in range(keys)}).decode()
    pieces: list[str] = []
    current = ""
    for ch in text:  # split before every quote: `{`, `"key_0`, `":`, `"value number 0`, `",` ...
        if ch == '"' and current:
            pieces.append(current)
            current = ""
        current += ch
    pieces.append(current)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    header = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_file", "arguments": ""},
    }
    out = [chunk({"tool_calls": [header]})]
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    out.append(chunk({}, "tool_calls"))
    return len(text), out


def per_chunk_us(chunks: list[dict[str, Any]], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        assembler = StreamAssembler(["write_file"])
        start = time.perf_counter()
        for c in chunks:
            assembler.feed(c)
        assembler.finish()
        best = min(best, time.perf_counter() - start)
    return best / len(chunks) * 1e6


def table(title: str) -> None:
    print(title)
    for keys in (50, 200, 800, 3200):
        size, chunks = chunks_for(keys)
        print(
            f"  arguments {size:6d} chars, {len(chunks):5d} chunks: {per_chunk_us(chunks):6.1f} µs/chunk"
        )


if __name__ == "__main__":
    table("as in src/:")
    import toolwire_patched

    if toolwire_patched.landed("restarts"):
        print("(the restarts guard is already in src/)")
    else:
        toolwire_patched.patch_restarts()
        table("with the proposed guard (toolwire_patched.py restarts):")
