"""Secrets removed from text in every form a server can quote them in, before the text is
relayed, logged, traced or stored.

The secrets are the upstream's API key (an upstream quoting it in an error: "Incorrect API key
provided: sk-proj-abc…wxyz", a traceback holding the Authorization header) and the credentials
of MCP servers (a server echoing its token in an error or a tool result). `Scrubber.text`
replaces, with `<redacted>`:

- the secret itself, and JSON-escaped (`\\/`, `\\uXXXX`) and percent-encoded (`%2D`, every
  byte or only the reserved ones, either case);
- its base64, standard and URL-safe, with or without padding, wherever it starts in what was
  encoded (HTTP Basic `user:key` puts it after the user name): the part of the encoding that
  depends on the secret alone, at each of base64's three alignments;
- its hex (either case) and the secret reversed;
- any of those split by whitespace (`sk-proj-Zx81 Qa7TmL0p Rw3Y…`);
- a run of 8 or more of its characters (a truncated key), a run of 12 or more of an encoded
  form, and masked forms: its first and last characters around a mask (`sk-...wxyz`,
  `sk-****wxyz`, `sk-pr…yz`).

Hand-written: the forms are specific to how servers quote one known secret; a general secret
scanner looks for key *shapes*, not for this key. Text scrubbed here is small (error bodies,
kept to 64 KiB; tool results), and a scrubber with no secrets costs nothing.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

REDACTED = "<redacted>"
#: Words: what lies between spaces, quotes and punctuation that never occurs in keys.
_WORD = re.compile(r"""[^\s'"`,;()<>\[\]{}|]+""")
#: A mask inside a word: three or more of `*`, `.`, `•`, `x`, `X`, `#`, or an ellipsis.
_MASK = re.compile(r"(?:[*.•#]{3,}|…+|[xX]{4,})")
_MIN_SECRET = 8
_MIN_RUN = 8
_MIN_ENCODED_RUN = 12
_MIN_VISIBLE = 4


def _base64_cores(secret: bytes) -> list[str]:
    """The base64 characters that depend on `secret` alone, for each of the three places it can
    start at in an encoded stream (after 0, 1 or 2 bytes of something else): standard and
    URL-safe. A group of 4 characters encodes 3 bytes; groups shared with unknown bytes
    before or after are left out."""
    cores: list[str] = []
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + secret).decode()
        first = 4 if lead else 0  # the group holding the unknown leading bytes
        whole_groups = (lead + len(secret)) // 3  # groups made of known bytes only, at the end
        core = encoded[first : whole_groups * 4]
        if len(core) >= _MIN_ENCODED_RUN:
            cores += [core, core.translate(str.maketrans("+/", "-_"))]
    return cores


def forms(secret: str) -> list[str]:
    """Every whole form of `secret` a server may quote (the module docstring), longest first."""
    raw = secret.encode()
    found = {
        secret,
        secret.replace("/", "\\/"),
        "".join(f"\\u{ord(c):04x}" for c in secret),
        "".join(f"\\u{ord(c):04X}" for c in secret),
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        "".join(f"%{b:02X}" for b in raw),
        "".join(f"%{b:02x}" for b in raw),
        raw.hex(),
        raw.hex().upper(),
        secret[::-1],
    }
    for core in _base64_cores(raw):
        found |= {core, quote(core, safe="")}
    return sorted(found, key=len, reverse=True)


class Scrubber:
    """Removes `secrets` (shorter than 8 characters: ignored) in every form from text."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len)[::-1]
        self._forms = sorted(
            {form for secret in self.secrets for form in forms(secret)}, key=len, reverse=True
        )
        #: encoded forms (not the secret itself), whose runs of 12 reveal it too
        self._encoded = [f for f in self._forms if f not in self.secrets and len(f) >= 16]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        if not self.secrets or not text:
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        if any(c.isspace() for c in text):
            text = self._split(text)
        return _WORD.sub(self._word, text)

    def _split(self, text: str) -> str:
        """Forms broken up by whitespace: found in the text without its whitespace, redacted
        where they lie in the text itself."""
        kept = [i for i, c in enumerate(text) if not c.isspace()]
        squeezed = "".join(text[i] for i in kept)
        spans: list[tuple[int, int]] = []
        for form in self._forms:
            start = squeezed.find(form)
            while start != -1:
                spans.append((kept[start], kept[start + len(form) - 1] + 1))
                start = squeezed.find(form, start + len(form))
        for begin, end in sorted(_merged(spans), reverse=True):
            text = text[:begin] + REDACTED + text[end:]
        return text

    def _word(self, match: re.Match[str]) -> str:
        word = match.group(0)
        if len(word) < _MIN_VISIBLE or word == REDACTED:
            return word
        for secret in self.secrets:
            if _reveals(word, secret):
                return REDACTED
        for form in self._encoded:
            if _has_run(word, form, _MIN_ENCODED_RUN):
                return REDACTED
        return word


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def _has_run(word: str, secret: str, length: int) -> bool:
    return any(word[i : i + length] in secret for i in range(len(word) - length + 1))


def _reveals(word: str, secret: str) -> bool:
    """Whether `word` shows enough of `secret`: a run of it, or its ends around a mask."""
    if _has_run(word, secret, _MIN_RUN):
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
