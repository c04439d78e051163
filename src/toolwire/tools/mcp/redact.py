"""Credentials inside MCP server URLs: user info (`https://user:pass@host`) and token-ish query
parameters (`token`, `key`, `api_key`, `access_token`, `auth`, `signature`, …) open the
connection and appear nowhere else: not in echoed or stored tools, not in error messages, not in
logs. A server's credentials (those, its headers, a stdio server's environment) are also
scrubbed, in every form, from what the server answers (`credential_scrubber`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from toolwire.scrub import Scrubber

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


def credentials(
    url: str | None, headers: Mapping[str, str], env: Mapping[str, str] | None = None
) -> list[str]:
    """The secrets an MCP server is reached with: header values (and the token of an
    `Authorization: Bearer …` / `Basic …`), the URL's password and user, its secret-looking
    query values, and values of the environment a stdio server gets."""
    found: list[str] = []
    for value in headers.values():
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.isalpha():
            found.append(token.strip())
    if url:
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is not None:
            found += [unquote(p) for p in (parts.password, parts.username) if p]
            found += [v for k, v in parse_qsl(parts.query) if _SECRET_NAME.search(k)]
    found += list((env or {}).values())
    return found


def credential_scrubber(
    url: str | None, headers: Mapping[str, str], env: Mapping[str, str] | None = None
) -> Scrubber:
    """What takes an MCP server's credentials, in every form (`toolwire/scrub.py`), out of
    what it answers: its errors and tool results, before they are relayed, stored or given
    to the model."""
    return Scrubber(credentials(url, headers, env))
