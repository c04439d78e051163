"""What streamed text could still be the start of a leaked tool call.

A leak is judged when the turn ends (`detect_leak`), but text should reach the user as it comes.
`LeakHold` is fed the text delta by delta and says how much of it may be shown now: everything
before the earliest position that could still begin a leak in one of the registry's formats.

A position becomes a candidate when the text there is a registered opener or a proper beginning
of one (text ending in `<tool_c` is held; `<b>` or `<div` is released as soon as the character
after `<` rules out every opener). Marker-less shapes (a JSON envelope, a pythonic list, a
```json fence) are candidates only where the visible message starts, and die as soon as the
first key rules out a call envelope. Once an opener is complete the candidate is *probed*: the
registry's scanners read the chain of calls from it, as the detector will. It dies when

- the chain has ended and text that is neither a trailer, a separator nor the beginning of
  another opener follows (a leak must end the message), or
- no block can be read from it although `slack` characters followed the opener (every
  registered format is readable by then: scanners accept calls cut off mid-way), or
- it has held more than `max_hold` characters: it is then released although it might still be
  a leak (bounded memory and latency beat perfect hiding of a huge call; the detector still
  judges the turn, only the text already shown stays shown).

When a candidate dies, the search for the next one resumes right after its start, so a call
quoted inside a dead candidate is still found. Cost: the search looks at each character once,
an opener's prefix test is bounded by the opener's length, and a candidate is re-probed only
when its held text has grown by half (or by 32 characters while small). That alone is neither
linear nor cheap on hostile text: thousands of unclosed `<tool_call>` or `<function=` openers
make each dying candidate's successor probe everything after it again, and every position is
tested against a dozen openers. So the judging has a budget: opener tests and the text probes
may read are counted, and once the total passes `WORK_PER_CHAR` units per character fed (plus
a fixed allowance, far above what prose, code or real calls use), the hold stops judging for
the rest of the turn and shows text as it comes, as it does past `max_hold`; the end-of-turn
detector still judges the turn. `feed` is O(len(delta)) amortized with a small constant,
whatever the text (`benchmarks/leak_scanning.py` measures it).
"""

from __future__ import annotations

import re

from toolwire.leaks.chain import follow_chain
from toolwire.leaks.grammar import Prefix, Run, Seq, first_chars, prefix_state
from toolwire.leaks.registry import OPENERS, WHOLE_STARTS, Opener
from toolwire.leaks.scanning.core import FENCE_LINE, TRAILER, Ctx, core_end, line_start
from toolwire.leaks.scanning.json_calls import json_span
from toolwire.leaks.scanning.whole import scan_whole

DEFAULT_MAX_HOLD = 64 * 1024
DEFAULT_SLACK = 256
#: Judging budget (see the docstring): units per character fed, plus a fixed allowance. One
#: unit is one opener's literal head tested at one position (a grammar walk is eight), or 16
#: characters a probe may read.
WORK_PER_CHAR = 2
_WORK_ALLOWANCE = 16 * 1024
_CONTEXT = 64  # text kept before the earliest candidate (line starts, look-behind)

# Where the visible message may start again: after a reasoning block or a Harmony header.
_REASONING_ENDS: tuple[str, ...] = (
    "</think>",
    "</thinking>",
    "</seed:think>",
    "[/THINK]",
    "◁/think▷",
    "<|end|>",
    "<|message|>",
    "assistantfinal",
)
_PARTIAL_TOKEN = re.compile(r"(?:<[^<>\n]{0,48}|\[(?:e(?:~\[?)?)?|`{1,2})\Z")

_FENCE_HEAD: Seq = ("```", Run(r"[\w+.\-]", 0), Run(r"[ \t]", 0))


def _fenced(o: Opener) -> Seq:
    return (*_FENCE_HEAD, Run(r"[\r\n]"), Run(r"\s", 0), *o.parts)


# (opener-or-None, its grammar): marker openers anywhere, marker-less shapes and fenced calls
# only where the visible message starts.
_ANYWHERE: tuple[tuple[Opener, Seq], ...] = tuple((o, o.parts) for o in OPENERS)
_AT_START: tuple[tuple[Opener | None, Seq], ...] = (
    *((None, seq) for seq in WHOLE_STARTS),
    *((o, _fenced(o)) for o in OPENERS),
)


def _by_first_char(
    entries: tuple[tuple[Opener | None, Seq], ...] | tuple[tuple[Opener, Seq], ...],
) -> dict[str, tuple[tuple[Opener | None, Seq], ...]]:
    table: dict[str, list[tuple[Opener | None, Seq]]] = {}
    for entry in entries:
        chars = first_chars(entry[1])
        assert chars is not None, "every opener starts with a literal character"
        for c in chars:
            table.setdefault(c, []).append(entry)
    return {c: tuple(v) for c, v in table.items()}


def _literal_head(seq: Seq) -> str:
    """The literal text every match of `seq` starts with (its leading string parts)."""
    head = ""
    for part in seq:
        if not isinstance(part, str):
            break
        head += part
    return head


