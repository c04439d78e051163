"""The fast paths of leak scanning agree with their slow, obvious definitions: bracket balancing
stepped by a regular expression vs. character by character, an opener's prefix state by
compiled expressions vs. the grammar walk, and the repairs of pythonic calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.leaks.grammar import fast_prefix_state, prefix_state
from toolwire.leaks.hold import _ANYWHERE, _AT_START
from toolwire.leaks.scanning.pythonic import pythonic_calls, repair_python_literals
from toolwire.upstream.arguments import balanced_object_end


def _balanced_by_hand(text: str, start: int) -> int:
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


@settings(max_examples=600, deadline=None)
@given(st.sampled_from("{[ "), st.text(alphabet='{}[]"\\ a,:\n', max_size=40))
def test_balancing_by_steps_matches_balancing_by_character(head: str, rest: str) -> None:
    text = head + rest
    assert balanced_object_end(text, 0) == _balanced_by_hand(text, 0)


def test_balancing_switches_to_characters_on_short_steps_and_stays_right() -> None:
    for text in ("{" + "{}" * 50_000 + "}", "[" + '{"a":1},' * 20_000 + "]", "{" * 100_000):
        assert balanced_object_end(text, 0) == _balanced_by_hand(text, 0)


SEQS = [seq for _, seq in (*_ANYWHERE, *_AT_START)]
PIECES = st.sampled_from(
    [
        "<",
        "|",
        "｜",
        " ",
        "\n",
        "tool_call",
        ">",
        "DSML",
        "{",
        '"',
        "name",
        "to=functions.",
        "assistant",
        "commentary",
        "```",
        "json",
        "[",
        "TOOL_CALLS]",
        "function",
        "=",
        "x",
        "<|",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SEQS), st.lists(PIECES, max_size=8))
def test_the_compiled_prefix_state_is_the_grammar_walks(
    seq: tuple[object, ...], parts: list[str]
) -> None:
    text = "".join(parts)
    fast, _ = fast_prefix_state(seq, text, 0, len(text))  # type: ignore[arg-type]
    slow, _ = prefix_state(seq, text, 0, len(text))  # type: ignore[arg-type]
    assert fast is slow, (seq, text)


def test_repairs_of_pythonic_calls_as_small_models_write_them() -> None:
    """LFM2's cases in vLLM's parser tests: raw newlines, a quote of the string's own kind
    inside it, leading zeros; valid Python is never touched."""
    assert repair_python_literals("[f(a='x')]") is None
    nested = "[bash(command='sed -n '360,450p' f.py')]"
    assert pythonic_calls(nested, listed=True)[0].values == {"command": "sed -n '360,450p' f.py"}
    raw = "[run(cmd='a\nb')]"
    assert pythonic_calls(raw, listed=True)[0].values == {"cmd": "a\nb"}
    zeros = "[set_date(month=07, day=05, year=-0012)]"
    assert pythonic_calls(zeros, listed=True)[0].values == {"month": 7, "day": 5, "year": -12}
    # A string that only looks like a number keeps its zeros.
    assert pythonic_calls("[f(code='007')]", listed=True)[0].values == {"code": "007"}
