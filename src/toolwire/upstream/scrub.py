"""The upstream's key never leaves toolwire: not in a relayed error, a stored response or a
timeline.

Several model servers quote the key they were sent when they refuse it or fail ("Incorrect API
key provided: sk-proj-abc…wxyz", a 500 whose traceback holds the Authorization header). Every
error an upstream adapter raises passes through `Scrubber.error` at the adapter's edge, before
anything above it (the driver, the recorder, the timeline, the sinks) can see it. Replaced:
the key itself, any run of 8 or more of its characters (a truncated key), and masked forms,
its first and last characters around a mask (`sk-...wxyz`, `sk-****wxyz`, `sk-pr…yz`).

Hand-written: the forms are specific to how servers quote keys; a general secret scanner would
look for key *shapes*, not for this one key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolwire.errors import UpstreamError

REDACTED = "<redacted>"
#: Words: what lies between spaces, quotes and punctuation that never occurs in keys.
_WORD = re.compile(r"""[^\s'"`,;()<>\[\]{}|]+""")
#: A mask inside a word: three or more of `*`, `.`, `•`, `x`, `X`, `#`, or an ellipsis.
_MASK = re.compile(r"(?:[*.•#]{3,}|…+|[xX]{4,})")
_MIN_RUN = 8
_MIN_VISIBLE = 4


class Scrubber:
    """Removes `secrets` (and the forms above) from text."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = [s for s in secrets if s and len(s) >= _MIN_RUN]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        if not self.secrets or not text:
            return text
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _WORD.sub(self._word, text)

    def _word(self, match: re.Match[str]) -> str:
        word = match.group(0)
        if len(word) < _MIN_VISIBLE:
            return word
        for secret in self.secrets:
            if _reveals(word, secret):
                return REDACTED
        return word

    def error(self, error: UpstreamError) -> UpstreamError:
        """`error` with its message and kept body scrubbed (in place, and returned)."""
        if not self.secrets:
            return error
        error.message = self.text(error.message)
        error.args = (error.message, *error.args[1:])
        if error.upstream_body is not None:
            error.upstream_body = self.text(error.upstream_body)
        return error


def _reveals(word: str, secret: str) -> bool:
    """Whether `word` shows enough of `secret`: a run of it, or its ends around a mask."""
    for start in range(len(word) - _MIN_RUN + 1):
        if word[start : start + _MIN_RUN] in secret:
            return True
    mask = _MASK.search(word)
    if mask is None:
        return False
    head, tail = word[: mask.start()], word[mask.end() :]
    head = head[max(0, len(head) - len(secret)) :]
    # The head must be the key's beginning and the tail its end (either may carry punctuation
    # the server put around it, so trim to the longest matching part).
    head_match = _longest_prefix(secret, head)
    tail_match = _longest_suffix(secret, tail)
    return head_match + tail_match >= _MIN_VISIBLE and head_match >= 2 and tail_match >= 2


def _longest_prefix(secret: str, head: str) -> int:
    for cut in range(len(head)):
        if secret.startswith(head[cut:]):
            return len(head) - cut
    return 0


def _longest_suffix(secret: str, tail: str) -> int:
    for cut in range(len(tail), 0, -1):
        if secret.endswith(tail[:cut]):
            return cut
    return 0
