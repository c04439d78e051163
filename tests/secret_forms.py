"""A secret in every form a server may quote it in (`encodings`), and a check that no run of it
can be read back from a text, however it is decoded (`reveals`): for the scrubbing tests
(`toolwire/scrub.py`), independent of how the scrubber finds the forms."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from urllib.parse import quote, unquote


def encodings(secret: str) -> dict[str, str]:
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode()
    url = base64.urlsafe_b64encode(raw).decode()
    return {
        "plain": secret,
        "JSON-escaped": json.dumps(secret).strip('"').replace("/", "\\/"),
        "JSON \\u-escaped": "".join(f"\\u{ord(c):04x}" for c in secret),
        "base64": b64,
        "base64 unpadded": b64.rstrip("="),
        "base64 URL-safe": url,
        "base64 URL-safe unpadded": url.rstrip("="),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "percent-encoded": quote(secret, safe=""),
        "percent-encoded, every byte": "".join(f"%{b:02X}" for b in raw),
        "Basic user:key": "Basic " + base64.b64encode(b"user:" + raw).decode(),
        "Basic u:key": "Basic " + base64.b64encode(b"u:" + raw).decode(),
        "Basic admin:key": "Basic " + base64.b64encode(b"admin:" + raw).decode(),
        "reversed": secret[::-1],
        "space-split": " ".join(secret[i : i + 5] for i in range(0, len(secret), 5)),
        "line-split": "\n".join(secret[i : i + 7] for i in range(0, len(secret), 7)),
        "truncated": secret[:14],
        "masked": f"{secret[:8]}{'*' * 20}{secret[-4:]}",
    }


def _decodings(word: str) -> list[str]:
    out = [word, word[::-1], unquote(word), word.replace("\\/", "/")]
    out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), word))
    for digits in re.findall(r"[0-9a-fA-F]{16,}", word):
        for start in (0, 1):
            end = start + (len(digits) - start) // 2 * 2
            out.append(bytes.fromhex(digits[start:end]).decode(errors="replace"))
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        for cut in range(4):  # the word may start anywhere in the encoded stream
            piece = word[cut:]
            with contextlib.suppress(binascii.Error, ValueError):
                out.append(decode(piece + "=" * (-len(piece) % 4)).decode(errors="replace"))
    return out


def reveals(text: str, secret: str) -> bool:
    """Whether a run of 8 characters of `secret` can be read from `text`, decoded any way."""
    squeezed = re.sub(r"\s+", "", text)
    words = [*re.findall(r"[^\s'\"`,;()<>\[\]{}|]+", text), squeezed]
    runs = {secret[i : i + 8] for i in range(len(secret) - 7)}
    return any(run in decoded for word in words for decoded in _decodings(word) for run in runs)
