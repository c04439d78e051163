"""Model output cannot freeze the loop through leak scanning: no recursion depth it can drive,
and the streaming hold-back stops judging text that would cost it more than linear work (and
holds it, rather than show what may be a call).
(Speed is measured in benchmarks/leak_scanning.py, not here.)"""

from __future__ import annotations

from toolwire.leaks import detect_leak
from toolwire.leaks.hold import LeakHold
from toolwire.leaks.scanning.json_calls import json_span

NESTED = '{"name": ' * 5000


def stream(text: str, delta: int = 16) -> LeakHold:
    hold = LeakHold()
    for start in range(0, len(text), delta):
        hold.feed(text[start : start + delta])
    return hold


def test_deep_nesting_is_no_recursion_error() -> None:
    """The attack: ~1,000 nested `{"name": ` ended the turn in a 502 RecursionError."""
    for text in ("<tool_call>" + NESTED, NESTED, "[TOOL_CALLS]" + NESTED):
        detect_leak(text)
        stream(text)
    assert json_span(NESTED + "}" * 5000, 0, 10**6) == (len(NESTED) + 5000, False)


def test_hostile_openers_stop_being_judged_and_stay_held() -> None:
    """Thousands of unclosed openers: the hold stops judging them (instead of re-probing each
    one against everything after it) and holds the rest of the turn, which could still be a
    call, for the detector at the turn's end."""
    for opener in ("<tool_call>", "<function="):
        hold = stream("Sure.\n" + opener * 20_000)
        assert not hold.judging
        assert len("Sure.\n") <= hold.safe < hold.length // 10


def test_a_real_leak_after_the_budget_allowance_is_still_held() -> None:
    """The budget is far above what prose uses: a call after 64 KiB of prose is still held."""
    prose = "The quick brown fox jumps over the lazy dog, then writes code [a] {b} `c`. " * 900
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
    hold = stream(prose + call)
    assert hold.safe == len(prose)
