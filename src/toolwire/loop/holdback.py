"""Holding back streamed text that might be a leaked tool call.

A leak can only be judged once the turn ends, but users want text as it comes. So text streams
until the first character that could open a written call (`<`, `[`, `{`, a fullwidth `｜`, a
backtick, or the start of `functools` / `assistant…to=`); from there it is held until the turn
ends, when the driver releases it or, if it was a leak, drops it. Ordinary prose streams live;
a turn with markup arrives in one piece at its end.
"""

from __future__ import annotations

import re

_OPENERS = re.compile(r"[<\[{｜`]|functools|assistant\s*(?:commentary|analysis|final)?\s*to=")


class Holdback:
    __slots__ = ("_held", "_released", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._released = 0
        self._held = False

    def feed(self, delta: str) -> str:
        """Add a delta; return what may be shown now."""
        self._text.append(delta)
        if self._held:
            return ""
        found = _OPENERS.search(delta)
        if found is None:
            self._released += len(delta)
            return delta
        self._held = True
        self._released += found.start()
        return delta[: found.start()]

    @property
    def released(self) -> int:
        return self._released

    def release(self, upto: int | None = None) -> str:
        """At the turn's end: the held text up to `upto` (where a leak starts), or all of it."""
        text = "".join(self._text)
        end = len(text) if upto is None else max(upto, self._released)
        out = text[self._released : end]
        self._released = end
        return out
