"""Liveness of `/v1/responses` streams: do text and tool-call arguments leave as they arrive?

A `ScriptedUpstream` (in this process, its own thread) plays two streamed turns chunk by chunk,
with a fixed delay before each chunk, and records when it sent every chunk; `toolwire serve`
runs as a child process in front of it; the official `openai` client (`AsyncOpenAI`,
`responses.create(stream=True)`) records when every event arrived. Both clocks are
`time.perf_counter` in this process.

- (a) text: an answer with prose, a fenced Python block, a Markdown task list with a link, JSON
  in prose (`{"a": 1}`) and a table, in ~400 token-sized chunks (2-6 characters). Figures: the
  share of text bytes the client had before the upstream sent its last chunk (target >= 95%),
  the time to the first text byte (from the upstream's first text chunk and from the request),
  each text chunk's delay from upstream send to client arrival, the lag after the upstream ends.
- (b) a client `function` tool call: a chunk with the call's id and name, then ~100 fragments
  of a long argument (a file's content). The tool is `strict` and the upstream says it is vLLM
  0.27, which enforces `strict`: only such calls stream live while toolwire checks calls
  against their schemas (any other is judged whole first: docs/tool-calls.md). Figures: the number of
  `response.function_call_arguments.delta` events, the time to the first one, and how many
  upstream chunks after the name chunk had been sent when it arrived (target: at most one).

The upstream's last chunk is the one with `finish_reason` (and usage), sent one delay after the
last text or argument fragment. Both scenarios check correctness: the concatenated deltas and
the `.done` text equal the scripted text or arguments, and the upstream saw exactly one request
per run. Each scenario runs once to warm up, then `--repeats` times; the table shows medians.
It is a benchmark, not a test: it exits 0 when a target is missed and says MISSED.

    PYTHONPATH=src .venv/bin/python benchmarks/live_stream.py [--repeats N] [--delay-ms MS]
    PYTHONPATH=src .venv/bin/python benchmarks/live_stream.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
from rich.console import Console
from rich.table import Table

from toolwire.testing import Chunks, ScriptedUpstream

ANSWER = """\
Sure — here is a small helper that reads a file and counts words, with a checklist and a \
comparison. The approach is simple: open the file, split on whitespace, and tally the words \
in a dictionary, then sort by frequency so the most common words come first.

```python
from collections import Counter
from pathlib import Path


def top_words(path: str, n: int = 10) -> list[tuple[str, int]]:
    text = Path(path).read_text(encoding="utf-8")
    words = [w.strip(".,;:!?").lower() for w in text.split()]
    counts = Counter(w for w in words if w)
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return counts.most_common(n)
```

Before you ship it:

