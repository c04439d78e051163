"""Credentials inside MCP server URLs: user info (`https://user:pass@host`) and token-ish query
parameters (`token`, `key`, `api_key`, `access_token`, `auth`, `signature`, …) open the
connection and appear nowhere else: not in echoed or stored tools, not in error messages, not in
logs."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "<redacted>"

#: A query parameter whose name contains one of these holds a credential.
_SECRET_NAME = re.compile(
    r"token|key|secret|passw|pwd|auth|sig|credential|session|cookie|jwt|bearer|code", re.I
)
_URL = re.compile(r"https?://[^\s'\"<>]+", re.I)


def redact_url(url: str) -> str:
    """`url` with its user info and secret-looking query values replaced by `<redacted>`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    fragment = REDACTED if parts.fragment and "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_pair(pair: str) -> str:
    name, sep, _ = pair.partition("=")
    if sep and _SECRET_NAME.search(unquote(name)):
        return f"{name}={REDACTED}"
    return pair


def redact_urls(text: str) -> str:
    """Every http(s) URL in `text` (an error message, say) redacted."""
    return _URL.sub(lambda match: redact_url(match.group()), text)
