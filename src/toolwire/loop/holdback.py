"""Holding back streamed text that might be a leaked tool call, and nothing else.

A leak can only be judged once the turn ends, but users want text as it comes. The driver feeds
each text delta here and shows what `feed` returns: everything before the earliest place that
could still begin a leaked call in one of the registered formats (`toolwire.leaks.hold` decides,
from the leak registry). Code, Markdown, links, HTML and JSON examples stream as they arrive; a
held candidate is released the moment it cannot be a leak any more. A call that is a leak
although text follows it (on lines of its own, calling a declared tool: `leaks.standalone`) is
held with everything after it, and so is a candidate past `max_hold` characters (default 64
KiB) or a turn too costly to judge: such text waits for the turn's end rather than risk showing
a call. At the turn's end the driver calls `release(match.start)` when the detector found a
leak (only the text before it is shown) or `release()`.

The driver holds a turn's reasoning the same way (calls written in the reasoning are leaks when
the answer is empty), and lets it go once the answer begins.
"""

from __future__ import annotations

from collections.abc import Collection

from toolwire.leaks.hold import DEFAULT_MAX_HOLD, LeakHold
from toolwire.leaks.standalone import names_matcher
from toolwire.loop.cooperative import Slice

#: Characters judged between two chances for the event loop to run something else: a delta of
#: a megabyte (a server that answered without streaming) is fed in slices of this size.
SLICE_CHARS = 4096


class Holdback:
    __slots__ = ("_all", "_hold", "_max_hold", "_names", "_released")

    def __init__(
        self,
        max_hold: int = DEFAULT_MAX_HOLD,
        *,
        hold_all: bool = False,
        names: Collection[str] | None = None,
    ) -> None:
        """`hold_all`: show nothing before the turn's end (a turn retried after a leak, whose
        text may repeat what the leaked attempt already showed). `names`: the tools declared
        for the turn (a call with text after it is a leak only if it calls one)."""
        self._hold: LeakHold | None = None
        """Made at the first delta: most turns never feed one of their two hold-backs (a
        turn of calls only, a turn without reasoning), and the judge costs more to make."""
        self._max_hold = max_hold
        self._names = names
        self._released = 0
        self._all = hold_all

    def feed(self, delta: str) -> str:
        """Add a delta; return what may be shown now."""
        hold = self._hold
        if hold is None:
            hold = self._hold = LeakHold(max_hold=self._max_hold, names=names_matcher(self._names))
        safe = hold.feed(delta)
        if self._all or safe <= self._released:
            return ""
        out = hold.text(self._released, safe)
        self._released = safe
        return out

    async def take(self, delta: str, work: Slice) -> str:
        """`feed` for a delta of any length, in slices of `SLICE_CHARS` with a chance for the
        event loop between them (`work.tick()`): no single step of judging holds the loop."""
        if len(delta) <= SLICE_CHARS:
            shown = self.feed(delta)
            await work.tick()
            return shown
        pieces: list[str] = []
        for start in range(0, len(delta), SLICE_CHARS):
            pieces.append(self.feed(delta[start : start + SLICE_CHARS]))
            await work.tick()
        return "".join(pieces)

    @property
    def released(self) -> int:
        """How many characters have been shown so far."""
        return self._released

    @property
    def holding(self) -> bool:
        """Whether some text fed has not been shown."""
        return self._hold is not None and self._hold.length > self._released

    def release(self, upto: int | None = None) -> str:
        """At the turn's end: the held text up to `upto` (where a leak starts), or all of it."""
        hold = self._hold
        if hold is None:
            return ""  # nothing was fed
        end = hold.length if upto is None else max(upto, self._released)
        out = hold.text(self._released, end)
        self._released = end
        return out
