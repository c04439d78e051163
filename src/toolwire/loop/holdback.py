"""Holding back streamed text that might be a leaked tool call, and nothing else.

A leak can only be judged once the turn ends, but users want text as it comes. The driver feeds
each text delta here and shows what `feed` returns: everything before the earliest place that
could still begin a leaked call in one of the registered formats (`toolwire.leaks.hold` decides,
from the leak registry). Code, Markdown, links, HTML and JSON examples stream as they arrive; a
held candidate is released the moment it cannot be a leak any more, or once it has held
`max_hold` characters (default 64 KiB; past that the text streams on, see `LeakHold`). At the
turn's end the driver calls `release(match.start)` when the detector found a leak (only the
text before it is shown) or `release()`.
"""

from __future__ import annotations

from toolwire.leaks.hold import DEFAULT_MAX_HOLD, LeakHold


class Holdback:
    __slots__ = ("_all", "_hold", "_released")

    def __init__(self, max_hold: int = DEFAULT_MAX_HOLD, *, hold_all: bool = False) -> None:
        """`hold_all`: show nothing before the turn's end (a turn retried after a leak, whose
        text may repeat what the leaked attempt already showed)."""
        self._hold = LeakHold(max_hold=max_hold)
        self._released = 0
        self._all = hold_all

    def feed(self, delta: str) -> str:
        """Add a delta; return what may be shown now."""
        safe = self._hold.feed(delta)
        if self._all or safe <= self._released:
            return ""
        out = self._hold.text(self._released, safe)
        self._released = safe
        return out

    @property
    def released(self) -> int:
        """How many characters have been shown so far."""
        return self._released

    def release(self, upto: int | None = None) -> str:
        """At the turn's end: the held text up to `upto` (where a leak starts), or all of it."""
        hold = self._hold
        end = hold.length if upto is None else max(upto, self._released)
        out = hold.text(self._released, end)
        self._released = end
        return out
