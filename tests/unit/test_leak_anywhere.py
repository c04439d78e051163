"""Leaked calls anywhere in the turn, drawn from the model servers' own parser tests.

tests/data/leaks/servers.jsonl: each line names its `source` (vLLM `tests/tool_parsers/...`,
SMG `crates/tool_parser/tests/...`, or the issue), the `names` of the declared tools, and the
text (and `reasoning`). Positives (`family`) give the calls salvage must read and the prose
the client keeps (`kept`: everything before the first leaked call); negatives (`kind`) are
prose even with every quoted tool declared, and say `why`.

Every positive is also streamed through the hold-back, cut in many ways: not one character from
the first leaked call on may be shown before the turn ends.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.leaks import detect_leak, detect_leak_in_reasoning, salvage_calls
from toolwire.leaks.registry import FORMAT_BY_FAMILY
from toolwire.leaks.standalone import names_matcher
from toolwire.loop.holdback import Holdback

DATA = Path(__file__).parent.parent / "data" / "leaks"
with (DATA / "servers.jsonl").open(encoding="utf-8") as _f:
    LINES = [json.loads(line) for line in _f if line.strip()]
POSITIVES = [line for line in LINES if "family" in line]
NEGATIVES = [line for line in LINES if "kind" in line]


def _source(line: dict[str, Any]) -> str:
    return str(line["reasoning"] if "reasoning" in line else line["text"])


def _detect(line: dict[str, Any], names: list[str] | None) -> Any:
    if "reasoning" in line:
        return detect_leak_in_reasoning(line["reasoning"], line["text"], names)
    return detect_leak(line["text"], names)


def test_the_corpus_draws_on_each_server_and_covers_what_the_issue_names() -> None:
    sources = " ".join(line["source"] for line in LINES)
    assert "vllm tests/tool_parsers/" in sources and "smg crates/tool_parser/" in sources
    assert len(POSITIVES) >= 25 and len(NEGATIVES) >= 12
    families = {line["family"] for line in POSITIVES}
    assert {"gigachat3", "cohere_command", "xlam", "lfm2", "llama31_function"} <= families
    assert all(line["family"] in FORMAT_BY_FAMILY for line in POSITIVES)
    # Text after the last call, and sibling blocks with prose between them, are both there.
    spans = [(p["text"], _detect(p, p["names"]).spans) for p in POSITIVES if p["text"]]
    assert sum(blocks[-1][1] < len(text.rstrip()) for text, blocks in spans) >= 10
    assert sum(len(blocks) > 1 for _, blocks in spans) >= 3


@pytest.mark.parametrize("line", POSITIVES, ids=[p["source"][:70] for p in POSITIVES])
def test_a_leak_is_found_wherever_it_stands(line: dict[str, Any]) -> None:
    match = _detect(line, line["names"])
    assert match is not None, line["source"]
    assert match.family == line["family"]
    source = _source(line)
    assert source[: match.start] == line["kept"]  # the prose before the first call is kept
    assert match.end == len(source.rstrip()) or source[match.end :].strip() == ""


@pytest.mark.parametrize("line", POSITIVES, ids=[p["source"][:70] for p in POSITIVES])
def test_salvage_reads_every_block_and_no_prose(line: dict[str, Any]) -> None:
    match = _detect(line, line["names"])
    assert match is not None
    if line["calls"] is None:
        with pytest.raises(ValueError, match="not valid Python"):
            salvage_calls(_source(line), match)
        return
    calls = [
        {"name": c.name, "arguments": c.arguments} for c in salvage_calls(_source(line), match)
    ]
    assert calls == line["calls"]


@pytest.mark.parametrize("line", NEGATIVES, ids=[n["source"][:70] for n in NEGATIVES])
def test_a_quoted_call_is_prose(line: dict[str, Any]) -> None:
    """Even with every tool the text names declared: the rule rests on the markup, the line
    and the fence, not on luck with names."""
    assert _detect(line, line["names"]) is None, line["why"]
    assert _detect(line, None) is None


def test_without_declared_names_only_a_call_that_ends_the_turn_counts() -> None:
    after = [p for p in POSITIVES if p["text"] and detect_leak(p["text"], p["names"]) is not None]
    ending = [p for p in after if detect_leak(p["text"]) is not None]
    followed = [p for p in after if detect_leak(p["text"]) is None]
    assert ending and followed  # both kinds are in the corpus
    for line in followed:
        assert line["text"][detect_leak(line["text"], line["names"]).start :].strip()


def _stream(text: str, cuts: list[int], names: list[str]) -> tuple[str, Holdback]:
    held = Holdback(names=names)
    shown = ""
    prev = 0
    for cut in [*sorted(set(cuts)), len(text)]:
        if prev < cut:
            shown += held.feed(text[prev:cut])
            prev = cut
    return shown, held


STREAMED = [p for p in POSITIVES if p["text"]]


@pytest.mark.parametrize("line", STREAMED, ids=[p["source"][:70] for p in STREAMED])
def test_the_hold_back_never_shows_a_leak_before_the_turn_ends(line: dict[str, Any]) -> None:
    text, names = line["text"], line["names"]
    start = detect_leak(text, names).start
    rng = random.Random(len(text))
    cuttings = [list(range(step, len(text), step)) for step in (1, 2, 3, 4, 7, 16)]
    cuttings += [sorted(rng.sample(range(1, len(text)), min(12, len(text) - 1))) for _ in range(8)]
    for cuts in cuttings:
        shown, held = _stream(text, cuts, names)
        assert len(shown) <= start, (cuts[:5], shown[start:])
        assert shown + held.release(start) == text[:start]  # the prose before it, once


@pytest.mark.parametrize("line", STREAMED, ids=[p["source"][:70] for p in STREAMED])
def test_after_long_prose_the_leak_is_still_held(line: dict[str, Any]) -> None:
    """Past the hold's trimming of old text and its judging allowance."""
    prose = "A long answer about [links](u), {braces} and <b>tags</b>, line after line.\n" * 1200
    text = prose + line["text"]
    match = detect_leak(text, line["names"])
    if match is None:
        pytest.skip("a shape that counts only as the whole message")
    start = match.start
    for step in (5, 64, 4096):
        shown, _ = _stream(text, list(range(step, len(text), step)), line["names"])
        assert len(shown) <= start


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_split_never_shows_markup_later_recovered(data: Any) -> None:
    line = data.draw(st.sampled_from(STREAMED))
    text = line["text"]
    start = detect_leak(text, line["names"]).start
    cuts = data.draw(st.lists(st.integers(1, len(text) - 1), max_size=30))
    shown, _ = _stream(text, cuts, line["names"])
    assert len(shown) <= start


@pytest.mark.parametrize("line", NEGATIVES, ids=[n["source"][:70] for n in NEGATIVES])
def test_a_quoted_call_is_shown_in_full(line: dict[str, Any]) -> None:
    text = line["text"]
    shown, held = _stream(text, list(range(3, len(text), 3)), line["names"])
    assert shown + held.release() == text


def test_a_set_of_names_has_one_matcher_shared_by_every_turn() -> None:
    first = names_matcher({"get_weather", "get_time"})
    assert first is not None
    assert names_matcher(["get_time", "get_weather"]) is first
    assert names_matcher({"get_weather"}) is not first
    assert names_matcher(None) is None
