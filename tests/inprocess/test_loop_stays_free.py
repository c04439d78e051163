"""No request holds the event loop (issue #39): while one request's untrusted input is checked
(a `custom` tool's grammar against a megabyte the model wrote), judged for leaked calls (a
megabyte of each degenerate kind of text: unclosed braces, open fences, tags, `{"name": `
repeats, brackets; streamed, or in one delta) or assembled (a megabyte of one call's
arguments, settled live and repaired), `/health` still answers.

The attacks: a 1 MB custom-tool input stalled `/health` 3.6-6.3 s in the grammar check; 1 MiB
of unclosed `{` 3.7 s, of open fences 1.9 s.

Two bounds, because CI machines are loaded. `LoopWatch` measures the CPU time the loop's own
thread spends between two turns of a heartbeat: how long one step of work held the loop,
unaffected by other processes on the cores; it is held to the issue's 100 ms
(`HOLD_BOUND`). `/health`'s wall-clock answer time is held to 500 ms (`HEALTH_BOUND`): on
this project's shared 2-core CI (load ~8) a free loop's answer itself takes up to ~150 ms when
the process waits for a core, so 100 ms of wall time would fail for reasons that are not the
subject; 500 ms still lies far below every stall the attacks caused.

`/health` is asked as a tight prober would, every few milliseconds, not back to back: a client
that asks with no pause at all keeps the loop busy every instant, and the store's threads
(the writer's, the readers') then wait for the GIL, so the run under test crawls for a reason
that is not the subject here."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway
from toolwire.loop.grammars import grammar_problem
from toolwire.testing import Chunks, Reply

MIB = 1024 * 1024
#: CPU time of the loop's thread one step may take (the issue's goal).
HOLD_BOUND = 0.1
#: Wall time `/health` may take on a loaded CI machine (see the docstring).
HEALTH_BOUND = 0.5
#: Between two heartbeats of `LoopWatch`.
HEARTBEAT = 0.002
CODE_TOOL = {
    "type": "custom",
    "name": "code",
    "format": {"type": "grammar", "syntax": "regex", "definition": r"[a-z]+\d"},
}
HUGE = "a" * (1024 * 1024) + "1"
#: Between two `/health` asks: a tight prober's pace.
PROBE_PAUSE = 0.005
#: The run's own answer may take long (a megabyte checked and stored); its latency is not the
#: subject, only `/health`'s.
RUN_TIMEOUT = 60.0


async def test_health_answers_while_a_grammar_check_runs(gw: AppGateway) -> None:
    started = time.perf_counter()
    assert grammar_problem("regex", r"[a-z]+\d", HUGE) is None
    check_seconds = time.perf_counter() - started
    await _warm(gw, "/v1/responses", {"model": "m", "input": "go", "tools": [CODE_TOOL]})
    gw.upstream.add(Reply(tool_calls=[("code", {"input": HUGE})]))
    run = asyncio.create_task(
        gw.http.post(
            "/v1/responses",
            json={"model": "m", "input": "go", "tools": [CODE_TOOL]},
            timeout=RUN_TIMEOUT,
        )
    )
    async with LoopWatch() as watch:
        slowest, _ = await _probe_health_until_done(gw, run)
    answer = await run
    assert answer.status_code == 200
    assert answer.json()["output"][0]["type"] == "custom_tool_call"
    assert slowest < max(HEALTH_BOUND, check_seconds / 2), (slowest, check_seconds)
    assert watch.longest_hold < HOLD_BOUND, watch.longest_hold


def _hostile_stream(
    pattern: str, total: int = MIB, piece: int = 4096, field: str = "content"
) -> Chunks:
    """A scripted upstream streaming `total` characters of `pattern` repeated, never closed,
    in deltas of `piece` characters: as text (`content`), reasoning, or one call's arguments
    (`arguments`). One delta of the whole is a server that answered a streamed request in one
    chunk."""
    text = (pattern * (total // len(pattern) + 1))[:total]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-hostile",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def piece_of(part: str) -> dict[str, Any]:
        if field != "arguments":
            return {field: part}
        return {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}

    head: list[dict[str, Any]] = [chunk({"role": "assistant"})]
    if field == "arguments":
        call = {"index": 0, "id": "call_1", "type": "function"}
        head.append(
            chunk({"tool_calls": [{**call, "function": {"name": "lookup", "arguments": ""}}]})
        )
    pieces = [chunk(piece_of(text[i : i + piece])) for i in range(0, total, piece)]
    finish = "tool_calls" if field == "arguments" else "stop"
    return Chunks([*head, *pieces, chunk({}, finish)])


#: The degenerate kinds of issue #39: unclosed braces, open fences, tags, `{"name": ` repeats,
#: and the other one-character openers.
KINDS = {
    "unclosed braces": "{",
    "open fences": "```\n",
    "tags": "<tool_call>",
    "name repeats": '{"name": ',
    "brackets": "[",
}
TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
MESSAGES_TOOL = {"name": "lookup", "input_schema": {"type": "object"}}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_health_answers_while_a_streamed_megabyte_of_degenerate_text_is_judged(
    gw: AppGateway, kind: str
) -> None:
    """1 MiB of each degenerate kind streamed as text in 4 KiB deltas, on the Responses door
    (SSE): the hold-back judges it as it comes, the detector at the end."""
    body = {"model": "m", "input": "go", "tools": [TOOL], "stream": True}
    await _warm(gw, "/v1/responses", body)
    gw.upstream.add(_hostile_stream(KINDS[kind]))
    await _run_and_watch(gw, "/v1/responses", body)


@pytest.mark.parametrize("kind", ["unclosed braces", "open fences", "name repeats"])
async def test_health_answers_while_a_megabyte_in_one_piece_is_judged(
    gw: AppGateway, kind: str
) -> None:
    """The same megabyte in one piece (the upstream's whole JSON answer to a request that did
    not stream), on the Messages door: judged in slices with the loop free between them."""
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "go"}]}
    body["tools"] = [MESSAGES_TOOL]
    await _warm(gw, "/v1/messages", body)
    gw.upstream.add(Reply(text=(KINDS[kind] * MIB)[:MIB]))
    await _run_and_watch(gw, "/v1/messages", body)


@pytest.mark.parametrize(
    "arguments", ['{"name": ', "{" + "'k': 1, " * 4, '{"a": [1, '], ids=["nested", "repair", "open"]
)
async def test_health_answers_while_a_megabyte_of_arguments_is_assembled(
    gw: AppGateway, arguments: str
) -> None:
    """A megabyte of one call's arguments in one chunk, streamed live as `tool_use` input on
    the Messages door: settled in 4 KiB deltas, parsed (and repaired: json-repair is seconds
    of Python on a megabyte) on a worker thread."""
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "go"}]}
    body.update(tools=[MESSAGES_TOOL], stream=True)
    await _warm(gw, "/v1/messages", body)
    if arguments.startswith("{'"):
        # It balances, so json-repair runs: a quarter of a megabyte is already ~0.3 s of it
        # (the whole megabyte, 1.5 s, would only make the test slower).
        text = "{" + "'k': 1, " * (MIB // 32) + "'z': 2}"
    else:
        text = (arguments * (MIB // len(arguments) + 1))[:MIB]
    gw.upstream.add(_hostile_stream(text, total=len(text), piece=len(text), field="arguments"))
    await _run_and_watch(gw, "/v1/messages", body)


async def _warm(gw: AppGateway, path: str, body: dict[str, Any]) -> None:
    """The same request once with a short answer first: what a process imports and compiles on
    its first request of a kind (a door's schemas, the tools' validators) is not the subject."""
    gw.upstream.add(Reply(text="warm"))
    assert (await gw.http.post(path, json=body)).status_code == 200


async def _run_and_watch(gw: AppGateway, path: str, body: dict[str, Any]) -> None:
    run = asyncio.create_task(gw.http.post(path, json=body, timeout=RUN_TIMEOUT))
    async with LoopWatch() as watch:
        slowest, asks = await _probe_health_until_done(gw, run)
    answer = await run
    # Re-asked calls find the script empty (an upstream error): the run's outcome is not the
    # subject, only that it ended.
    assert answer.status_code in (200, 502), answer.text[:300]
    assert asks > 1
    assert watch.longest_hold < HOLD_BOUND, (watch.longest_hold, slowest)
    assert slowest < HEALTH_BOUND, (slowest, watch.longest_hold)


class LoopWatch:
    """The longest stretch of CPU time the event loop's thread spent between two turns of a
    heartbeat task: how long any one step of work held the loop. CPU time of the loop's own
    thread, not wall time, so a loaded machine (other processes on the cores, a worker thread
    holding the GIL) does not count, and the bound can be the issue's 100 ms."""

    def __init__(self) -> None:
        self.longest_hold = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopWatch:
        self._task = asyncio.create_task(self._beat())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _beat(self) -> None:
        last = time.thread_time()
        while True:
            await asyncio.sleep(HEARTBEAT)
            now = time.thread_time()
            self.longest_hold = max(self.longest_hold, now - last)
            last = now


