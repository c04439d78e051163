"""A tiny grammar for openers, so that one spelling serves two jobs.

An opener (`<tool_call>`, `<function=`, `{"name":`, `< | DSML | invoke`, ...) is written once,
in the registry, as a sequence of parts: literal strings, whitespace, character runs,
alternatives and optional pieces. From that one spelling we get

- a regular expression, which the detector matches at candidate positions, and
- a *prefix* test, which the streaming hold-back needs and `re` cannot give: is this text (which
  may stop anywhere) the whole opener, a proper beginning of it, or ruled out already?

Nothing else in `leaks/` spells an opener, so the two can never drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True, slots=True)
class Space:
    """Whitespace: `\\s*`, or `\\s+` when `one`."""

    one: bool = False


@dataclass(frozen=True, slots=True)
class Run:
    """Characters of one class (`cls`, a regex character class), at least `least` of them."""

    cls: str
    least: int = 1


@dataclass(frozen=True, slots=True)
class Alt:
    """One of several sequences."""

    options: tuple[Seq, ...]


@dataclass(frozen=True, slots=True)
class Opt:
    """An optional sequence."""

    seq: Seq


Part = str | Space | Run | Alt | Opt
Seq = tuple[Part, ...]

WS = Space()
WS1 = Space(one=True)


def alt(*options: Seq | str) -> Alt:
    return Alt(tuple((o,) if isinstance(o, str) else o for o in options))


def to_regex(seq: Seq) -> str:
    """The regular expression a sequence stands for (no capturing groups)."""
    out: list[str] = []
    for part in seq:
        if isinstance(part, str):
            out.append(re.escape(part))
        elif isinstance(part, Space):
            out.append(r"\s+" if part.one else r"\s*")
        elif isinstance(part, Run):
            out.append(part.cls + ("+" if part.least == 1 else f"{{{part.least},}}"))
        elif isinstance(part, Alt):
            out.append("(?:" + "|".join(to_regex(o) for o in part.options) + ")")
        else:
            out.append("(?:" + to_regex(part.seq) + ")?")
    return "".join(out)


def leading_literal(seq: Seq) -> str:
    """The literal every match starts with ("" when the sequence opens with a choice)."""
    lead = ""
    for part in seq:
        if not isinstance(part, str):
            break
        lead += part
    return lead


def first_chars(seq: Seq) -> frozenset[str] | None:
    """The characters a match can start with, or None when a `Run` leads (any of a class)."""
    if not seq:
        return frozenset()
    head, rest = seq[0], seq[1:]
    if isinstance(head, str):
        return frozenset(head[:1]) if head else first_chars(rest)
    if isinstance(head, Alt):
        found: set[str] = set()
        for option in head.options:
            chars = first_chars(option + rest)
            if chars is None:
                return None
            found |= chars
        return frozenset(found)
    if isinstance(head, Opt):
        a, b = first_chars(head.seq + rest), first_chars(rest)
        return None if a is None or b is None else a | b
    return None


class Prefix(Enum):
    """How far a piece of text gets through a sequence."""

    DEAD = 0  # no continuation of the text can match
    PARTIAL = 1  # the text is a proper beginning of a match
    FULL = 2  # a whole match starts the text


_CLASS_CACHE: dict[str, re.Pattern[str]] = {}


def _cls(cls: str) -> re.Pattern[str]:
    pattern = _CLASS_CACHE.get(cls)
    if pattern is None:
        pattern = _CLASS_CACHE[cls] = re.compile(cls)
    return pattern


def prefix_state(seq: Seq, s: str, pos: int, end: int | None = None) -> tuple[Prefix, int]:
    """How `s[pos:end]` relates to `seq`, and where the earliest full match ends (or -1).

    Whitespace and runs are taken greedily: no sequence in the registry puts whitespace or a run
    right before something it could also match, so greedy is exact.
    """
    n = len(s) if end is None else end
    full: list[int] = []
    partial = [False]

    def walk(parts: Seq, k: int, p: int) -> None:
        if k == len(parts):
            full.append(p)
            return
        part = parts[k]
        if isinstance(part, str):
            if n - p >= len(part):
                if s.startswith(part, p):
                    walk(parts, k + 1, p + len(part))
            elif part.startswith(s[p:n]):
                partial[0] = True
            return
        if isinstance(part, Space | Run):
            j = p
            if isinstance(part, Space):
                while j < n and s[j].isspace():
                    j += 1
                least = 1 if part.one else 0
            else:
                matcher = _cls(part.cls)
                while j < n and matcher.match(s, j):
                    j += 1
                least = part.least
            if j - p < least:
                if j == n:
                    partial[0] = True
                return
            if j == n:
                partial[0] = True  # more of the run may come
            walk(parts, k + 1, j)
            return
        rest = parts[k + 1 :]
        if isinstance(part, Alt):
            for option in part.options:
                walk(option + rest, 0, p)
        else:
            walk(part.seq + rest, 0, p)
            walk(parts, k + 1, p)

    walk(seq, 0, pos)
    if full:
        return Prefix.FULL, min(full)
    return (Prefix.PARTIAL if partial[0] else Prefix.DEAD), -1
