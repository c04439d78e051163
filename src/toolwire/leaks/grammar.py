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
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any


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


def _distinctive(part: Part) -> bool:
    """Whether every match of `part` starts with at least three literal characters."""
    if isinstance(part, str):
        return len(part) >= 3
    if isinstance(part, Alt):
        return all(len(leading_literal(option)) >= 3 for option in part.options)
    return False


def search_fragment(seq: Seq) -> str:
    """A regular expression for the start of `seq`, up to its first part of three or more
    literal characters: every match of `seq` begins with a match of it, and prose rarely holds
    one, so a scan for it (in C) skips text that cannot hold an opener."""
    for k, part in enumerate(seq):
        if _distinctive(part):
            return to_regex(seq[: k + 1])
    return to_regex(seq)


def literal_heads(seq: Seq) -> tuple[str, ...]:
    """The literals a match of `seq` can start with, leading optional and alternative pieces
    expanded (`("",)` when a non-literal part may lead): a C-speed `startswith` rules a
    position out before a grammar walk."""
    if not seq:
        return ("",)
    head, rest = seq[0], seq[1:]
    if isinstance(head, str):
        return tuple(head + tail for tail in literal_heads(rest))
    if isinstance(head, Alt):
        return tuple(h for option in head.options for h in literal_heads(option + rest))
    if isinstance(head, Opt):
        return (*literal_heads(head.seq + rest), *literal_heads(rest))
    return ("",)


def literal_trie(words: Iterable[str]) -> str:
    """A regular expression for any of `words`, as a trie (`<t(?:ool_call>|ools>)`): Python's
    `re` tries alternatives one by one, so a flat list of fifty openers costs fifty tests at
    every position, a trie one or two. At a position the longest word wins."""
    trie: dict[str, dict[str, Any]] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict[str, Any]]) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


def partial_regex(seq: Seq) -> str:
    """A regular expression for any non-empty beginning of a match of `seq` (a leading `Opt`
    aside): anchored at the end of the text, it finds an opener still being typed."""
    options = [_partial_part(seq[0], empty=False)] if seq else []
    options += [to_regex(seq[:k]) + _partial_part(seq[k], empty=True) for k in range(1, len(seq))]
    return "(?:" + "|".join(options) + ")" if options else ""


def _partial_part(part: Part, *, empty: bool) -> str:
    """Any beginning of a match of `part`; the empty one only when `empty`."""
    if isinstance(part, str):
        out = ""
        for ch in reversed(part[1:]):
            out = f"(?:{re.escape(ch)}{out})?"
        head = re.escape(part[:1]) + out
        return f"(?:{head})?" if empty else head
    if isinstance(part, Space):
        return r"\s*" if empty or not part.one else r"\s+"
    if isinstance(part, Run):
        return part.cls + ("*" if empty else "+")
    if isinstance(part, Alt):
        body = "(?:" + "|".join(partial_regex(option) for option in part.options) + ")"
        return f"(?:{body})?" if empty else body
    body = partial_regex(part.seq)
    return f"(?:{body})?" if empty else body


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


#: By the sequence's identity (hashing a nested tuple costs more than the match): the
#: sequence itself is kept, so an id is never taken for another's.
_COMPILED: dict[int, tuple[Seq, re.Pattern[str], re.Pattern[str]]] = {}


def fast_prefix_state(seq: Seq, s: str, pos: int, end: int) -> tuple[Prefix, int]:
    """`prefix_state` by two compiled expressions (the sequence, and `partial_regex` anchored at
    `end`), in C: the streaming hold-back asks this at every opener it sees. Where a sequence
    could match more than one way the end of the match may differ (the longest, not the
    earliest); the state is the same."""
    compiled = _COMPILED.get(id(seq))
    if compiled is None or compiled[0] is not seq:
        compiled = _COMPILED[id(seq)] = (
            seq,
            re.compile(to_regex(seq)),
            re.compile(f"(?:{partial_regex(seq)})\\Z"),
        )
    _, whole, partial = compiled
    m = whole.match(s, pos, end)
    if m is not None:
        return Prefix.FULL, m.end()
    if pos >= end or partial.match(s, pos, end) is not None:
        return Prefix.PARTIAL, -1
    return Prefix.DEAD, -1