async def _probe_health_until_done(gw: AppGateway, run: asyncio.Task[Any]) -> tuple[float, int]:
    """Ask `/health` every `PROBE_PAUSE` until `run` is done: the slowest answer (counted from
    the end of the pause the prober meant to take, so a loop held during the pause shows too)
    and how many asks were made."""
    slowest, asks = 0.0, 0
    while not run.done():
        paused = time.perf_counter()
        await asyncio.sleep(PROBE_PAUSE)
        health = await gw.http.get("/health")
        slowest = max(slowest, time.perf_counter() - paused - PROBE_PAUSE)
        asks += 1
        assert health.status_code == 200
    return slowest, asks


def _large_pdf(door: str) -> bytes:
    """500 pages (all that is read of one PDF) of a few lines, distinct per door (the gateway
    remembers a PDF it has read): ~1 s of pypdf's pure-Python parsing on an idle core."""
    from tests.pdfs import make_pdf

    lines = "\n".join(["Costs fell in every region but one.", "Margins held."] * 2)
    return make_pdf([f"{door} report, page {n}: revenue grew {n}%\n{lines}" for n in range(1, 501)])


def _pdf_request(door: str, pdf: bytes) -> tuple[str, dict[str, Any]]:
    data = base64.b64encode(pdf).decode()
    if door == "messages":
        document = {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        }
        content = [document, {"type": "text", "text": "Summarize."}]
        return "/v1/messages", {
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": content}],
        }
    url = f"data:application/pdf;base64,{data}"
    if door == "responses":
        part = {"type": "input_file", "filename": "report.pdf", "file_data": url}
        return "/v1/responses", {"model": "m", "input": [{"role": "user", "content": [part]}]}
    part = {"type": "file", "file": {"filename": "report.pdf", "file_data": url}}
    return "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": [part]}]}


