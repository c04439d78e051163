"""The leak detector against the corpus in tests/data/leaks and a few properties.

positives.jsonl: `{"family", "text", "calls", "drift"?, "reasoning"?}`; a line with `reasoning`
is a call at the end of the reasoning with `text` as the (empty) visible answer.
negatives.jsonl: `{"kind", "text", "reasoning"?}`: nothing there may be taken for a leak.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.leaks import LeakMatch, detect_leak, detect_leak_in_reasoning, strip_reasoning
from toolwire.leaks.formats import DRIFTS, END_TOKENS, FORMAT_BY_FAMILY, FORMATS

DATA = Path(__file__).parent.parent / "data" / "leaks"


def _load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


POSITIVES = _load("positives.jsonl")
NEGATIVES = _load("negatives.jsonl")


def _detect(line: dict[str, Any]) -> tuple[str, LeakMatch | None]:
    """The text the match indexes into, and the match."""
    if "reasoning" in line:
        return line["reasoning"], detect_leak_in_reasoning(line["reasoning"], line["text"])
    return line["text"], detect_leak(line["text"])


def test_corpus_is_big_enough_and_covers_every_family_and_drift() -> None:
    assert len(POSITIVES) >= 70
    assert len(NEGATIVES) >= 70
    assert {f.family for f in FORMATS} <= {line["family"] for line in POSITIVES}
    assert {d.id for d in DRIFTS} <= {line.get("drift") for line in POSITIVES}
    for line in POSITIVES:
        assert line["family"] in FORMAT_BY_FAMILY
        if "drift" in line:
            assert next(d for d in DRIFTS if d.id == line["drift"]).family == line["family"]


@pytest.mark.parametrize(
    "line", POSITIVES, ids=[f"{i + 1}-{p['family']}" for i, p in enumerate(POSITIVES)]
)
def test_positive_is_detected_with_its_family(line: dict[str, Any]) -> None:
    source, match = _detect(line)
    assert match is not None, source
    assert match.family == line["family"]
    assert match.end == len(source)
    call = source[match.start : match.end].strip()
    assert match.snippet == call or call.startswith(match.snippet.removesuffix("…"))


@pytest.mark.parametrize(
    "line", POSITIVES, ids=[f"{i + 1}-{p['family']}" for i, p in enumerate(POSITIVES)]
)
def test_start_cuts_exactly_the_call(line: dict[str, Any]) -> None:
    source, match = _detect(line)
    assert match is not None
    before = source[: match.start]
    assert detect_leak(before) is None
    assert not any(marker in before for marker in FORMAT_BY_FAMILY[match.family].markers)
    assert not source[match.start].isspace()
    # What precedes the call is the prose the caller keeps; the call itself is not in it.
    assert source[match.start :].strip()


@pytest.mark.parametrize(
    "line", NEGATIVES, ids=[f"{i + 1}-{n['kind']}" for i, n in enumerate(NEGATIVES)]
)
def test_negative_never_fires(line: dict[str, Any]) -> None:
    assert detect_leak(line["text"]) is None
    if "reasoning" in line:
        assert detect_leak_in_reasoning(line["reasoning"], line["text"]) is None


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize(
    "tail", ["", "\n", *END_TOKENS, "<|eot_id|>\n", "\n</tool_call>\n</function>", "</x><|im_end|>"]
)
def test_end_tokens_and_stray_closers_may_follow(tail: str) -> None:
    text = "Checking.\n" + CALL + tail
    match = detect_leak(text)
    assert match is not None and match.start == len("Checking.\n") and match.end == len(text)


def test_prose_after_the_call_is_not_a_leak() -> None:
    assert detect_leak("Checking.\n" + CALL + "\nIt is sunny in Paris today.") is None


def test_truncated_tail_still_fires() -> None:
    match = detect_leak('One moment.\n<tool_call>\n{"name": "get_weather", "arguments": {"ci')
    assert match is not None and match.family == "hermes"


def test_call_inside_a_fence_counts_only_when_the_fence_is_the_message() -> None:
    fenced = "```xml\n" + CALL + "\n```"
    match = detect_leak(fenced)
    assert match is not None and match.start == 0
    assert detect_leak("An example:\n\n" + fenced) is None


def test_unclosed_leading_think_is_all_reasoning() -> None:
    assert detect_leak("<think>I will call it.\n" + CALL) is None
    match = detect_leak_in_reasoning("I will call it.\n" + CALL, "")
    assert match is not None and match.family == "hermes"


def test_reasoning_is_only_consulted_when_nothing_is_visible() -> None:
    reasoning = "I will call it.\n" + CALL
    assert detect_leak_in_reasoning(reasoning, "It is sunny.") is None
    assert detect_leak_in_reasoning(reasoning, "  \n") is not None
    assert detect_leak_in_reasoning("", "") is None


def test_start_is_an_offset_in_the_original_text() -> None:
    text = "<think>Which city? Paris.</think>\n\nOn it.\n" + CALL
    match = detect_leak(text)
    assert match is not None
    assert text[match.start :].startswith("<tool_call>")
    assert text[: match.start].endswith("On it.\n")


def test_the_call_body_may_quote_its_own_markers() -> None:
    body = '{"name": "write_file", "arguments": {"content": "see <tool_call> and [TOOL_CALLS]"}}'
    text = f"Saving.\n<tool_call>\n{body}\n</tool_call>"
    match = detect_leak(text)
    assert match is not None and match.start == len("Saving.\n")


def test_long_answer_with_a_leak_at_the_end() -> None:
    prose = "A long explanation of the change, with [links](x) and {braces}. " * 800
    match = detect_leak(prose + "\n" + CALL)
    assert match is not None and match.start == len(prose) + 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>plan</think>\n\nThe answer.", "The answer."),
        ("<think>still thinking, no close", ""),
        ("reasoning whose opening tag was in the prompt</think>\nThe answer.", "The answer."),
        ("<seed:think>plan</seed:think>The answer.", "The answer."),
        ("<thinking>plan</thinking>The answer.", "The answer."),
        ("[THINK]plan[/THINK]The answer.", "The answer."),
        ("◁think▷plan◁/think▷The answer.", "The answer."),
        (
            "<|channel|>analysis<|message|>plan<|end|>"
            "<|start|>assistant<|channel|>final<|message|>The answer.",
            "The answer.",
        ),
        ("analysisplan.assistantfinalThe answer.", "The answer."),
        ("analysis of the data shows growth.", "analysis of the data shows growth."),
        ("No reasoning here.\n", "No reasoning here.\n"),
        ("<think>a</think>Step one. <think>b</think>Step two.", "Step one. Step two."),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


_WORDS = (
    "the a tool call model server answer weather Paris name arguments function json python "
    "think call: get_weather result parser token DeepSeek Qwen Llama I'll let me check"
)
WORDS = st.sampled_from(_WORDS.split(" "))
PUNCT = st.sampled_from([*".,;:!?'\"()-—…*#%&/\\_=+`~@$0123456789", "\n", "\n\n", " "])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(WORDS, PUNCT), max_size=80), st.sampled_from(["", " ", "\n"]))
def test_random_prose_never_triggers(tokens: list[str], sep: str) -> None:
    text = sep.join(tokens)
    assert detect_leak(text) is None
    assert detect_leak_in_reasoning(text, "") is None


QUOTED = st.sampled_from(
    sorted({m for f in FORMATS for m in f.markers})
    + [CALL, "[f(a=1)]", '{"name": "f", "arguments": {}}', "<function=bash></function>"]
    # Whole calls only: text after a call cut off or missing its closers is part of its value.
    + [p["text"] for p in POSITIVES if p["text"].rstrip()[-1:] in (">", "}", "]", ")", "[")]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(WORDS, PUNCT), max_size=30),
    QUOTED,
    st.lists(WORDS, min_size=2, max_size=12),
)
def test_tool_syntax_followed_by_more_prose_never_triggers(
    before: list[str], quoted: str, after: list[str]
) -> None:
    text = " ".join(before) + " " + quoted + " " + " ".join(after) + "."
    assert detect_leak(text) is None
