"""Which upstreams enforce a `strict` tool's schema themselves, and so are asked to.

A client marks a function tool `strict` to have its calls fit the schema exactly. vLLM does so
from 0.27 on, constraining the call with xgrammar structural tags (it accepts `strict` since
vLLM PR #45600; earlier versions render the flag into the model's prompt instead, vllm
#52741, which changes how the model calls tools); OpenAI's own API always has. toolwire passes
`strict` on to such an upstream, learned once per upstream from vLLM's `GET /version` (or the
operator's `strict_tools` setting), and drops it for every other: there the gateway's own
check (`loop/fitting.py`) is the enforcement. Calls of a tool the upstream enforces can stream
live, since judging them cannot change them.
"""

from __future__ import annotations

import re
import time
from typing import Literal
from urllib.parse import urlsplit

import orjson

StrictTools = Literal["auto", "enforced", "ignored"]

#: The first vLLM release that constrains `strict` tools' calls (structural tags).
VLLM_ENFORCES_FROM = (0, 27)
#: Hosts whose API enforces `strict` itself.
ENFORCING_HOSTS = frozenset({"api.openai.com"})

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)")


def vllm_enforces(answer: bytes) -> bool:
    """Does vLLM's `/version` answer (`{"version": "0.27.1"}`) name a release that enforces
    `strict`? Anything else (another server's page, a 404 body) does not."""
    try:
        version = orjson.loads(answer).get("version")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2))) >= VLLM_ENFORCES_FROM


class StrictSupport:
    """What one upstream does with `strict`: set by the operator, known from its host, or
    learned from its `/version` (again after `recheck_seconds`, as a server may be upgraded)."""

    __slots__ = ("_enforced", "_mode", "_recheck", "_until")

    def __init__(self, mode: StrictTools, base_url: str, recheck_seconds: float) -> None:
        self._mode = mode
        self._recheck = recheck_seconds
        self._until = 0.0  # monotonic: what was learned holds until then
        host = urlsplit(base_url).hostname or ""
        self._enforced = mode == "enforced" or (mode == "auto" and host in ENFORCING_HOSTS)
        if mode != "auto" or self._enforced:
            self._until = float("inf")

    @property
    def enforced(self) -> bool:
        return self._enforced

    def needs_probe(self) -> bool:
        return time.monotonic() >= self._until

    def learn(self, version_answer: bytes | None) -> None:
        """The upstream's `/version` answer (None: it gave none)."""
        self._enforced = version_answer is not None and vllm_enforces(version_answer)
        self._until = time.monotonic() + self._recheck
