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
- a run of 8 or more of its characters (a truncated key), a run of 16 or more of its hex,
  base64 or reversed form, and masked forms: its first and last characters around a mask
  (`sk-...wxyz`, `sk-****wxyz`, `sk-pr…yz`).

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
#: What separates words: spaces, quotes and punctuation that never occurs in keys (a masked
#: form, `sk-...wxyz`, is one word).
_SEPARATORS = frozenset(" \t\n\r\x0b\x0c'\"`,;()<>[]{}|")
_SEPARATOR = re.compile("[" + re.escape("".join(sorted(_SEPARATORS))) + "]")
_AS_IS, _LOWER, _STANDARD = 0, 1, 2
_TO_STANDARD = str.maketrans("-_", "+/")
_HEX_LOWER = str.maketrans("ABCDEF", "abcdef")
_SPLIT = re.compile("[" + re.escape("".join(sorted(_SEPARATORS))) + "]+")
#: What `str.translate` drops to find forms split by whitespace.
_NO_SPACE = {ord(c): None for c in " \t\n\r\x0b\x0c\u00a0\u2028\u2029"}
#: A mask inside a word: three or more of `*`, `.`, `•`, `#`, four of `x` or `X`, or an
#: ellipsis.
_MASK = re.compile(r"(?:[*.•#]{3,}|…+|x{4,}|X{4,})")
#: What a mask needs: text without any of these has none (and is not searched for one).
_MASK_MARKS = ("...", "***", "•••", "###", "…", "xxxx", "XXXX")
_MIN_SECRET = 8
_MIN_RUN = 8
_MIN_ENCODED_RUN = 16
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
    """Removes `secrets` (shorter than 8 characters: ignored) in every form from text.

    Linear in the text, and mostly in C: whole forms are found by `str` searches, split forms
    in the text with its whitespace removed, runs by searching for pieces of the forms (each
    place one occurs is measured: how far the text goes on agreeing with the form both ways),
    masked forms by their masks. The run (or the ends and the mask) is redacted."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len)[::-1]
        self._forms = sorted(
            {form for secret in self.secrets for form in forms(secret)}, key=len, reverse=True
        )
        self._pieces: list[tuple[int, str, str, int, int]] = []
        """(which view of the text, piece, the form it is of, where in the form, the run that
        reveals it). A run of `run` characters always holds a piece of `size` starting at a
        multiple of `step` when `step + size - 1 <= run`: the secrets' pieces of 5 every 4
        in the text as it is; of 9 every 8 (runs of 16) of the reversed secret in the text as
        it is, of its hex in the text with A-F in lower case, of its base64 in the text with
        the URL-safe alphabet made standard. Each place a piece occurs is measured."""
        seen: set[tuple[int, str]] = set()
        for secret in self.secrets:
            raw = secret.encode()
            cores = [c for c in _base64_cores(raw) if "-" not in c and "_" not in c]
            for view, form, size, step, run in (
                (_AS_IS, secret, 5, 4, _MIN_RUN),
                (_AS_IS, secret[::-1], 9, 8, _MIN_ENCODED_RUN),
                (_LOWER, raw.hex(), 9, 8, _MIN_ENCODED_RUN),
                *((_STANDARD, core, 9, 8, _MIN_ENCODED_RUN) for core in cores),
            ):
                for part in _SPLIT.split(form):  # runs lie within a word: "Bearer tok…" is two
                    for start in range(0, len(part) - size + 1, step):
                        piece = part[start : start + size]
                        if (view, piece) not in seen:
                            seen.add((view, piece))
                            self._pieces.append((view, piece, part, start, run))
        self._pairs = {s[i : i + 2] for s in self.secrets for i in range(len(s) - 1)}
        """Every two characters of a secret: a masked form's visible ends are made of them."""

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        if not self.secrets or not text:
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        squeezed = text.translate(_NO_SPACE)
        if len(squeezed) != len(text):
            for form in self._forms:
                if form in squeezed:  # found only there: broken up by whitespace in the text
                    spaced = re.compile(r"\s*".join(map(re.escape, form)))
                    text = spaced.sub(REDACTED, text)
        spans = self._runs(text) + self._masked(text)
        for begin, end in _merged(spans)[::-1]:
            text = text[:begin] + REDACTED + text[end:]
        return text

    def _runs(self, text: str) -> list[tuple[int, int]]:
        """Runs of a secret (or of an encoded form) long enough to show it."""
        spans: list[tuple[int, int]] = []
        views = (text, text.translate(_HEX_LOWER), text.translate(_TO_STANDARD))
        for view, piece, form, at, run in self._pieces:
            text = views[view]  # each view as long as the text: the same places
            found = text.find(piece)
            while found != -1:
                left = 0
                while left < at and left < found and text[found - left - 1] == form[at - left - 1]:
                    left += 1
                right, after = 0, found + len(piece)
                tail = at + len(piece)
                while (
                    tail + right < len(form)
                    and after + right < len(text)
                    and text[after + right] == form[tail + right]
                ):
                    right += 1
                if left + len(piece) + right >= run:
                    spans.append((found - left, after + right))
                found = text.find(piece, found + 1)
        return spans

    def _masked(self, text: str) -> list[tuple[int, int]]:
        """A secret's ends around a mask (`sk-...wxyz`): the ends and the mask."""
        spans: list[tuple[int, int]] = []
        if not any(mark in text for mark in _MASK_MARKS):
            return spans
        longest = len(self.secrets[0])
        pairs = self._pairs
        for mask in _MASK.finditer(text):
            before, after = text[mask.start() - 2 : mask.start()], text[mask.end() : mask.end() + 2]
            if before not in pairs or after not in pairs:
                continue  # either side shows less than two characters of any secret
            head = text[max(0, mask.start() - longest) : mask.start()]
            head = head[max(head.rfind(c) for c in _SEPARATORS) + 1 :]  # within the word
            tail = text[mask.end() : mask.end() + longest]
            cut = _SEPARATOR.search(tail)
            tail = tail if cut is None else tail[: cut.start()]
            for secret in self.secrets:
                shown = _shown_ends(head, tail, secret)
                if shown is not None:
                    spans.append((mask.start() - shown[0], mask.end() + shown[1]))
                    break
        return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def _shown_ends(head: str, tail: str, secret: str) -> tuple[int, int] | None:
    """How much of `secret`'s beginning ends `head` and of its end begins `tail` (the text
    either side of a mask), when that shows enough of it; else None."""
    head = head[max(0, len(head) - len(secret)) :]
    # The head must be the key's beginning and the tail its end (either may carry punctuation
    # the server put around it, so trim to the longest matching part).
    head_match = _longest_prefix(secret, head)
    tail_match = _longest_suffix(secret, tail[: len(secret)])
    if head_match + tail_match >= _MIN_VISIBLE and head_match >= 2 and tail_match >= 2:
        return head_match, tail_match
    return None


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