@pytest.fixture(scope="module")
def pdf_read_seconds() -> float:
    """How long reading one of these PDFs takes here, on this thread (with pypdf imported)."""
    from toolwire.documents import read_pdf

    pdf = _large_pdf("timed")
    started = time.perf_counter()
    read_pdf(pdf)
    return time.perf_counter() - started


@pytest.mark.parametrize("door", ["messages", "responses", "chat"])
async def test_health_answers_while_a_large_pdf_is_read(
    gw: AppGateway, pdf_read_seconds: float, door: str
) -> None:
    """A 500-page PDF on each door that takes documents: its text is read off the loop (a
    worker process: `pdf_readers.read_ahead`), so `/health` answers meanwhile, and the model
    still reads every page of it. Read on the loop, `/health` waited the whole read (~1 s on an
    idle core, more loaded); in a thread, a full garbage collection it set off (0.4-1.3 s)."""
    gw.upstream.add(Reply(text="Revenue grew."))
    path, body = _pdf_request(door, _large_pdf(door))
    run = asyncio.create_task(gw.http.post(path, json=body, timeout=RUN_TIMEOUT))
    slowest, asked_while_running = await _probe_health_until_done(gw, run)
    answer = await run
    assert answer.status_code == 200, answer.text
    sent = str(gw.upstream.chat_requests[-1].body["messages"])
    assert "--- page 500 ---" in sent and f"{door} report, page 500: revenue grew 500%" in sent
    assert asked_while_running > 1
    assert slowest < max(0.5, pdf_read_seconds / 2), (slowest, pdf_read_seconds)