- [ ] add a test for an empty file
- [ ] handle `UnicodeDecodeError` for binary input
- [x] read the [Counter docs](https://docs.python.org/3/library/collections.html#collections.Counter)
- [ ] decide whether `n` may exceed the number of distinct words

If you call it from a service, return JSON such as {"a": 1} or, for the whole result, \
{"words": [["the", 42], ["and", 31]], "total": 1204} so clients can parse it without guessing.

| approach | time for 10 MB | memory |
|---|---|---|
| `Counter` over `split()` | 0.41 s | ~80 MB |
| regex `\\w+` + `Counter` | 0.93 s | ~95 MB |
| streaming line by line | 0.47 s | < 1 MB |

For very large files prefer the streaming variant: it keeps memory flat at 20 °C and at 40 °C \
alike, and it is only ~15% slower. Let me know if you want the streaming version written out.
"""

FILE_CONTENT = """\
\"\"\"A tiny key-value store on top of SQLite, with expiry.\"\"\"

from __future__ import annotations

import sqlite3
import time
from contextlib import closing


class Store:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB, expires REAL)"
        )

    def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        expires = time.time() + ttl if ttl else None
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO kv (k, v, expires) VALUES (?, ?, ?)",
                (key, value, expires),
            )

    def get(self, key: str) -> bytes | None:
        with closing(self.db.cursor()) as cur:
            cur.execute("SELECT v, expires FROM kv WHERE k = ?", (key,))
            row = cur.fetchone()
        if row is None:
            return None
        value, expires = row
        if expires is not None and expires < time.time():
            self.delete(key)
            return None
        return value

    def delete(self, key: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM kv WHERE k = ?", (key,))

    def purge(self) -> int:
        with self.db:
            cur = self.db.execute("DELETE FROM kv WHERE expires < ?", (time.time(),))
        return cur.rowcount
"""

TOOL_NAME = "write_file"
ARGUMENTS = orjson.dumps({"path": "kvstore/store.py", "content": FILE_CONTENT}).decode()
ARGUMENT_CHUNKS = 100
WRITE_FILE_TOOL = {
    "type": "function",
    "name": TOOL_NAME,
    "description": "Write a file in the user's workspace.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    # strict, on an upstream that enforces it (`TimedUpstream` says it is vLLM 0.27): judging
    # the call cannot change it, so it streams live (any other call is judged whole first)
    "strict": True,
}
BASE = {"id": "chatcmpl-live", "object": "chat.completion.chunk", "created": 0, "model": "m"}
USAGE = {"prompt_tokens": 50, "completion_tokens": 400, "total_tokens": 450}


# -- the scripts ------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {**BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def token_pieces(text: str, seed: int, low: int = 2, high: int = 6) -> list[str]:
    rng = random.Random(seed)
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(low, high)
        pieces.append(text[at : at + size])
        at += size
    return pieces


def even_pieces(text: str, count: int, seed: int) -> list[str]:
    """`count` pieces of varying size (half to one and a half times the mean)."""
    rng = random.Random(seed)
    mean = len(text) / count
    cuts = sorted(
        {
            min(len(text) - 1, max(1, round(i * mean + rng.uniform(-mean, mean) / 2)))
            for i in range(1, count)
        }
    )
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@dataclass(slots=True)
class Script:
    chunks: list[dict[str, Any]]
    first_payload: int  # index of the first chunk carrying text / the call's name
    ends: list[int]  # for each payload chunk: cumulative characters of text / arguments after it
    payload_index: list[int]  # chunk index of each payload chunk


def text_script() -> Script:
    pieces = token_pieces(ANSWER, seed=7)
    chunks = [chunk({"role": "assistant", "content": ""})]
    ends, index, total = [], [], 0
    for piece in pieces:
        total += len(piece)
        index.append(len(chunks))
        ends.append(total)
        chunks.append(chunk({"content": piece}))
    chunks.append(chunk({}, "stop", usage=USAGE))
    return Script(chunks, 1, ends, index)


def call_script() -> Script:
    head = {"index": 0, "id": "call_live_1", "type": "function"}
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{**head, "function": {"name": TOOL_NAME, "arguments": ""}}]}),
    ]
    ends, index, total = [], [], 0
    for piece in even_pieces(ARGUMENTS, ARGUMENT_CHUNKS, seed=11):
        total += len(piece)
        index.append(len(chunks))
        ends.append(total)
        chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls", usage=USAGE))
    return Script(chunks, 1, ends, index)


# -- the upstream, with send times --------------------------------------------------------


class TimedUpstream(ScriptedUpstream):
    """A ScriptedUpstream that records `perf_counter()` just after each stream chunk is sent."""

    def __init__(self) -> None:
        super().__init__(version="0.27.0")  # vLLM's `/version`: it enforces `strict` tools
        self.sent: list[list[float]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await super().__call__(scope, receive, send)
            return
        times: list[float] = []
        self.sent.append(times)

        async def timed_send(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and message.get("more_body"):
                times.append(time.perf_counter())

        await super().__call__(scope, receive, timed_send)


# -- the gateway ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def gateway(upstream_url: str, db: Path) -> Iterator[str]:
    """`toolwire serve` as a child process; yields its /v1 base URL."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOOLWIRE_LOG_LEVEL": "warning",
        "TOOLWIRE_MAX_RETRIES": "0",  # a retry would take a turn the script does not have
    }
    argv = [sys.executable, "-m", "toolwire", "serve", "--upstream", upstream_url, "--model", "m"]
    argv += ["--port", str(port), "--db", f"sqlite:///{db}"]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                    raise RuntimeError(f"toolwire serve exited {proc.returncode}: {output}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code < 500:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError("toolwire serve did not come up in 60 s")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


# -- one run --------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    figures: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


async def stream_events(
    client: openai.AsyncOpenAI, **request: Any
) -> tuple[float, list[tuple[float, Any]]]:
    started = time.perf_counter()
    stream = await client.responses.create(model="m", stream=True, **request)
    events = []
    async for event in stream:
        events.append((time.perf_counter(), event))
    return started, events


def chunk_delays(
    script: Script, sent: list[float], arrivals: list[tuple[float, int]]
) -> list[float]:
    """For each payload chunk: from its upstream send to the first client delta that completes it.
    `arrivals` is (time, cumulative characters received) per delta."""
    delays, j = [], 0
    for end, index in zip(script.ends, script.payload_index, strict=True):
        while j < len(arrivals) and arrivals[j][1] < end:
            j += 1
        if j == len(arrivals):
            break
        delays.append(arrivals[j][0] - sent[index])
    return delays


def share_before(arrivals: list[tuple[float, int]], text: str, moment: float) -> float:
    """Share of `text`'s UTF-8 bytes received strictly before `moment`."""
    got = max((n for t, n in arrivals if t < moment), default=0)
    return len(text[:got].encode()) / len(text.encode())


async def run_text(
    client: openai.AsyncOpenAI, upstream: TimedUpstream, script: Script, delay: float
) -> Run:
    run = Run()
    upstream.add(Chunks(script.chunks, delay=delay))
    before = len(upstream.sent)
    started, events = await stream_events(client, input="How do I count words in a file?")
    sent_lists = upstream.sent[before:]
    if len(sent_lists) != 1:
        run.errors.append(f"upstream saw {len(sent_lists)} requests, expected 1")
    if not sent_lists or len(sent_lists[0]) != len(script.chunks):
        run.errors.append("upstream did not send the whole script")
        return run
    sent = sent_lists[0]
    arrivals, total, done_text = [], 0, None
    for at, event in events:
        if event.type == "response.output_text.delta" and event.delta:
            total += len(event.delta)
            arrivals.append((at, total))
        elif event.type == "response.output_text.done":
            done_text = event.text
    received = "".join(e.delta for _, e in events if e.type == "response.output_text.delta")
    if received != ANSWER:
        run.errors.append(f"text deltas differ from the script ({len(received)} vs {len(ANSWER)})")
    if done_text != ANSWER:
        run.errors.append("output_text.done differs from the script")
    if not arrivals:
        run.errors.append("no text delta")
        return run
    end = sent[-1]
    delays = chunk_delays(script, sent, arrivals)
    run.figures = {
        "share": share_before(arrivals, ANSWER, end),
        "first_up": arrivals[0][0] - sent[script.first_payload],
        "first_req": arrivals[0][0] - started,
        "delay_median": statistics.median(delays),
        "delay_max": max(delays),
        "lag_end": arrivals[-1][0] - end,
        "deltas": len(arrivals),
    }
    return run


async def run_call(
    client: openai.AsyncOpenAI, upstream: TimedUpstream, script: Script, delay: float
) -> Run:
    run = Run()
    upstream.add(Chunks(script.chunks, delay=delay))
    before = len(upstream.sent)
    started, events = await stream_events(
        client, input="Write the key-value store to kvstore/store.py.", tools=[WRITE_FILE_TOOL]
    )
    sent_lists = upstream.sent[before:]
    if len(sent_lists) != 1:
        run.errors.append(f"upstream saw {len(sent_lists)} requests, expected 1")
    if not sent_lists or len(sent_lists[0]) != len(script.chunks):
        run.errors.append("upstream did not send the whole script")
        return run
    sent = sent_lists[0]
    arrivals, total, done_args, added_at, final_args = [], 0, None, None, None
    for at, event in events:
        if event.type == "response.function_call_arguments.delta":
            total += len(event.delta)
            arrivals.append((at, total))
        elif event.type == "response.function_call_arguments.done":
            done_args = event.arguments
        elif event.type == "response.output_item.added" and event.item.type == "function_call":
            added_at = at if added_at is None else added_at
        elif event.type == "response.completed":
            calls = [i for i in event.response.output if i.type == "function_call"]
            final_args = calls[0].arguments if calls else None
    received = "".join(
        e.delta for _, e in events if e.type == "response.function_call_arguments.delta"
    )
    if received != ARGUMENTS:
        run.errors.append(f"argument deltas differ ({len(received)} vs {len(ARGUMENTS)} chars)")
    if done_args != ARGUMENTS:
        run.errors.append("function_call_arguments.done differs from the script")
    if final_args != ARGUMENTS:
        run.errors.append("the completed response's function_call differs from the script")
    if not arrivals:
        run.errors.append("no function_call_arguments.delta")
        return run
    name_index = script.first_payload
    first = arrivals[0][0]
    after_name = sum(1 for t in sent[name_index + 1 :] if t < first)
    delays = chunk_delays(script, sent, arrivals)
    run.figures = {
        "deltas": len(arrivals),
        "first_name": first - sent[name_index],
        "first_req": first - started,
        "chunks_after_name": after_name,
        "added": (added_at - sent[name_index]) if added_at is not None else float("nan"),
        "share": share_before(arrivals, ARGUMENTS, sent[-1]),
        "delay_median": statistics.median(delays),
        "lag_end": arrivals[-1][0] - sent[-1],
    }
    return run


# -- the table --------------------------------------------------------------------------


def ms(value: float) -> str:
    return f"{value * 1000:,.1f} ms"


def pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def median_of(runs: list[Run], key: str) -> float:
    values = [r.figures[key] for r in runs if key in r.figures]
    return statistics.median(values) if values else float("nan")


def correctness(runs: list[Run]) -> tuple[str, bool]:
    bad = [r for r in runs if r.errors]
    if not bad:
        return f"ok ({len(runs)}/{len(runs)})", True
    return f"{len(runs) - len(bad)}/{len(runs)} ok: {bad[0].errors[0]}", False


async def measure(repeats: int, delay: float) -> tuple[list[Run], list[Run], Script, Script]:
    text, call = text_script(), call_script()
    with tempfile.TemporaryDirectory(prefix="toolwire-live-") as tmp:
        upstream = TimedUpstream()
        async with upstream:
            with gateway(upstream.base_url, Path(tmp) / "toolwire.db") as base_url:
                client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-unused", max_retries=0)
                await run_text(
                    client, upstream, text, delay
                )  # warm-up: connections, first-request costs
                await run_call(client, upstream, call, delay)
                text_runs = [await run_text(client, upstream, text, delay) for _ in range(repeats)]
                call_runs = [await run_call(client, upstream, call, delay) for _ in range(repeats)]
                await client.close()
    return text_runs, call_runs, text, call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per scenario (median shown)")
    parser.add_argument("--delay-ms", type=float, default=3.0, help="upstream delay per chunk")
    parser.add_argument("--quick", action="store_true", help="2 runs per scenario")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    text_runs, call_runs, text, call = asyncio.run(measure(repeats, args.delay_ms / 1000))

    a, b = text_runs, call_runs
    share = median_of(a, "share")
    after = median_of(b, "chunks_after_name")
    a_ok, a_good = correctness(a)
    b_ok, b_good = correctness(b)
    rows: list[tuple[str, str, str, bool | None]] = [
        ("(a) text bytes before the upstream's last chunk", pct(share), ">= 95%", share >= 0.95),
        (
            "(a) first text byte, from upstream's first text chunk",
            ms(median_of(a, "first_up")),
            "",
            None,
        ),
        ("(a) first text byte, from the request", ms(median_of(a, "first_req")), "", None),
        ("(a) text chunk upstream -> client, median", ms(median_of(a, "delay_median")), "", None),
        ("(a) text chunk upstream -> client, worst", ms(median_of(a, "delay_max")), "", None),
        ("(a) last text byte after upstream's last chunk", ms(median_of(a, "lag_end")), "", None),
        ("(a) output_text.delta events", f"{median_of(a, 'deltas'):.0f}", "", None),
        ("(a) deltas and done text equal the script", a_ok, "ok", a_good),
        ("(b) function_call_arguments.delta events", f"{median_of(b, 'deltas'):.0f}", "", None),
        ("(b) first arg delta: upstream chunks after the name", f"{after:g}", "<= 1", after <= 1),
        ("(b) first arg delta, from the name chunk", ms(median_of(b, "first_name")), "", None),
        ("(b) first arg delta, from the request", ms(median_of(b, "first_req")), "", None),
        ("(b) function_call item added, from the name chunk", ms(median_of(b, "added")), "", None),
        ("(b) arg bytes before the upstream's last chunk", pct(median_of(b, "share")), "", None),
        ("(b) arg chunk upstream -> client, median", ms(median_of(b, "delay_median")), "", None),
        ("(b) last arg byte after upstream's last chunk", ms(median_of(b, "lag_end")), "", None),
        ("(b) deltas, done, final arguments equal the script", b_ok, "ok", b_good),
    ]

    title = (
        f"Live streaming through /v1/responses: (a) {len(text.chunks)} chunks, "
        f"{len(ANSWER.encode())} text bytes; (b) {len(call.chunks)} chunks, {len(ARGUMENTS)} argument "
        f"bytes; {args.delay_ms:g} ms per chunk; median of {repeats}"
    )
    table = Table(title=title)
    for column in ("figure", "value", "target", "met"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    missed = []
    for figure, value, target, met in rows:
        mark = "" if met is None else ("yes" if met else "[bold red]MISSED[/]")
        if met is False:
            missed.append(figure)
        table.add_row(figure, value, target, mark)
    console = Console(width=None if sys.stdout.isatty() else 110)
    console.print(table)
    if missed:
        console.print(f"[bold red]MISSED[/] {len(missed)} target(s): " + "; ".join(missed))
    else:
        console.print("all targets met")


if __name__ == "__main__":
    main()
