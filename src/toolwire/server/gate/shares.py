"""Fair shares per API key, at the gate, before a request reaches any door.

- **Requests per minute on every route a key can call that writes or runs a model**: every
  request that is not a read (`POST`, `PUT`, `PATCH`, `DELETE` under `/v1` and `/v1beta`:
  responses, chat, messages and `count_tokens`, Gemini's `generateContent` and `countTokens`,
  compaction, conversation and item writes, cancels) counts
  against the key's `rpm` (`store/quotas.py` `count_request`); a WebSocket's messages count one
  by one (`server/responses/socket.py`), its upgrade does not (the sockets a key holds are
  bounded below). Reads (`GET`) do not count: they are bounded by the database, and `/ui`
  polls them.
- **Concurrent requests per key** (`max_streams_per_key`, default 64 in each process): a
  counted request holds a slot from the gate until its answer (a stream included) has been
  sent; one more is refused with 429 (`rate_limit_exceeded`, `retry-after: 1`).
- **WebSockets per key** (`max_websockets_per_key`, default 32 in each process): one more
  upgrade is refused with 429 before the socket opens, so one tenant cannot take every one of
  the process's `max_websockets` slots.

A keyless server (one user, on loopback) has no per-key shares: its process-wide limits apply.
The refusals are answered in the shape of the API the path belongs to (`send_error`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from toolwire.server.gate.auth import Scope, Send
from toolwire.server.http.errors import send_error
from toolwire.store.quota_terms import RateLimited
from toolwire.store.quotas import QuotaStore

#: Methods whose requests are reads: not counted against the requests per minute.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(slots=True)
class Shares:
    quotas: QuotaStore
    max_streams_per_key: int = 64
    max_websockets_per_key: int = 32
    _streams: Counter[str] = field(default_factory=Counter)
    _sockets: Counter[str] = field(default_factory=Counter)

    async def take(self, scope: Scope, send: Send) -> str | None:
        """Count the request and take its slot: the slot's key (give it back with `give`), ""
        when it needs none, None when refused (and answered here)."""
        owner = scope.get("state", {}).get("owner")
        if not isinstance(owner, str):
            return ""
        websocket = scope["type"] == "websocket"
        if not websocket and (scope["method"] in _READS or not scope["path"].startswith("/v1")):
            return ""
        held, most = (
            (self._sockets, self.max_websockets_per_key)
            if websocket
            else (self._streams, self.max_streams_per_key)
        )
        if held[owner] >= most:
            what = "WebSockets open" if websocket else "requests running"
            setting = "max_websockets_per_key" if websocket else "max_streams_per_key"
            await send_error(
                send,
                429,
                f"Too many {what} at once for this API key: at most {most} in this server "
                f"process ({setting}). Wait for one to finish and try again.",
                "rate_limit_exceeded",
                error_type="requests",
                headers=[(b"retry-after", b"1")],
                scope=scope,
            )
            return None
        try:
            if not websocket:  # a socket's messages count, one by one (`socket.py`)
                await self.quotas.count_request(owner)
        except RateLimited as exc:
            await send_error(
                send,
                exc.status,
                exc.message,
                exc.code or "rate_limit_exceeded",
                error_type=exc.error_type,
                headers=[(k.encode(), v.encode()) for k, v in (exc.headers or {}).items()],
                scope=scope,
            )
            return None
        held[owner] += 1
        return owner

    def give(self, scope: Scope, owner: str) -> None:
        if not owner:
            return
        held = self._sockets if scope["type"] == "websocket" else self._streams
        held[owner] -= 1
        if held[owner] <= 0:
            del held[owner]
