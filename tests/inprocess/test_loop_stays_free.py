"""The event loop is never held by a check on untrusted input: while a `custom` tool's grammar
is checked against a huge input the model wrote, `/health` still answers.

The attack: a 1 MB custom-tool input stalled `/health` 3.6-6.3 s in the grammar check. The bound
asserted here is generous (the subject is latency, but CI machines are loaded): far below what
the check takes, far above a free loop's answer time.

`/health` is asked as a tight prober would, every few milliseconds, not back to back: a client
that asks with no pause at all keeps the loop busy every instant, and the database's worker
thread (aiosqlite) then waits for the GIL at each statement, so the run under test crawls for
a reason that is not the subject here."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import pytest

from tests.inprocess_gateway import AppGateway
from toolwire.loop.grammars import grammar_problem
from toolwire.testing import Chunks, Reply

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
    gw.upstream.add(Reply(tool_calls=[("code", {"input": HUGE})]))
    run = asyncio.create_task(
        gw.http.post(
            "/v1/responses",
            json={"model": "m", "input": "go", "tools": [CODE_TOOL]},
            timeout=RUN_TIMEOUT,
        )
    )
    slowest, _ = await _probe_health_until_done(gw, run)
    answer = await run
    assert answer.status_code == 200
    assert answer.json()["output"][0]["type"] == "custom_tool_call"
    assert slowest < max(0.5, check_seconds / 2), (slowest, check_seconds)


def _hostile_stream(pattern: str, total: int = 1024 * 1024, piece: int = 4096) -> Chunks:
    """A scripted upstream streaming `total` bytes of `pattern` repeated, never closed, as
    content deltas of `piece` bytes: what the hold-back and leak scanning must judge."""
    text = (pattern * (total // len(pattern) + 1))[:total]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-hostile",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    pieces = [chunk({"content": text[i : i + piece]}) for i in range(0, total, piece)]
    return Chunks([chunk({"role": "assistant"}), *pieces, chunk({}, "stop")])


@pytest.mark.parametrize("pattern", ["<tool_call>", '{"name": '])
async def test_health_answers_while_the_hold_back_scans_a_hostile_stream(
    gw: AppGateway, pattern: str
) -> None:
    """1 MiB of unclosed `<tool_call>` (or nested `{"name": `) streamed by the upstream: each
    `/health` while it is scanned answers within 500 ms: generous (latency is the subject, CI
    machines are loaded; unloaded the longest step is ~55 ms), and 5x below the 2.5 s stall of
    a loop that never yielded while the hold-back judged a flooded turn."""
    gw.upstream.add(_hostile_stream(pattern))
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    run = asyncio.create_task(
        gw.http.post(
            "/v1/responses",
            json={"model": "m", "input": "go", "tools": [tool], "stream": True},
            timeout=RUN_TIMEOUT,
        )
    )
    slowest, asked_while_running = await _probe_health_until_done(gw, run)
    answer = await run
    assert answer.status_code == 200
    assert asked_while_running > 1
    assert slowest < 0.5, (slowest, asked_while_running)


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
