"""What streamed text could still be the start of a leaked tool call.

A leak is judged when the turn ends (`detect_leak`), but text should reach the user as it comes.
`LeakHold` is fed the text delta by delta and says how much of it may be shown now: everything
before the earliest position that could still begin a leak in one of the registry's formats.
The promise: text the detector will later take for a leaked call (its `LeakMatch.start`) is
never shown before the turn ends.

A position becomes a candidate when the text there is a registered opener or a proper beginning
of one (text ending in `<tool_c` is held; `<b>` or `<div` is released as soon as the character
after `<` rules out every opener). Marker-less shapes (a JSON envelope, a pythonic list, a
```json fence) are candidates only where the visible message starts, and die as soon as the
first key rules out a call envelope. Once an opener is complete the candidate is *probed*: the
registry's scanners read the chain of calls from it, as the detector will. It dies when

- the chain has ended and text follows that is neither a trailer, a separator nor the beginning
  of another opener, unless the chain is a leak by the rule for calls with text after them
  (`leaks.standalone`: on lines of its own, outside a code fence, every call complete and
  naming a declared tool; only with `names`): then it is *confirmed*, and everything from it
  to the end of the turn is held (the turn's prose after a leaked call is not shown), or
- no block can be read from it although `slack` characters followed the opener (every
  registered format is readable by then: scanners accept calls cut off mid-way).

Bounds: a candidate held past `max_hold` characters, or a turn whose judging passes its budget,
is not judged any further: everything from the candidate (or from what was not yet shown) on is
held to the end of the turn, when the detector decides. Bounded work beats streaming a turn
that costs more than linear work to judge; hiding a leak is the promise, so the hold fails
closed, never open.

Cost: openers are found by one regular expression over the new text (in C), so prose, code
and JSON cost a scan, not a Python step per character; only the last few characters, which may
be an opener being typed, are tested one by one, each once. A candidate is re-probed only when
its held text has grown by half (or by 32 characters while small). Hostile text (thousands of
unclosed `<tool_call>`, `<function=` or nested `{"name": `) makes every candidate's successor
probe again, so the judging has a budget: opener tests and the text probes may read are
counted, and once the total passes `WORK_PER_CHAR` units per character fed (plus a fixed
allowance, far above what prose, code or real calls use), the hold stops judging, holding the
rest. `feed` is O(len(delta)) amortized with a small constant, whatever the text
(`benchmarks/leak_scanning.py` measures it); the caller feeds long deltas in slices
(`loop.holdback.Holdback.take`) so that no single step holds the event loop.
"""

from __future__ import annotations

import bisect
import re

from toolwire.leaks.chain import follow_chain
from toolwire.leaks.grammar import (
    Prefix,
    Run,
    Seq,
    Space,
    fast_prefix_state,
    first_chars,
    literal_heads,
    literal_trie,
    partial_regex,
    search_fragment,
)
from toolwire.leaks.registry import OPENERS, WHOLE_STARTS, Opener
from toolwire.leaks.scanning.core import FENCE_LINE, TRAILER, Block, Ctx, core_end, line_start
from toolwire.leaks.scanning.json_calls import json_span
from toolwire.leaks.scanning.whole import scan_whole
from toolwire.leaks.standalone import LineEnd, after_block, judge
from toolwire.upstream.names import ToolNameMatcher

DEFAULT_MAX_HOLD = 64 * 1024
DEFAULT_SLACK = 256
#: Judging budget (see the docstring): units per character fed, plus a fixed allowance. A unit
#: is about a quarter of a microsecond: one opener's literal head tested at one position, half
#: a compiled match, eight characters a probe may read; a place the scan stopped at (an
#: opener, a fence, a reasoning end) costs `_HIT`. Prose and code use a few hundredths of a
#: unit per character; hostile text passes the budget within a few thousand characters.
WORK_PER_CHAR = 4
_WORK_ALLOWANCE = 32 * 1024
_HIT = 48
_CONTEXT = 64  # text kept before the earliest candidate (line starts, look-behind)
#: How far back from the end of the text an opener may still be being typed (the longest,
#: gpt-oss's `<|start|>assistant<|channel|>commentary to=functions.`, is 52 characters).
_TAIL = 96

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
_REASONING_END = re.compile("|".join(re.escape(e) for e in _REASONING_ENDS))
_END_LEN = max(len(e) for e in _REASONING_ENDS)
_PARTIAL_TOKEN = re.compile(r"(?:<[^<>\n]{0,48}|\[(?:e(?:~\[?)?)?|`{1,2})\Z")
_NON_SPACE = re.compile(r"\S")

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


