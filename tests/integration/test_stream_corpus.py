"""The stream corpus: every delta variant real servers send, through the real HTTP path.

Each file in `tests/data/streams/` is one case: the chunks exactly as a server sent them, the
declared tools, and the calls (or the error) a correct assembler must produce.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolwire import errors
from toolwire.testing import Body, Chunks, ScriptedUpstream
from toolwire.transcript import ToolSpec, UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import ReasoningDelta, TextDelta, ToolCallDone, TurnEnd

STREAMS = Path(__file__).parent.parent / "data" / "streams"
REFERENCE = Path(__file__).parents[3] / "shared" / "reference" / "stream-variants.md"
CASES = sorted(STREAMS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def turns_of(case: dict[str, Any]) -> list[Chunks | Body]:
    turns: list[Chunks | Body] = []
    for turn in case["turns"]:
        if "chunks" in turn:
            turns.append(
                Chunks(
                    turn["chunks"],
                    done=turn.get("done", True),
                    disconnect_after=turn.get("disconnect_after"),
                )
            )
        else:
            turns.append(Body(turn["body"], status=turn.get("status", 200)))
    return turns


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedUpstream() as upstream:
        yield upstream


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


def test_corpus_covers_every_variant_of_the_reference() -> None:
    variants = (STREAMS / "VARIANTS.txt").read_text(encoding="utf-8").splitlines()
    if REFERENCE.exists():
        rows = [
            line.split("|")[1].strip()
            for line in REFERENCE.read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| variant") and "---" not in line
        ]
        assert rows == variants, "VARIANTS.txt has drifted from shared/reference"
    covered = {load(path)["variant"] for path in CASES}
    missing = [v for v in variants if v not in covered]
    assert not missing, f"variants with no corpus case: {missing}"
    unknown = covered - set(variants)
    assert not unknown, f"cases name variants the reference does not have: {unknown}"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_case(path: Path, server: ScriptedUpstream) -> None:
    case = load(path)
    expect = case["expect"]
    server.add(*turns_of(case))
    upstream = ChatCompletionsUpstream(server.base_url, max_retries=1, initial_backoff=0.01)
    tools = [ToolSpec(name) for name in case.get("tools", [])]
    request = TurnRequest("m", [UserMessage("go")], tools=tools, stream=case.get("stream", True))
    events = []
    try:
        if "error" in expect:
            with pytest.raises(getattr(errors, expect["error"])):
                async for event in upstream.stream_turn(request):
                    events.append(event)
            return
        async for event in upstream.stream_turn(request):
            events.append(event)
    finally:
        await upstream.aclose()
        while server.remaining:  # a failed case must not leave turns for the next one
            server._turns.popleft()

    calls = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert len(calls) == len(expect["calls"]), [c for c in calls]
    for got, want in zip(calls, expect["calls"], strict=True):
        if "parse_error" in want:
            assert got.parse_error is not None, got
            assert want["parse_error"].lower() in got.parse_error.lower(), got.parse_error
            assert got.arguments is None
            if "raw_arguments" in want:
                assert got.raw_arguments == want["raw_arguments"]
        else:
            assert got.parse_error is None, got.parse_error
            assert got.name == want["name"]
            assert got.arguments == want["arguments"]
        if "id" in want:
            assert got.id == want["id"]
    ids = [c.id for c in calls]
    assert all(ids) and len(set(ids)) == len(ids), f"call ids must be present and distinct: {ids}"
    if "text" in expect:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == expect["text"]
    if "reasoning" in expect:
        assert (
            "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == expect["reasoning"]
        )
    ends = [e for e in events if isinstance(e, TurnEnd)]
    assert len(ends) == 1 and events[-1] is ends[0]
    if "finish_reason" in expect:
        assert ends[0].finish_reason == expect["finish_reason"]
