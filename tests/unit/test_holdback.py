"""The streaming hold-back: leaked calls are never shown before the turn ends, everything else
streams (code, Markdown, links, HTML, JSON examples), and the work per delta stays linear."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.leaks import detect_leak
from toolwire.loop.holdback import Holdback

DATA = Path(__file__).parent.parent / "data" / "leaks"
with (DATA / "positives.jsonl").open(encoding="utf-8") as _f:
    POSITIVES = [json.loads(line) for line in _f if line.strip()]
VISIBLE = [p for p in POSITIVES if "reasoning" not in p and detect_leak(p["text"]) is not None]


def stream(text: str, cuts: list[int]) -> tuple[list[int], Holdback]:
    """Feed `text` cut at `cuts`; return how much had been shown after each delta."""
    held = Holdback()
    shown: list[int] = []
    total = ""
    prev = 0
    for cut in [*sorted(set(cuts)), len(text)]:
        if cut <= prev:
            continue
        total += held.feed(text[prev:cut])
        prev = cut
        assert total == text[: held.released]
        shown.append(held.released)
    return shown, held


def released_before_end(text: str, step: int) -> int:
    _, held = stream(text, list(range(step, len(text), step)))
    return held.released


@pytest.mark.parametrize(
    "line", VISIBLE, ids=[f"{i + 1}-{p['family']}" for i, p in enumerate(VISIBLE)]
)
@pytest.mark.parametrize("prose", ["", "Let me check that for you.\n\n", "Sure, one moment: "])
def test_no_leaked_character_is_shown_before_the_turn_ends(
    line: dict[str, Any], prose: str
) -> None:
    text = prose + line["text"]
    match = detect_leak(text)
    if match is None:
        pytest.skip("this sample only counts as the whole message")
    for step in (1, 2, 3, 5, 8, 13):
        assert released_before_end(text, step) <= match.start, step
    # ... and split at every single character, two cuts at a time around it.
    for i in range(1, len(text)):
        shown, held = stream(text, [i - 1, i, i + 1])
        assert held.released <= match.start
        assert (
            held.release(match.start) == text[shown[-1] : match.start] or shown[-1] >= match.start
        )


@pytest.mark.parametrize(
    "line", VISIBLE, ids=[f"{i + 1}-{p['family']}" for i, p in enumerate(VISIBLE)]
)
def test_release_at_the_leak_shows_only_the_prose_before_it(line: dict[str, Any]) -> None:
    text = "Working on it.\n" + line["text"]
    match = detect_leak(text)
    if match is None:
        pytest.skip("whole-message sample")
    _, held = stream(text, list(range(4, len(text), 4)))
    before = held.released
    assert text[before : match.start] == held.release(match.start)
    assert held.released == match.start


NON_LEAKS = [
    "Here is the fix:\n\n```python\ndef f(x):\n    return {'a': [x, (1, 2)]}\n\nprint(f(3))\n```\n\n"
    "Run it with `python f.py`.",
    "```python\nimport os\nprint(os.listdir('.'))\n```",
    "## Plan\n\n- [ ] write the parser\n- [x] add tests\n- [ ] ship it\n\nSee [the docs](https://x.y/z) "
    "and [this issue](https://github.com/a/b/issues/1).",
    '<div class="card">\n  <p>Hello <b>world</b></p>\n  <img src="x.png"/>\n</div>\n<br>',
    'The response looks like {"status": "ok", "items": [1, 2, 3]} and {"a": 1}.',
    'Here is the result:\n{"status": "ok", "items": 3}\nand a list [1, 2, 3] with {braces}.',
    "Compare a < b and b > c; also x<y, arrays a[i] and maps m{k}. The end.",
    "| a | b |\n|---|---|\n| <x> | [y] |\n\nMath: f(x) = {x | x > 0}.",
    '```json\n{"temperature": 21, "unit": "C"}\n```\n\nThat is the reading.',
    "A long answer. " * 300 + '[link](u) {"k": 1} <em>x</em> ' * 50,
]


@pytest.mark.parametrize("text", NON_LEAKS, ids=[f"nonleak-{i}" for i in range(len(NON_LEAKS))])
@pytest.mark.parametrize("step", [1, 3, 7, 16])
def test_non_leaks_stream(text: str, step: int) -> None:
    assert detect_leak(text) is None
    released = released_before_end(text, step)
    assert released >= 0.95 * len(text), (released, len(text))


def test_a_prefix_of_a_marker_at_the_end_is_held_then_released() -> None:
    held = Holdback()
    assert held.feed("Answer <tool_c") == "Answer "
    assert held.feed("ould not be used") == "<tool_could not be used"
    held = Holdback()
    assert held.feed("a <") == "a "
    assert held.feed("b>bold</b>") == "<b>bold</b>"


def test_a_json_example_is_released_at_its_first_key_and_a_call_is_held() -> None:
    held = Holdback()
    assert held.feed('{"a') == ""  # could still be {"arguments": ...}
    assert held.feed('ge": 3}') == '{"age": 3}'
    held = Holdback()
    assert held.feed('```json\n{"name": "get_weather", "arguments": {') == ""


def test_a_quoted_call_followed_by_prose_is_released() -> None:
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    held = Holdback()
    prose = " and the server parses it, which is why the flag matters so much."
    shown = held.feed("Models write " + call) + held.feed(prose)
    assert shown == "Models write " + call + prose


def test_a_candidate_past_the_bound_is_held_to_the_end_not_shown() -> None:
    """Past `max_hold` the hold stops judging (bounded work) and fails closed: the call is not
    shown before the turn ends, and nothing is lost when it is released."""
    held = Holdback(max_hold=1000)
    head = '<tool_call>\n{"name": "write", "arguments": {"content": "'
    shown = held.feed("Writing it.\n" + head)
    for _ in range(50):
        shown += held.feed("x" * 100)
    assert shown == "Writing it.\n"
    assert held.release() == head + "x" * 5000


def test_feed_is_linear() -> None:
    def run(n: int) -> float:
        text = ("Some prose with <b>tags</b>, [links](u), {json} and `code`. " * n)[: n * 60]
        held = Holdback()
        start = time.perf_counter()
        for i in range(0, len(text), 4):
            held.feed(text[i : i + 4])
        return time.perf_counter() - start

    small, big = run(1000), run(8000)
    assert big < small * 8 * 3  # linear with room for noise; quadratic would be ~64x

    # A long call held to the end is probed geometrically, not per delta.
    body = '<tool_call>\n{"name": "write", "arguments": {"content": "' + "y" * 60000 + '"}}'
    held = Holdback()
    start = time.perf_counter()
    for i in range(0, len(body), 4):
        assert held.feed(body[i : i + 4]) == ""
    assert time.perf_counter() - start < 2.0


PIECES = st.sampled_from(
    [
        "word ",
        "<b>",
        "</b>",
        "[x](y) ",
        "- [ ] ",
        '{"a": 1} ',
        "```py\nx = [1]\n```\n",
        "a < b ",
        "<tool_c",
        "ool_call>",
        "[TOOL",
        "_CALLS]",
        "\n",
        '{"name": 1} ',
        "<|",
        "im_end|>",
        "functools ",
        "to=func",
        "assistant ",
        "commentary ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30), st.data())
def test_any_split_of_random_text_never_shows_a_leak_early(pieces: list[str], data: Any) -> None:
    text = "".join(pieces)
    line = data.draw(st.sampled_from(VISIBLE))
    full = text + "\n" + line["text"]
    match = detect_leak(full)
    cuts = data.draw(st.lists(st.integers(0, len(full)), max_size=40))
    _, held = stream(full, cuts)
    if match is not None:
        assert held.released <= match.start


def test_a_hold_back_never_fed_holds_and_shows_nothing() -> None:
    held = Holdback(names={"get_weather"})
    assert not held.holding
    assert held.release() == ""
    assert held.released == 0