#: Literal heads by sequence identity: a C-speed `startswith` rules most positions out before
#: the compiled prefix test (`fast_prefix_state`) runs at all.
_HEADS: dict[int, tuple[str, ...]] = {
    id(seq): heads for _, seq in (*_ANYWHERE, *_AT_START) if "" not in (heads := literal_heads(seq))
}


def _head_rules_out(seq: Seq, s: str, i: int, n: int) -> bool:
    heads = _HEADS.get(id(seq))
    if heads is None:
        return False
    avail = n - i
    for head in heads:
        if avail >= len(head):
            if s.startswith(head, i):
                return False
        elif head.startswith(s[i:n]):
            return False
    return True


_ANY_BY_CHAR = _by_first_char(_ANYWHERE)
_START_BY_CHAR = _by_first_char(_AT_START)


Entries = tuple[tuple[Opener | None, Seq], ...]


def _by_first_two() -> tuple[dict[str, Entries], dict[str, Entries]]:
    """The openers a position may begin, by its first two characters (a `<` followed by `e`
    begins none), and those whose literal head is one character (DSML's `<` then whitespace),
    by the first: a position is tested against a handful of openers, not all forty."""
    two: dict[str, list[tuple[Opener | None, Seq]]] = {}
    short: dict[str, list[tuple[Opener | None, Seq]]] = {}
    for entry in _ANYWHERE:
        for head in literal_heads(entry[1]):
            if len(head) >= 2:
                two.setdefault(head[:2], []).append(entry)
            else:
                for c in first_chars(entry[1]) or ():
                    short.setdefault(c, []).append(entry)
    shorts = {c: tuple(dict.fromkeys(v)) for c, v in short.items()}
    twos = {k: tuple(dict.fromkeys([*v, *shorts.get(k[0], ())])) for k, v in two.items()}
    return twos, shorts


_ANY_BY_TWO, _ANY_SHORT = _by_first_two()


def _seconds() -> dict[str, tuple[frozenset[str], bool]]:
    """For the openers whose literal head is one character (`_ANY_SHORT`): the characters that
    may come second, and whether whitespace may (DSML's `<` then `|` or a space, the bare
    `{` then `"` or a space)."""
    out: dict[str, tuple[frozenset[str], bool]] = {}
    for c, entries in _ANY_SHORT.items():
        chars: set[str] = set()
        space = False
        for _, seq in entries:
            rest = seq[1:]
            space = space or (bool(rest) and isinstance(rest[0], Space))
            after = rest[1:] if rest and isinstance(rest[0], Space) else rest
            chars |= first_chars(after) or set()
        out[c] = (frozenset(chars), space)
    return out


_SECONDS = _seconds()


def _may_begin(two: str) -> bool:
    """Whether an opener may begin with these two characters."""
    if two in _ANY_BY_TWO:
        return True
    second = _SECONDS.get(two[0])
    return second is not None and (two[1] in second[0] or (second[1] and two[1].isspace()))


#: A ```json fence holding calls, anywhere a line starts: a leak only as the last thing in the
#: turn and calling declared tools (xLAM after prose; `detector`), so held only with `names`.
_FENCED_CALLS: tuple[tuple[Opener | None, Seq], ...] = tuple(
    (None, seq) for seq in WHOLE_STARTS if seq[:1] == ("```",)
)


