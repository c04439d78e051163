"""Untrusted model output costs linear work with a small constant, and no single step is long:
seconds per MiB of each degenerate kind of text (issue #39), beside plain prose and code.

A model stuck in a loop (or whoever controls the upstream) writes unclosed `{`, open code
fences, tags, `{"name": ` repeated; every byte goes through the streaming hold-back
(`LeakHold`), the end-of-turn detector (`detect_leak`, with declared tool names: the rule for
calls with text after them runs too) and, as a call's arguments, through `parse_arguments`
(strict, then recovered and repaired). Printed per kind:

- `hold 16`: seconds for the hold-back to judge 1 MiB fed in 16-character deltas (a token or
  so each: the per-delta overhead shows), `hold 4K` in 4 KiB deltas (`Holdback.take` feeds
  one long delta in such slices), and `step ms` the longest single 4 KiB `feed` (what one
  step may hold the event loop for);
- `detect`: `detect_leak` on the whole text (the driver runs it on a worker thread above
  64 KiB);
- `args`: `parse_arguments` on the text as a call's arguments (on a worker thread above
  64 KiB).

Run: `python benchmarks/leak_scanning.py [MiB]` (default 1). CPU time of this process
(`time.process_time`), so a loaded machine changes the figures less; compare rows, not
machines.

Measured on the shared 2-core dev machine (load ~8), 1 MiB, seconds of CPU:

before (main at d04c9da, run with this script):
    kind                    hold 16  hold 4K  step ms   detect     args
    plain prose               0.691    0.389      2.1    0.003    0.002
    code                      0.152    0.036      6.2    0.006    0.007
    unclosed {                1.538    1.418      6.9    0.004    0.070
    open fences               0.908    0.728      3.5    0.003    0.000
    <tool_call> tags          0.144    0.004      3.4    0.010    0.001
    {"name": repeats          1.028    0.753      5.5    0.061    0.056
    [ repeats                 0.284    1.324      5.8    0.004    0.000
    <function= tags           0.159    0.006      4.2    0.006    0.001
    balanced, repairable      0.170    0.005      0.2    0.004    1.303

after:
    kind                    hold 16  hold 4K  step ms   detect     args
    plain prose               0.288    0.072      0.6    0.014    0.003
    code                      0.386    0.093      0.7    0.017    0.011
    unclosed {                0.417    0.186      1.3    0.015    0.002
    open fences               0.172    0.004      3.6    0.064    0.000
    <tool_call> tags          0.132    0.005      4.5    0.023    0.000
    {"name": repeats          0.149    0.014      4.9    0.063    0.048
    [ repeats                 0.367    0.122      0.6    0.017    0.001
    <function= tags           0.178    0.009      7.4    0.021    0.001
    balanced, repairable      0.376    0.094      5.0    0.017    1.120

The step column is what one 4 KiB slice costs: before, a server's one-piece megabyte was one
step (1.5 s for unclosed `{` on the Messages door); now `Holdback.take` feeds it in such
slices with the event loop free between them. `args` of a repairable megabyte is json-repair
(pure Python): it now runs on a worker thread (`upstream.chat_completions.finished`).
"Before" the hold-back *stopped judging* (showed everything) once a turn passed its budget,
so some kinds were cheap by giving up; now it holds such text to the turn's end instead, and
the figures are what judging costs.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable

from toolwire.leaks import detect_leak
from toolwire.leaks.hold import LeakHold
from toolwire.upstream.arguments import ArgumentsError, parse_arguments

NAMES = ["get_weather", "read_file", "bash"]


def payloads(size: int) -> dict[str, str]:
    def rep(pattern: str) -> str:
        return (pattern * (size // len(pattern) + 1))[:size]

    code = 'def f(x):\n    return {"a": [x, (1, 2)]} if x < 3 else a[i]\n<div class="c">t</div>\n'
    return {
        "plain prose": rep("The quick brown fox jumps over the lazy dog. "),
        "code": rep(code),
        "unclosed {": rep("{"),
        "open fences": rep("```\n"),
        "<tool_call> tags": rep("<tool_call>"),
        '{"name": repeats': rep('{"name": '),
        "[ repeats": rep("["),
        "<function= tags": rep("<function="),
        "balanced, repairable": "{" + rep("'k': 1, ")[: size - 8] + "'z': 2}",
    }


def cpu(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def hold(text: str, delta: int) -> float:
    """The longest single feed (seconds) of feeding `text` in `delta`-character pieces."""
    judge = make_hold()
    longest = 0.0
    for start in range(0, len(text), delta):
        began = time.process_time()
        judge.feed(text[start : start + delta])
        longest = max(longest, time.process_time() - began)
    return longest


def make_hold() -> LeakHold:
    try:
        from toolwire.leaks.standalone import names_matcher

        return LeakHold(names=names_matcher(NAMES))
    except ImportError:  # an older tree, for a "before" row
        return LeakHold()


def detect(text: str) -> None:
    try:
        detect_leak(text, NAMES)  # type: ignore[call-arg]
    except TypeError:
        detect_leak(text)


def args(text: str) -> None:
    with contextlib.suppress(ArgumentsError):
        parse_arguments(text)


def main() -> None:
    mib = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    size = int(mib * 1024 * 1024)
    per_mib = 1024 * 1024 / size
    print(f"{'kind':<22} {'hold 16':>8} {'hold 4K':>8} {'step ms':>8} {'detect':>8} {'args':>8}")
    for name, text in payloads(size).items():
        small = cpu(lambda text=text: hold(text, 16)) * per_mib
        step = 0.0

        def big(text: str = text) -> None:
            nonlocal step
            step = hold(text, 4096)

        large = cpu(big) * per_mib
        found = cpu(lambda text=text: detect(text)) * per_mib
        parsed = cpu(lambda text=text: args(text)) * per_mib
        row = f"{name:<22} {small:>8.3f} {large:>8.3f} {step * 1000:>8.1f}"
        print(f"{row} {found:>8.3f} {parsed:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
