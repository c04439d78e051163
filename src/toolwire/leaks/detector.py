"""Deciding whether a finished turn's text ends with a tool call the server failed to parse.

A leak is a call at the *end* of the visible answer: reasoning is set aside first, and after the
call only whitespace, end-of-turn tokens and stray closing tags may follow. Tool syntax quoted in
the middle of an answer, in a code block followed by prose, or only in the reasoning is not a
leak. Shapes with no marker at all (a bare JSON object or list, a pythonic `[f(a=1)]`) count only
when they are the whole message. Cheap on long answers: one pass of a literal-led regex finds the
few places a call could begin (the registry's anchors), and only those are parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolwire.leaks.chain import is_opener, scan_chain
from toolwire.leaks.registry import ANCHORS, WHOLE_LEADS
from toolwire.leaks.scanning.core import FENCE_LINE, Ctx, core_end, is_trailer, ws
from toolwire.leaks.scanning.whole import scan_whole

_SNIPPET = 240
_MAX_CANDIDATES = 64


@dataclass(slots=True, frozen=True)
class LeakMatch:
    """A leaked call: `text[start:end]` is the call (plus trailing end tokens) in the original
    text, so `text[:start]` is what the model said before it. `snippet` is a short preview."""

    family: str
    start: int
    end: int
    snippet: str


# -- reasoning ------------------------------------------------------------------------------------

_REASONING_TAG = re.compile(r"<(?:/?(?:seed:)?think(?:ing)?>|\|channel\|>)|\[/?THINK\]|◁/?think▷")
# (a character, then the markers that contain it): single characters are found at memchr speed.
_REASONING_HINTS = ((">", ("think", "<|channel|>")), ("]", ("THINK]",)), ("▷", ("think▷",)))
_CLOSER_OF = {
    "<think>": "</think>",
    "<thinking>": "</thinking>",
    "<seed:think>": "</seed:think>",
    "[THINK]": "[/THINK]",
    "◁think▷": "◁/think▷",
}
_HARMONY_ANALYSIS = re.compile(r"\s*analysis\s*(?:<\|message\|>)?")
_HARMONY_FINAL = re.compile(r"\s*final\s*(?:<\|message\|>)")
_HARMONY_START_BEFORE = re.compile(r"<\|start\|>\s*(?:assistant)?\s*\Z")
_HARMONY_STRIPPED = re.compile(r"\s*(?:assistant)?analysis")
_HARMONY_STRIPPED_NEXT = ("assistantfinal", "assistantcommentary")


def _harmony_header_start(text: str, pos: int) -> int:
    """Move back over a `<|start|>assistant` that opens the message at `pos`."""
    m = _HARMONY_START_BEFORE.search(text, max(0, pos - 40), pos)
    return pos if m is None else m.start()


def _reasoning_spans(text: str) -> list[tuple[int, int]]:
    """Where reasoning sits: think blocks (an unclosed one runs to the end), a `...</think>`
    prefix with no opening tag, and gpt-oss analysis messages, tokenised or stripped."""
    spans: list[tuple[int, int]] = []
    n = len(text)
    pos = 0
    if _HARMONY_STRIPPED.match(text):
        best, word = -1, ""
        for w in _HARMONY_STRIPPED_NEXT:
            i = text.rfind(w)
            if i > best:
                best, word = i, w
        if best > 0:
            end = best + len(word) if word == "assistantfinal" else best
            spans.append((0, end))
            pos = end
    if not any(c in text and any(h in text for h in hints) for c, hints in _REASONING_HINTS):
        return spans
    while pos < n:
        m = _REASONING_TAG.search(text, pos)
        if m is None:
            break
        tag = m.group()
        if tag == "<|channel|>":
            am = _HARMONY_ANALYSIS.match(text, m.end())
            if am is not None:
                close = text.find("<|end|>", am.end())
                end = n if close < 0 else close + len("<|end|>")
                spans.append((_harmony_header_start(text, m.start()), end))
                pos = end
                continue
            fm = _HARMONY_FINAL.match(text, m.end())
            if fm is not None:
                spans.append((_harmony_header_start(text, m.start()), fm.end()))
                pos = fm.end()
                continue
            pos = m.end()
            continue
        if tag.startswith(("</", "[/", "◁/")):
            # A closer with no opener: the template put the opening tag in the prompt.
            spans.append((spans[-1][1] if spans else 0, m.end()))
            pos = m.end()
            continue
        close = text.find(_CLOSER_OF[tag], m.end())
        if close < 0:
            spans.append((m.start(), n))
            break
        end = close + len(_CLOSER_OF[tag])
        spans.append((m.start(), end))
        pos = end
    return spans


def strip_reasoning(text: str) -> str:
    """The answer without its reasoning: `<think>`/`<seed:think>` blocks (an unclosed leading one
    is all reasoning), a `...</think>` prefix whose opening tag was in the prompt, and gpt-oss
    analysis messages (the final channel's header goes too). Untouched text is returned as is."""
    spans = _reasoning_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return "".join(parts).strip()


def _visible_bounds(text: str) -> tuple[int, int, bool]:
    """`(start, end, alone)`: the visible answer after the last reasoning, up to an unclosed
    trailing think block; `alone` when nothing but whitespace is visible before `start`."""
    spans = _reasoning_spans(text)
    if not spans:
        return 0, len(text), True
    limit = len(text)
    if spans[-1][1] >= limit:
        limit = spans[-1][0]
        spans = spans[:-1]
    vs = max((e for _, e in spans if e <= limit), default=0)
    pos = 0
    alone = True
    for start, end in spans:
        if end > vs:
            break
        if text[pos:start].strip():
            alone = False
        pos = max(pos, end)
    return vs, max(vs, limit), alone


# -- detection ------------------------------------------------------------------------------------


def _candidates(ctx: Ctx) -> list[int]:
    """Positions where a call could begin, latest first (at most a few dozen). The anchors are
    the registry's: `str.rfind` of a literal skips through long answers far faster than any
    regex alternation, and `is_opener` then checks the opener itself."""
    s, vs, limit = ctx.s, ctx.vs, ctx.limit
    found: set[int] = set()
    for anchor, adjust in ANCHORS:
        i = s.rfind(anchor, vs, limit)
        for _ in range(_MAX_CANDIDATES):
            if i < 0:
                break
            start = adjust(s, i, vs)
            if start is not None and is_opener(ctx, start):
                found.add(start)
            i = s.rfind(anchor, vs, i)
    return sorted(found, reverse=True)[:_MAX_CANDIDATES]


def _match(s: str, family: str, start: int, end: int) -> LeakMatch:
    body = s[start:end].strip()
    snippet = body if len(body) <= _SNIPPET else body[: _SNIPPET - 1] + "…"
    return LeakMatch(family, start, end, snippet)


def _detect(s: str, vs: int, limit: int, alone: bool) -> LeakMatch | None:
    core = core_end(s, vs, limit)
    if core <= vs:
        return None
    ctx = Ctx(s, vs, limit, core)
    lead = ws(s, vs, core)
    if alone and s[lead] in WHOLE_LEADS:
        whole = scan_whole(ctx, lead)
        if whole is not None:
            return _match(s, whole.family, lead, limit)
    best: tuple[int, str] | None = None
    for pos in _candidates(ctx):
        start, fenced = pos, False
        if ctx.in_fence(pos):
            # Inside a code fence it is an example, unless the fence is the whole message.
            fence = s.rfind("```", vs, pos)
            line = FENCE_LINE.fullmatch(s, fence, pos)
            if not (alone and line is not None and not s[vs:fence].strip()):
                if best is not None:
                    break
                continue
            start, fenced = fence, True
        blk = scan_chain(ctx, pos, fenced=fenced)
        if blk is None:
            if best is not None:
                break
            continue
        best = (start, blk.family)
    if best is None:
        return None
    return _match(s, best[1], best[0], limit)


def detect_leak(text: str) -> LeakMatch | None:
    """The tool call a finished turn's visible text ends with, if any (reasoning is ignored).

    Only fires when the call runs to the end of the text, give or take whitespace, end-of-turn
    tokens (`<|im_end|>`, `<|eot_id|>`, `<|call|>`, ...) and stray closing tags. A call cut off
    mid-way still counts; telling truncation apart is the caller's job (finish_reason).
    """
    if not text:
        return None
    vs, limit, alone = _visible_bounds(text)
    if limit <= vs:
        return None
    return _detect(text, vs, limit, alone)


def detect_leak_in_reasoning(reasoning: str, visible: str) -> LeakMatch | None:
    """A call at the end of the reasoning when the visible answer is empty.

    Some models put the whole call inside their reasoning; it only counts as a leak when nothing
    was said outside it. Offsets are into `reasoning`.
    """
    if not reasoning or not is_trailer(visible, 0, len(visible)):
        return None
    return _detect(reasoning, 0, len(reasoning), True)