#: Literal heads by sequence identity: a C-speed `startswith` rules most positions out before
#: the grammar walk (which costs microseconds per call) runs at all.
_HEADS: dict[int, str] = {
    id(seq): _literal_head(seq) for _, seq in (*_ANYWHERE, *_AT_START) if _literal_head(seq)
}


def _head_rules_out(seq: Seq, s: str, i: int, n: int) -> bool:
    head = _HEADS.get(id(seq))
    if head is None:
        return False
    if n - i >= len(head):
        return not s.startswith(head, i)
    return not head.startswith(s[i:n])


_ANY_BY_CHAR = _by_first_char(_ANYWHERE)
_START_BY_CHAR = _by_first_char(_AT_START)
_TRIGGER = re.compile("[" + re.escape("".join(sorted({*_ANY_BY_CHAR, *_START_BY_CHAR}))) + "]")


class LeakHold:
    """Incremental judge of how much streamed text may be shown (see the module docstring)."""

    __slots__ = (
        "_base",
        "_cand",
        "_cand_whole",
        "_fenced",
        "_max_hold",
        "_n",
        "_opened",
        "_pending",
        "_probed",
        "_s",
        "_safe",
        "_scan",
        "_slack",
        "_started",
        "_work",
    )

    def __init__(self, max_hold: int = DEFAULT_MAX_HOLD, slack: int = DEFAULT_SLACK) -> None:
        self._max_hold = max_hold
        self._slack = slack
        self._s = ""  # text[_base:_base + len(_s)]
        self._base = 0
        self._pending: list[str] = []
        self._n = 0  # length of all text fed
        self._safe = 0  # text[:_safe] may be shown
        self._scan = 0  # where the search for candidates resumes
        self._cand: int | None = None  # start of the candidate being held
        self._cand_whole = False  # a marker-less shape at the message start
        self._fenced = False  # a call inside a fence that opens the message
        self._opened = -1  # end of the candidate's opener once complete
        self._probed = 0  # held size at the last probe
        self._started = False  # visible non-space text seen (since the last reasoning end)
        self._work = 0  # characters probes have been allowed to read (see WORK_PER_CHAR)

    @property
    def length(self) -> int:
        """How many characters were fed."""
        return self._n

    @property
    def safe(self) -> int:
        """How many characters from the start may be shown."""
        return self._safe

    def text(self, start: int, end: int) -> str:
        """`text[start:end]` of what was fed; `start` must not precede `safe` as it was before
        the last `feed` (older text is forgotten)."""
        self._flush()
        return self._s[start - self._base : end - self._base]

    def feed(self, delta: str) -> int:
        """Take a delta; return how many characters from the start may now be shown."""
        if not delta:
            return self._safe
        shown = self._safe
        self._pending.append(delta)
        self._n += len(delta)
        if self._work < 0:  # hostile text: no longer judged (see the docstring)
            self._flush()
            self._safe = self._scan = self._n
            self._trim(shown)
            return self._safe
        if self._cand is not None and self._opened >= 0:
            held = self._n - self._cand
            if held > self._max_hold:
                self._give_up()
            elif held < max(self._probed + 32, self._probed * 3 // 2):
                return self._safe  # amortized: an opened candidate is re-probed geometrically
        self._advance(shown)
        return self._safe

    # -- internals --------------------------------------------------------------------------

    def _flush(self) -> None:
        if self._pending:
            self._s += "".join(self._pending)
            self._pending.clear()

    def _trim(self, shown: int) -> None:
        """Forget text well before both what was shown before this delta and the candidate."""
        keep = min(shown, self._cand if self._cand is not None else self._safe) - _CONTEXT
        if keep > self._base + 4 * _CONTEXT:
            self._s = self._s[keep - self._base :]
            self._base = keep

    def _give_up(self) -> None:
        """Held too long: release it, and look for candidates only in what comes next."""
        self._cand = None
        self._safe = self._scan = self._n
        self._started = True

    def _advance(self, shown: int) -> None:
        self._flush()
        while True:
            if self._cand is not None:
                self._work += (self._n - self._cand) // 16  # a probe reads at most this
                if self._over_budget():
                    break
                if self._alive():
                    self._safe = self._cand
                    break
                self._scan = self._cand + 1
                self._cand = None
            if not self._find() or self._over_budget():
                self._safe = self._n
                break
        self._trim(shown)

    def _over_budget(self) -> bool:
        """Past the judging budget: stop judging for the rest of the turn."""
        if self._work <= WORK_PER_CHAR * self._n + _WORK_ALLOWANCE:
            return False
        self._give_up()
        self._work = -1  # marks the turn as no longer judged
        return True

    def _find(self) -> bool:
        """Look for the next candidate from `_scan`; True if one was found (and set)."""
        s, base, n = self._s, self._base, self._n
        i = self._scan
        while i < n:
            m = _TRIGGER.search(s, i - base, n - base)
            if m is None:
                if not self._started and s[i - base : n - base].strip():
                    self._started = True
                break
            p = m.start() + base
            at_start = self._at_start(i, p)
            c = s[p - base]
            if at_start and self._candidate(p, _START_BY_CHAR.get(c, ()), whole_ok=True):
                return True
            if self._candidate(p, _ANY_BY_CHAR.get(c, ()), whole_ok=False):
                return True
            i = p + 1
        self._scan = n
        return False

    def _at_start(self, i: int, p: int) -> bool:
        """Whether `p` is where the visible message starts: nothing but whitespace before it,
        or a reasoning block (or Harmony header) ending right before it."""
        s, base = self._s, self._base
        if not self._started:
            self._started = True
            if not s[i - base : p - base].strip():
                return True
        j = p - base
        while j > 0 and s[j - 1].isspace():
            j -= 1
        return s[max(0, j - 16) : j].endswith(_REASONING_ENDS)

    def _candidate(
        self, p: int, entries: tuple[tuple[Opener | None, Seq], ...], *, whole_ok: bool
    ) -> bool:
        s, base, n = self._s, self._base, self._n
        best: tuple[Prefix, int, Opener | None, Seq] | None = None
        self._work += len(entries)
        for opener, seq in entries:
            if opener is not None and opener.line_start and not whole_ok:
                ctx = Ctx(s, 0, n - base, n - base)
                if not line_start(ctx, p - base):
                    continue
            if _head_rules_out(seq, s, p - base, n - base):
                continue
            self._work += 8  # the grammar walk costs about eight head tests
            state, end = prefix_state(seq, s, p - base, n - base)
            if state is Prefix.DEAD:
                continue
            if best is None or state.value > best[0].value:
                best = (state, end, opener, seq)
        if best is None:
            return False
        state, end, opener, seq = best
        self._cand = p
        self._cand_whole = whole_ok and opener is None
        self._fenced = whole_ok and opener is not None
        self._opened = -1 if state is Prefix.PARTIAL else end + base
        self._probed = 0
        return True

    def _alive(self) -> bool:
        """Whether the candidate can still become a leak, given the text so far."""
        p = self._cand
        assert p is not None
        s, base, n = self._s, self._base, self._n
        if self._opened < 0:
            return self._reprefix(p)
        self._probed = n - p
        if self._cand_whole:
            return self._whole_alive(p)
        rel = p - base
        limit = n - base
        ctx = Ctx(s, max(0, rel - _CONTEXT), limit, core_end(s, rel, limit))
        pos = rel
        if self._fenced:
            line = FENCE_LINE.match(s, rel, limit)
            if line is None:
                return True  # the fence line is still being written
            pos = line.end()
        chain = follow_chain(ctx, pos, fenced=self._fenced)
        if chain is None:
            return n - self._opened <= self._slack
        if chain.end >= limit:
            return True
        return self._may_continue(chain.end, limit)

    def _reprefix(self, p: int) -> bool:
        """A candidate still typing its opener: test the prefix again with the new text."""
        s, base = self._s, self._base
        c = s[p - base]
        whole_ok = self._cand_whole or self._fenced
        entries = _START_BY_CHAR.get(c, ()) if whole_ok else _ANY_BY_CHAR.get(c, ())
        if self._candidate(p, entries, whole_ok=whole_ok):
            return self._opened < 0 or self._alive()
        if whole_ok and self._candidate(p, _ANY_BY_CHAR.get(c, ()), whole_ok=False):
            return self._opened < 0 or self._alive()
        return False

    def _may_continue(self, q: int, limit: int) -> bool:
        """After a chain that stopped at `q` (relative): can what follows still continue it?
        Only trailers, a token being typed, another opener (being typed), or a tag of the call
        itself (its body may still be incomplete: a scanner stops before a half-written
        `<arg_key>`) within `slack` characters may."""
        s = self._s
        if s[q] in "<[]" and limit - q <= self._slack:
            return True  # a tag of the call being written (`<arg_key>`, MiniMax M3's `]<]`, ...)
        for opener, seq in _ANY_BY_CHAR.get(s[q], ()):
            state, _ = prefix_state(seq, s, q, limit)
            if state is Prefix.PARTIAL or (
                state is Prefix.FULL and limit - q <= self._slack and opener is not None
            ):
                return True
        t = TRAILER.match(s, q, limit)
        r = t.end() if t is not None else q
        return r >= limit or _PARTIAL_TOKEN.match(s, r, limit) is not None

    def _whole_alive(self, p: int) -> bool:
        """A marker-less shape opening the message: alive while its value is still open, and
        after that only if it reads as calls (the detector's own whole-message test)."""
        s, base, n = self._s, self._base, self._n
        rel, limit = p - base, n - base
        ctx = Ctx(s, rel, limit, core_end(s, rel, limit))
        if scan_whole(ctx, rel) is not None:
            return True
        j = rel
        fenced = s.startswith("```", rel)
        if fenced:
            line = FENCE_LINE.match(s, rel, limit)
            if line is None:
                return True
            j = line.end()
        if j >= limit:
            return True
        end, cut = json_span(s, j, limit)
        if cut:
            return True
        rest = s[end:limit].strip()
        if rest.startswith(";") or (fenced and "```".startswith(rest)):
            return True
        return rest == "" or _PARTIAL_TOKEN.fullmatch(rest) is not None
