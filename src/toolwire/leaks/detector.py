"""Deciding whether a finished turn's text holds tool calls the server failed to parse.

Reasoning is set aside first. A call that runs to the *end* of the visible answer is a leak
wherever it stands: after it only whitespace, end-of-turn tokens and stray closing tags may
follow. Before the end, a call is a leak only under the stricter rule of `standalone` (a
family's own marker, on lines of its own, outside code fences, every call complete and naming a
declared tool), so a call quoted mid-sentence or in a code block stays prose. Shapes with no
marker at all (a bare JSON object or list, a pythonic `[f(a=1)]`) count only when they are the
whole message, or (a fenced JSON call, xLAM's way) the last thing in it and calling declared
tools. Cheap on long answers: literal anchors found with `str.rfind`/`str.find` give the few
places a call could begin, and only those are parsed.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from toolwire.leaks.chain import is_opener, scan_chain
from toolwire.leaks.registry import ANCHORS, WHOLE_LEADS
from toolwire.leaks.scanning.core import FENCE_LINE, Ctx, core_end, is_trailer, line_start, ws
from toolwire.leaks.scanning.whole import scan_whole
from toolwire.leaks.standalone import (
    Standalone,
    calls_declared,
    names_matcher,
    standalone_blocks,
)
from toolwire.upstream.names import ToolNameMatcher

_SNIPPET = 240
_MAX_CANDIDATES = 64


@dataclass(slots=True, frozen=True)
class LeakMatch:
    """Leaked calls: `text[start:end]` is what is withheld, from the first leaked call to the
    end of the visible text (prose after a call was written without its result), so
    `text[:start]` is what the model said before it. `blocks`: where each leaked block is
    (`(start, end)`, in order; the last may run to `end`): salvage reads the calls from these.
    `family` and `snippet` (a short preview) are the first block's."""

    family: str
    start: int
    end: int
    snippet: str
    blocks: tuple[tuple[int, int], ...] = ()

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """The leaked blocks (the whole match when none were listed)."""
        return self.blocks or ((self.start, self.end),)


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


def _snippet(s: str, start: int, end: int) -> str:
    body = s[start:end].strip()
    return body if len(body) <= _SNIPPET else body[: _SNIPPET - 1] + "…"


#: After a success, how many failing candidates further back the walk goes on through (a
#: block's own body holds anchors, `"name"` in a JSON call, that start no chain).
_MISSES = 8


def _end_chain(ctx: Ctx, alone: bool) -> tuple[int, str] | None:
    """Where the chain of calls that runs to the end of the region starts, and its family."""
    s, vs = ctx.s, ctx.vs
    lead = ws(s, vs, ctx.core)
    if alone and s[lead] in WHOLE_LEADS:
        whole = scan_whole(ctx, lead)
        if whole is not None:
            return lead, whole.family
    best: tuple[int, str] | None = None
    misses = 0
    for pos in _candidates(ctx):
        if best is not None and misses > _MISSES:
            break
        start, fenced = pos, False
        if ctx.in_fence(pos):
            # Inside a code fence it is an example, unless the fence is the whole message.
            fence = s.rfind("```", vs, pos)
            line = FENCE_LINE.fullmatch(s, fence, pos)
            if not (alone and line is not None and not s[vs:fence].strip()):
                misses += 1
                continue
            start, fenced = fence, True
        blk = scan_chain(ctx, pos, fenced=fenced)
        if blk is None:
            misses += 1
            continue
        best, misses = (start, blk.family), 0
    return best


def _fenced_calls_at_end(ctx: Ctx, names: ToolNameMatcher | None) -> tuple[int, str] | None:
    """A ```json fence holding only calls of declared tools, closing the message after prose
    (xLAM's `I'll help.\n```json\n[{"name": ...}]\n````): without a marker, only the declared
    names and the place (the last thing said) tell it from an example, so nothing counts when
    the names are not known."""
    s = ctx.s
    if names is None or not s.endswith("```", ctx.vs, ctx.core):
        return None
    fences = ctx.fences()
    if len(fences) < 2 or len(fences) % 2 or fences[-1] != ctx.core - 3:
        return None
    opening = fences[-2]
    if not line_start(ctx, opening):
        return None
    whole = scan_whole(Ctx(s, opening, ctx.limit, ctx.core), opening)
    if whole is None or not calls_declared(whole.calls, names):
        return None
    return opening, whole.family


def _detect(
    s: str, vs: int, limit: int, alone: bool, names: Collection[str] | None
) -> LeakMatch | None:
    core = core_end(s, vs, limit)
    if core <= vs:
        return None
    ctx = Ctx(s, vs, limit, core)
    matcher = names_matcher(names)
    end = _end_chain(ctx, alone) or _fenced_calls_at_end(ctx, matcher)
    before: list[Standalone] = []
    if matcher is not None:
        before = standalone_blocks(ctx, end[0] if end else limit, matcher)
    spans = [(b.start, b.end) for b in before]
    if end is not None:
        spans.append((end[0], limit))
    if not spans:
        return None
    family = before[0].family if before else end[1] if end else ""
    first_start, first_end = spans[0]
    return LeakMatch(family, first_start, limit, _snippet(s, first_start, first_end), tuple(spans))


def detect_leak(text: str, names: Collection[str] | None = None) -> LeakMatch | None:
    """The tool calls a finished turn's visible text holds, if any (reasoning is ignored).

    A call that runs to the end of the text (give or take whitespace, end-of-turn tokens such as
    `<|im_end|>`, `<|eot_id|>`, `<|call|>`, and stray closing tags) always counts; one cut off
    mid-way too (telling truncation apart is the caller's job: finish_reason). A call with text
    after it counts under the stricter rule of `leaks.standalone`, which needs `names`, the
    declared tools: without them (None) only a call at the end counts.
    """
    if not text:
        return None
    vs, limit, alone = _visible_bounds(text)
    if limit <= vs:
        return None
    return _detect(text, vs, limit, alone, names)


def detect_leak_in_reasoning(
    reasoning: str, visible: str, names: Collection[str] | None = None
) -> LeakMatch | None:
    """Calls written in the reasoning when the visible answer is empty.

    Some models put the whole call inside their reasoning (Qwen3.5/3.6 with a reasoning parser:
    `<tool_call>` in `reasoning_content`, the content empty); it only counts as a leak when
    nothing was said outside it, by the same rules as the answer. Offsets are into `reasoning`.
    """
    if not reasoning or not is_trailer(visible, 0, len(visible)):
        return None
    return _detect(reasoning, 0, len(reasoning), True, names)