def _finders() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Two scans, in C: where an opener, a code fence or a reasoning end is written whole, and
    where one may be being typed at the end of the text. Openers with a literal head of two or
    more characters go in one trie of heads; the few that begin with one character and then
    whitespace (DSML's `< | DSML`, the bare `{ "name"`) go in by their own expressions."""
    heads: set[str] = {*_REASONING_ENDS, "```"}
    short: list[Seq] = []
    for _, seq in _ANYWHERE:
        found = literal_heads(seq)
        if all(len(h) >= 2 for h in found):
            heads.update(found)
        else:
            short.append(seq)
    whole = "|".join([literal_trie(heads), *(search_fragment(seq) for seq in short)])
    beginnings = {head[:k] for head in heads for k in range(1, len(head) + 1)}
    typing = "|".join([literal_trie(beginnings), *(partial_regex(seq) for seq in short)])
    return re.compile(whole), re.compile(f"(?:{typing})\\Z")


_FIND, _TYPING = _finders()
_REASONING_END_SET = frozenset(_REASONING_ENDS)


class LeakHold:
    """Incremental judge of how much streamed text may be shown (see the module docstring)."""

    __slots__ = (
        "_base",
        "_cand",
        "_cand_whole",
        "_confirmed",
        "_end_seen",
        "_entries",
        "_fence_at",
        "_fenced",
        "_fences",
        "_fences_before",
        "_fences_known",
        "_frozen",
        "_max_hold",
        "_n",
        "_names",
        "_opened",
        "_pending",
        "_probed",
        "_recent",
        "_s",
        "_safe",
        "_scan",
        "_slack",
        "_started",
        "_work",
    )

    def __init__(
        self,
        max_hold: int = DEFAULT_MAX_HOLD,
        slack: int = DEFAULT_SLACK,
        names: ToolNameMatcher | None = None,
    ) -> None:
        """`names`: the declared tools; without them a call with text after it is never a
        leak (as for the detector), so it is released once the text after it shows that."""
        self._max_hold = max_hold
        self._slack = slack
        self._names = names
        self._s = ""  # text[_base:_base + len(_s)]
        self._base = 0
        self._pending: list[str] = []
        self._recent = ""  # the last few characters fed (a reasoning end split across deltas)
        self._n = 0  # length of all text fed
        self._safe = 0  # text[:_safe] may be shown
        self._scan = 0  # where the search for candidates resumes
        self._cand: int | None = None  # start of the candidate being held
        self._cand_whole = False  # a marker-less shape (at the message start, or a fence)
        self._fenced = False  # a call inside a fence that opens the message
        self._entries: tuple[tuple[Opener | None, Seq], ...] = ()  # what the candidate may be
        self._opened = -1  # end of the candidate's opener once complete
        self._probed = 0  # held size at the last probe
        self._started = False  # visible non-space text seen (since the last reasoning end)
        self._end_seen = 0  # where the last reasoning end seen ends
        self._work = 0  # judging done so far, in units (see WORK_PER_CHAR)
        self._confirmed = False  # the candidate is a leak: hold everything from it
        self._frozen = False  # no longer judged: hold everything from `_safe`
        # Code fences: positions of ``` from `_fence_at` back to the oldest still needed, and
        # how many came before those; unknown once a reasoning block ended in the text (the
        # detector counts from the end of the reasoning).
        self._fences: list[int] = []
        self._fences_before = 0
        self._fence_at = 0
        self._fences_known = True

    @property
    def length(self) -> int:
        """How many characters were fed."""
        return self._n

    @property
    def safe(self) -> int:
        """How many characters from the start may be shown."""
        return self._safe

    @property
    def judging(self) -> bool:
        """Whether new text is still judged (False once a leak is confirmed or a bound hit)."""
        return not (self._confirmed or self._frozen)

    def text(self, start: int, end: int) -> str:
        """`text[start:end]` of what was fed; `start` must not precede `safe` as it was before
        the last `feed` (older text is forgotten)."""
        self._flush()
        return self._s[start - self._base : end - self._base]

    def feed(self, delta: str) -> int:
        """Take a delta; return how many characters from the start may now be shown."""
        if not delta:
            return self._safe
        self._pending.append(delta)
        self._n += len(delta)
        before = self._recent[-1:]
        recent = self._recent + delta
        self._recent = recent[-_END_LEN:]
        if self._confirmed or self._frozen:
            return self._safe  # held to the end of the turn: nothing more to judge
        start = self._n - len(delta)
        if (
            self._cand == start - 1
            and self._opened < 0
            and not self._entries
            and not _may_begin(before + delta[0])
        ):
            # The character held last time begins no opener with the one after it.
            self._cand = None
            self._safe = self._scan = start
        if (
            self._cand is None
            and self._started
            and self._scan == start
            and _FIND.search(delta) is None
            and _REASONING_END.search(recent) is None
        ):
            # Nothing was held, and nothing in the delta begins an opener, a fence or ends a
            # reasoning block (one spanning the deltas was held as it was typed): all shown,
            # but for a last character that may begin an opener, held until the next delta.
            typing = _TYPING.search(delta)
            if typing is None:
                self._trim(self._safe)
                self._safe = self._scan = self._n
                return self._safe
            if typing.start() == len(delta) - 1 and delta[-1] in _ANY_BY_CHAR:
                self._trim(self._safe)
                self._cand = self._safe = self._scan = self._n - 1
                self._entries, self._opened, self._probed = (), -1, 0
                self._cand_whole = self._fenced = False
                return self._safe
        shown = self._safe
        if self._cand is not None and self._opened >= 0:
            held = self._n - self._cand
            if held > self._max_hold:
                self._freeze()
                return self._safe
            if held < max(self._probed + 32, self._probed * 3 // 2):
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
        self._flush()
        keep = min(shown, self._cand if self._cand is not None else self._safe) - _CONTEXT
        if keep > self._base + 4 * _CONTEXT:
            self._s = self._s[keep - self._base :]
            self._base = keep

    def _freeze(self) -> None:
        """Stop judging: what is not shown yet stays held to the end of the turn."""
        self._frozen = True
        self._fences.clear()

    def _advance(self, shown: int) -> None:
        self._flush()
        self._count_fences()
        while True:
            if self._cand is not None:
                self._work += (self._n - self._cand) // 8  # a probe reads at most this
                if self._over_budget():
                    break
                if self._alive():
                    self._safe = self._cand
                    break
                self._scan = self._cand + 1
                self._cand = None
            if not self._find() or self._over_budget():
                if self._cand is None and not self._frozen:
                    self._safe = self._n
                break
        self._trim(shown)
        self._drop_old_fences()

    def _over_budget(self, upto: int | None = None) -> bool:
        """Past the judging budget: stop judging, holding what is not shown yet (`upto`: text
        before it was judged clean and may be shown)."""
        if self._work <= WORK_PER_CHAR * self._n + _WORK_ALLOWANCE:
            return False
        if self._cand is not None:
            self._safe = self._cand
        elif upto is not None:
            self._safe = max(self._safe, upto)
        self._freeze()
        return True

    # -- code fences (a call inside one is quoted, unless it ends the turn) ------------------

    def _count_fences(self) -> None:
        """Note the ``` in the new text (non-overlapping, as `Ctx.fences` counts them)."""
        s, base, n = self._s, self._base, self._n
        i = max(self._fence_at, base)
        while (j := s.find("```", i - base, n - base)) >= 0:
            self._fences.append(j + base)
            i = j + base + 3
        self._fence_at = max(i, n - 2)

    def _in_fence(self, pos: int) -> bool | None:
        """Whether `pos` is inside a code fence; None when that is not known here."""
        if not self._fences_known:
            return None
        return (self._fences_before + bisect.bisect_left(self._fences, pos)) % 2 == 1

    def _drop_old_fences(self) -> None:
        """Forget fence positions before anything still to be judged (their count is kept)."""
        floor = self._scan if self._cand is None else min(self._scan, self._cand)
        k = bisect.bisect_left(self._fences, floor)
        if k > 256:
            self._fences_before += k
            del self._fences[:k]

    # -- finding candidates -----------------------------------------------------------------

    def _find(self) -> bool:
        """Look for the next candidate from `_scan`; True if one was found (and set)."""
        s, base, n = self._s, self._base, self._n
        i = self._scan
        # A reasoning end split across deltas began before the scan's resumption point.
        for m in _REASONING_END.finditer(
            s, max(self._end_seen, i - _END_LEN, base) - base, n - base
        ):
            end = m.end() + base
            if m.start() + base < i <= end and end > self._end_seen:
                self._restart(end)
                i = end
        while i < n:
            if not self._started:
                first = _NON_SPACE.search(s, i - base, n - base)
                if first is None:
                    break
                p = first.start() + base
                self._started = True
                entries = _START_BY_CHAR.get(s[p - base], ())
                if entries and self._candidate(p, entries, whole_ok=True):
                    return True
                i = p
            found = _FIND.search(s, i - base, n - base)
            hit = found.start() + base if found is not None else n
            if n - _TAIL < hit:
                # Something may be being typed at the end, before the next whole opener.
                typing = _TYPING.search(s, max(i, n - _TAIL) - base, n - base)
                if typing is not None and typing.start() + base < hit:
                    p = typing.start() + base
                    self._work += _HIT
                    if self._candidate_at(p):
                        return True
                    i = p + 1
                    continue
            if found is None:
                break
            self._work += _HIT
            if found.group() in _REASONING_END_SET:
                self._restart(found.end() + base)
                i = found.end() + base
                continue
            if self._candidate_at(hit):
                return True
            i = hit + 1
            if self._over_budget(i):
                return False
        self._scan = n
        return False

    def _restart(self, at: int) -> None:
        """A reasoning block ended at `at`: the visible message starts again after it (and the
        detector counts code fences from there, which this hold does not follow)."""
        self._started = False
        self._fences_known = False
        self._end_seen = at

    def _any_entries(self, p: int) -> tuple[tuple[Opener | None, Seq], ...]:
        """The openers that may begin at `p`, narrowed by two characters where there are two."""
        rel = p - self._base
        c = self._s[rel]
        if p + 1 < self._n:
            return _ANY_BY_TWO.get(self._s[rel : rel + 2], _ANY_SHORT.get(c, ()))
        return _ANY_BY_CHAR.get(c, ())

    def _candidate_at(self, p: int) -> bool:
        """A candidate at `p` after the message start: a marker opener, or a fence that may
        hold calls (only with `names`, at a line start, opening a fence)."""
        c = self._s[p - self._base]
        if c != "`":
            if p + 1 >= self._n and c in _ANY_BY_CHAR:
                # The last character may begin an opener: held, and judged when more comes.
                self._cand, self._entries, self._opened, self._probed = p, (), -1, 0
                self._cand_whole = self._fenced = False
                return True
            return self._candidate(p, self._any_entries(p), whole_ok=False)
        if self._names is None or self._in_fence(p) is True:
            return False
        ctx = Ctx(self._s, 0, self._n - self._base, self._n - self._base)
        return line_start(ctx, p - self._base) and self._candidate(p, _FENCED_CALLS, whole_ok=True)

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
            self._work += 2  # two compiled matches
            state, end = fast_prefix_state(seq, s, p - base, n - base)
            if state is Prefix.DEAD:
                continue
            if best is None or state.value > best[0].value:
                best = (state, end, opener, seq)
        if best is None:
            return False
        state, end, opener, seq = best
        self._cand = p
        self._entries = entries
        self._cand_whole = whole_ok and opener is None
        self._fenced = whole_ok and opener is not None
        self._opened = -1 if state is Prefix.PARTIAL else end + base
        self._probed = 0
        return True

    # -- probing a candidate ----------------------------------------------------------------

    def _alive(self) -> bool:
        """Whether the candidate can still become a leak, given the text so far."""
        p = self._cand
        assert p is not None
        s, base, n = self._s, self._base, self._n
        if self._opened < 0:
            return p + 1 >= n or self._reprefix(p)  # one character: judged when more comes
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
        if self._standalone(ctx, rel, chain):
            self._confirmed = True
            self._fences.clear()
            return True
        return self._may_continue(chain.end, limit)

    def _standalone(self, ctx: Ctx, rel: int, chain: Block) -> bool:
        """A chain with text after it that is a leak all the same (`leaks.standalone`): on lines
        of its own, outside a fence (when fences are known here), calling declared tools."""
        if self._names is None or self._fenced or chain.last < 0:
            return False
        if after_block(ctx.s, chain.last, ctx.limit) is not LineEnd.BREAK:
            return False
        if self._in_fence(rel + self._base) is True:
            return False
        return judge(ctx, rel, chain, self._names)

    def _reprefix(self, p: int) -> bool:
        """A candidate still typing its opener: test the prefix again with the new text."""
        whole_ok = self._cand_whole or self._fenced
        entries = self._entries if whole_ok else self._any_entries(p)
        if self._candidate(p, entries, whole_ok=whole_ok):
            return self._opened < 0 or self._alive()
        c = self._s[p - self._base]
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
            state, _ = fast_prefix_state(seq, s, q, limit)
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
