"""Untrusted model output costs linear work: the streaming hold-back (`LeakHold`) and the
end-of-turn leak detector on 1 MiB of hostile text, beside 1 MiB of plain prose.

A model (or whoever controls the upstream) can write unclosed `<tool_call>` / `<function=`
openers or deeply nested JSON; the scans run on the event loop, so their cost is how long
`/health` and every other request wait. Prints one row per payload: seconds to stream it through
the hold-back in 16-character deltas, seconds for `detect_leak` on the whole text, and the
throughput. Run: `python benchmarks/leak_scanning.py [MiB]`.

Measured on the shared 2-core dev machine (loaded; compare rows, not absolute figures):

before (0.25 MiB; repeated openers are quadratic, so 1 MiB is ~16x these):
    payload                         hold-back s   detect s  outcome
    plain prose                           1.008      0.001  ok
    <tool_call> then 1 MiB                0.042      0.002  ok
    <tool_call> repeated                 12.059      0.007  ok
    <function= repeated                  12.287      0.014  ok
    <tool_call>{"name": nested            0.003      0.014  RecursionError
    {"name": nested (bare)                0.021      0.001  RecursionError
    [TOOL_CALLS] repeated                 2.110      0.011  ok

after (1 MiB):
    plain prose                           3.217      0.018  ok
    <tool_call> then 1 MiB                0.350      0.040  ok
    <tool_call> repeated                  0.232      0.033  ok
    <function= repeated                   0.221      0.039  ok
    <tool_call>{"name": nested            5.005      0.032  ok
    {"name": nested (bare)                5.941      0.281  ok
    [TOOL_CALLS] repeated                 0.799      0.037  ok

Prose and nested JSON are linear (~50-75 us per 16-character delta of Python overhead in the
hold-back); they were not the subject of this change.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from toolwire.leaks import detect_leak
from toolwire.leaks.hold import LeakHold

DELTA = 16


def payloads(size: int) -> dict[str, str]:
    return {
        "plain prose": ("The quick brown fox jumps over the lazy dog. " * (size // 45 + 1))[:size],
        "<tool_call> then 1 MiB": "<tool_call>" + "x" * size,
        "<tool_call> repeated": ("<tool_call>" * (size // 11 + 1))[:size],
        "<function= repeated": ("<function=" * (size // 10 + 1))[:size],
        '<tool_call>{"name": nested': "<tool_call>" + ('{"name": ' * (size // 9 + 1))[:size],
        '{"name": nested (bare)': ('{"name": ' * (size // 9 + 1))[:size],
        "[TOOL_CALLS] repeated": ("[TOOL_CALLS]" * (size // 12 + 1))[:size],
    }


def timed(run: Callable[[], object]) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        run()
        outcome = "ok"
    except RecursionError:
        outcome = "RecursionError"
    return time.perf_counter() - started, outcome


def hold(text: str) -> None:
    judge = LeakHold()
    for start in range(0, len(text), DELTA):
        judge.feed(text[start : start + DELTA])


def main() -> None:
    mib = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    size = int(mib * 1024 * 1024)
    print(f"{'payload':<30} {'hold-back s':>12} {'detect s':>10} {'MiB/s (hold)':>13}  outcome")
    for name, text in payloads(size).items():
        held, outcome_h = timed(lambda text=text: hold(text))
        detected, outcome_d = timed(lambda text=text: detect_leak(text))
        rate = len(text) / 1024 / 1024 / held if held else float("inf")
        outcome = outcome_h if outcome_h != "ok" else outcome_d
        print(f"{name:<30} {held:>12.3f} {detected:>10.3f} {rate:>13.2f}  {outcome}")


if __name__ == "__main__":
    main()
