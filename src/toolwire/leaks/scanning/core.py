"""What every scanner shares: the raw call and block records, the region being judged, and the
small text helpers (whitespace, trailers, names, closers).

Scanners only record the shape of calls; interpretation is salvage's job. A `Ctx` is the text and
the region the detector (or the hold-back, or salvage) judges, so one scanner serves all three.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import orjson

NAME = r"[^\W\d][\w.\-:]{0,127}"
_NAME_RE = re.compile(NAME)
BARE_NAME = r"[^\W\d][\w.\-]{0,127}"

RawKind = Literal["envelope", "json", "params", "values"]


@dataclass(slots=True)
class RawCall:
    """One call as written, before its arguments are interpreted.

    `envelope`: `text` is JSON holding the name and arguments (maybe several calls, an array).
    `json`: `name` plus `text`, the arguments' JSON. `params`: `name` plus `(key, value, string)`
    triples from an XML form (`string` is DSML's `string=` attribute, None when absent).
    `values`: `name` plus already-evaluated `values` (pythonic, FunctionGemma). `problem` says
    why salvage must refuse this call (cut off, not a literal, ...).
    """

    kind: RawKind
    name: str = ""
    text: str = ""
    params: list[tuple[str, str, bool | None]] = field(default_factory=list)
    values: dict[str, object] = field(default_factory=dict)
    problem: str | None = None


@dataclass(slots=True)
class Block:
    """Calls found from one marker, and where they stop. `last`: for a chain that stopped
    before the region's end (`chain.follow_chain`), where its last block ends (before the
    separators `end` is past); -1 otherwise."""

    family: str
    end: int
    calls: list[RawCall]
    last: int = -1


@dataclass(slots=True)
class Ctx:
    """The text and the region being judged: `vs` (visible start) to `limit`.

    `core` is `limit` less trailing whitespace, end-of-turn tokens and stray closing tags: where
    a call with missing closers ends.
    """

    s: str
    vs: int
    limit: int
    core: int
    _fences: list[int] | None = None

    def fences(self) -> list[int]:
        """Positions of every ``` in the region, found once."""
        if self._fences is None:
            found: list[int] = []
            i = self.s.find("```", self.vs, self.limit)
            while i >= 0:
                found.append(i)
                i = self.s.find("```", i + 3, self.limit)
            self._fences = found
        return self._fences

    def in_fence(self, pos: int) -> bool:
        """True when `pos` sits inside an open ``` fence."""
        fences = self.fences()
        return bool(fences) and bisect.bisect_left(fences, pos) % 2 == 1


# -- trailers and separators ----------------------------------------------------------------------

TOKEN = (
    r"</[A-Za-z_][\w:.\-]*\s*>"
    r"|<\|[A-Za-z_]+\|>"
    r"|<｜[^｜<>\n]{1,40}｜>"
    r"|<\s*/\s*[|｜]\s*DSML\s*[|｜]\s*\w+\s*>"
    r"|<end_of_turn>|<end_function_call>|<eos>|\[e~\["
)
TRAILER = re.compile(rf"(?:\s|{TOKEN})*")
_TRAILER_FENCED = re.compile(rf"(?:\s|{TOKEN})*(?:```(?:\s|{TOKEN})*)?")
_TOKEN_AT_END = re.compile(rf"(?:{TOKEN})\Z")
SEP = re.compile(r"(?:\s|;|</[A-Za-z_][\w:.\-]*\s*>)*")
_WS = re.compile(r"\s*")
FENCE_LINE = re.compile(r"```[\w+.\-]*[ \t]*\r?\n\s*")


def is_trailer(s: str, pos: int, limit: int, *, fenced: bool = False) -> bool:
    """True when only whitespace, end tokens and stray closers lie between `pos` and `limit`."""
    pattern = _TRAILER_FENCED if fenced else TRAILER
    return pattern.fullmatch(s, pos, limit) is not None


def core_end(s: str, vs: int, limit: int) -> int:
    """`limit` moved back over trailing whitespace, end-of-turn tokens and stray closers."""
    end = limit
    while True:
        while end > vs and s[end - 1].isspace():
            end -= 1
        m = _TOKEN_AT_END.search(s, max(vs, end - 80), end)
        if m is None or m.start() < vs:
            return end
        end = m.start()


def ws(s: str, pos: int, limit: int) -> int:
    """`pos` moved past whitespace."""
    m = _WS.match(s, pos, limit)
    return m.end() if m else pos


def line_start(ctx: Ctx, pos: int) -> bool:
    """True when only spaces lie between the start of the line (or region) and `pos`."""
    s, i = ctx.s, pos
    while i > ctx.vs and s[i - 1] in " \t":
        i -= 1
    return i == ctx.vs or s[i - 1] == "\n"


def valid_name(name: str) -> bool:
    """A tool name as models write them: an identifier, maybe dotted, dashed or namespaced."""
    return _NAME_RE.fullmatch(name) is not None


def closer(ctx: Ctx, pos: int, closer: str) -> int:
    """`pos` moved past an optional closing marker (after whitespace)."""
    q = ws(ctx.s, pos, ctx.limit)
    return q + len(closer) if ctx.s.startswith(closer, q) else pos


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def unambiguous_number(text: str) -> int | float | None:
    """`text` as a number when it is exactly a JSON number of at most 15 significant digits
    (longer ones are IDs or phone numbers and would lose digits as floats), finite; else None."""
    if not _JSON_NUMBER.fullmatch(text):
        return None
    mantissa = re.split(r"[eE]", text.lstrip("-"), maxsplit=1)[0]
    if len(mantissa.replace(".", "").lstrip("0")) > 15:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, int | float) else None


Scanner = Callable[[Ctx, "re.Match[str]"], "Block | None"]
"""Reads one block of calls from an opener's match (`m.start()` is where the opener begins)."""
