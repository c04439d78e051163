"""The result envelope (seed 000): the one place a tool result becomes what the model reads.

Plain text, never JSON: a `status:` / `toolName:` / `error:` / `output:` block. Long output is
cut in the middle, keeping head and tail, with an inline marker saying how much went; the final
text is sanitized once (lone surrogates, NUL, invalid UTF-8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SURROGATE = re.compile("[\ud800-\udfff]")
_MARKER = "\n[… truncated: {chars} characters in {lines} lines cut from the middle …]\n"


@dataclass(slots=True, frozen=True)
class EnvelopeLimits:
    """How much of one result the model may read. Head and tail are kept; the middle goes."""

    max_chars: int = 40_000
    max_lines: int = 2_000
    head_fraction: float = 0.6


def render_envelope(
    tool_name: str,
    *,
    ok: bool,
    output: str = "",
    error: str = "",
    limits: EnvelopeLimits | None = None,
) -> str:
    """The exact block of DESIGN.md; `output` and `error` are raw text, not JSON."""
    limits = limits or EnvelopeLimits()
    text = (
        f"status:\n{'success' if ok else 'error'}\n\n"
        f"toolName:\n{tool_name}\n\n"
        f"error:\n{truncate(error, limits)}\n\n"
        f"output:\n{truncate(output, limits)}"
    )
    return sanitize(text)


def truncate(text: str, limits: EnvelopeLimits) -> str:
    """Cut the middle out of `text` if it exceeds either limit; say inline what was cut."""
    if len(text) <= limits.max_chars and text.count("\n") < limits.max_lines:
        return text
    lines = text.split("\n")
    if len(lines) > limits.max_lines:
        head_n = max(1, int(limits.max_lines * limits.head_fraction))
        tail_n = max(0, limits.max_lines - head_n)
        head = "\n".join(lines[:head_n])
        tail = "\n".join(lines[len(lines) - tail_n :]) if tail_n else ""
    else:
        head, tail = text, ""
    budget = limits.max_chars
    if len(head) + len(tail) > budget:
        head_budget = int(budget * limits.head_fraction)
        tail_budget = budget - head_budget
        joined = head + ("\n" + tail if tail else "")
        head = joined[:head_budget]
        tail = joined[len(joined) - tail_budget :] if tail_budget else ""
    cut = text[len(head) : len(text) - len(tail)] if tail else text[len(head) :]
    marker = _MARKER.format(chars=len(cut), lines=cut.count("\n") + 1)
    return head + marker + tail


def sanitize(text: str) -> str:
    """Replace NUL and lone surrogates (which break JSON encoders upstream) with U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text
