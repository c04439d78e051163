"""One pure ASGI middleware per request: the request id, the request metrics, one structured log
line, and the incoming trace context. No `BaseHTTPMiddleware`: it wraps `send` and `receive`
and never buffers a body, so streams stay live.

The request id: a sane incoming `x-request-id` (1-128 characters of `A-Za-z0-9._:-`) is kept,
otherwise one is made; it is returned as `x-request-id` and is `request.state.request_id`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import re
import secrets
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

import orjson

from toolwire.observe import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LogFormat = Literal["text", "json", "off"]

_SANE_ID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
# Made request ids: a random prefix per process and a counter (unique, and no system call per
# request as secrets.token_hex would make); they name a request in logs, they grant nothing.
_ID_PREFIX = b"req_" + secrets.token_hex(4).encode()
_id_counter = itertools.count(1)


_second: list[Any] = [-1, ""]  # the last whole second formatted, and its text


def _timestamp() -> str:
    now = time.time()
    whole = int(now)
    if whole != _second[0]:  # strftime once a second, not once a request
        _second[0], _second[1] = whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{_second[1]}.{int(now % 1 * 1000):03d}Z"


class _LineWriter:
    """Log lines leave the event loop through a bounded queue that one daemon thread drains to
    stderr (where uvicorn logs too). A plain write from the loop would stall every request
    whenever stderr is slow or full (a pipe nobody reads, a stalled log collector); the logging
    module would cost more than the rest of the middleware together. Past `limit` waiting
    lines, new lines are dropped and counted, never waited for.

    On the event loop, the lines of one pass of the loop go to the thread together (one
    `put`, one wake-up of the thread, one write): waking the thread per line was ~2% of a
    proxied chat request under load. The hand-over waits for the end of the loop's pass, not
    for a timer: a thread woken at any other moment takes the interpreter from the requests
    in flight (waking it on a 10 ms timer instead tripled a sequential request's latency on a
    busy machine)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._most = max(1, limit // 100)  # lines in one hand-over
        self._room = max(1, limit // self._most)  # hand-overs waiting for the thread, at most
        # The hand-overs wait in a deque; a lock held while there is nothing to write wakes the
        # thread (`queue.Queue`'s conditions, in Python, were ~40% of a line's cost).
        self._waiting: deque[str] = deque()
        self._wake = threading.Lock()
        self._wake.acquire()
        self._woken = False  # the thread is woken (or writing): no need to release again
        self._thread: threading.Thread | None = None
        self._batch: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # where the hand-over is due
        self.dropped = 0

    def __call__(self, line: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on an event loop: hand the line over at once
            self._put(line + "\n", 1)
            return
        batch = self._batch
        if batch and loop is not self._loop:  # its loop stopped before the hand-over ran
            self._hand_over()
            batch = self._batch
        if not batch:
            self._loop = loop
            loop.call_soon(self._hand_over)
        batch.append(line + "\n")
        if len(batch) >= self._most:
            self._hand_over()

    def _hand_over(self) -> None:
        batch, self._batch = self._batch, []
        if batch:  # (a full batch went early: the pass's call finds none)
            self._put("".join(batch), len(batch))

    def _put(self, text: str, lines: int) -> None:
        if len(self._waiting) >= self._room:
            self.dropped += lines
            return
        self._waiting.append(text)  # before `_woken` is read: the thread clears it, then pops
        if not self._woken:
            self._woken = True
            # (two threads' lines may race to wake it: the second finds it awake)
            with contextlib.suppress(RuntimeError):
                self._wake.release()
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, name="toolwire-log", daemon=True)
            self._thread.start()
            atexit.register(self._at_exit)

    def _at_exit(self) -> None:
        """The lines still held (a loop that stopped first) and those queued, given a moment
        to be written: the thread is a daemon, and a stderr nobody reads must not hold up the
        exit."""
        self._hand_over()
        deadline = time.monotonic() + 0.5
        while self._waiting and time.monotonic() < deadline:
            time.sleep(0.01)

    def _drain(self) -> None:
        waiting = self._waiting
        while True:
            self._wake.acquire()
            self._woken = False  # before popping: a line put from here on wakes it again
            try:
                while waiting:
                    sys.stderr.write(waiting[0])
                    waiting.popleft()
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed: nothing left to log to
                return


_write = _LineWriter()


def _route(scope: Scope, status: int) -> str:
    """The route template; `(unmatched)` for a path no route serves (404), `(refused)` for a
    request a middleware answered before routing (a missing key, a foreign Origin, a body too
    large): a metric label, so never the raw path."""
    route = getattr(scope.get("route"), "path", None)
    if route:
        return str(route)
    return "(unmatched)" if status in (404, 405) else "(refused)"


class _UvicornWebSocketLines(logging.Filter):
    """Drops uvicorn's own lines about WebSockets (`"WebSocket /path" [accepted]`, `connection
    open`, `connection closed`): the request log's WEBSOCKET line says the same, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not ('"WebSocket ' in message or message in ("connection open", "connection closed"))


_UVICORN_FILTER = _UvicornWebSocketLines()


def quiet_uvicorn_websocket_lines() -> None:
    logging.getLogger("uvicorn.error").addFilter(_UVICORN_FILTER)  # once: added by identity


#: `log_level`s above info (uvicorn's names): request lines only for answers of 5xx
QUIET_LEVELS = frozenset({"warning", "error", "critical"})


class RequestObserver:
    """What is observed of each HTTP request: its id (kept or made), the request metrics, the
    log line and the incoming trace context, observed by the gate's one middleware
    (`server/gate/middleware.py`), outermost."""

    def __init__(
        self, *, log_format: LogFormat = "text", tracing: bool = False, log_level: str = "info"
    ) -> None:
        self.log_format = log_format
        #: a line is an info record, a 5xx answer's a warning: above info, only those are kept
        self.least_status = 500 if log_level.lower() in QUIET_LEVELS else 0
        if log_format != "off":
            quiet_uvicorn_websocket_lines()
        self.tracing = tracing
        self._kept: dict[tuple[str | None, str, int], tuple[str, Any, Any, Any]] = {}

    def request_id(self, scope: Scope) -> bytes:
        """A sane incoming `x-request-id`, or a new one; also `scope["state"]["request_id"]`."""
        request_id: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                if _SANE_ID.fullmatch(value):
                    request_id = bytes(value)
                break
        if request_id is None:
            request_id = b"%s%016x" % (_ID_PREFIX, next(_id_counter))
        scope.setdefault("state", {})["request_id"] = request_id.decode("ascii")
        return request_id

    def attach(self, scope: Scope) -> Any:
        """The incoming trace context made current (a token for `detach`), when tracing."""
        if not self.tracing:
            return None
        from toolwire.observe import tracing

        ctx = tracing.extract_context(scope["headers"])
        return None if ctx is None else tracing.attach(ctx)

    def detach(self, token: Any) -> None:
        if token is not None:
            from toolwire.observe import tracing

            tracing.detach(token)

    def _children(self, scope: Scope, status: int) -> tuple[str, Any, Any, Any]:
        """The request's route label and its metric children (requests, duration, time to first
        byte), remembered by what picks them: a route template, a method (one of the few the
        HTTP parser accepts) and a status."""
        key = (getattr(scope.get("route"), "path", None), scope["method"], status)
        found = self._kept.get(key)
        if found is None:
            route = _route(scope, status)
            method = metrics.METHOD_LABEL(scope["method"])
            found = (
                route,
                metrics.HTTP_REQUESTS.labels(route, method, str(status)),
                metrics.HTTP_DURATION.labels(route),
                metrics.HTTP_TTFB.labels(route),
            )
            if len(self._kept) < 4096:
                self._kept[key] = found
        return found

    def record(
        self,
        scope: Scope,
        status: int,
        start: float,
        first_byte: float | None,
        finished: bool,
        disconnected: bool,
    ) -> None:
        """The request's metrics and log line, once it is over."""
        end = time.perf_counter()
        route, requests, duration, ttfb = self._children(scope, status)
        metrics.request_done(
            requests,
            duration,
            ttfb,
            end - start,
            None if first_byte is None else first_byte - start,
        )
        if not finished and (disconnected or first_byte is not None):
            disconnected = True
            metrics.STREAM_DISCONNECTS.labels(route).inc()
        if self.log_format != "off" and status >= self.least_status:
            rid = scope["state"]["request_id"]
            self._log(scope, rid, route, status, start, end, first_byte, disconnected)

    async def websocket(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """A WebSocket (the Responses API's WebSocket mode) through `app`, logging one line in
        the same format when it ends: `method=WEBSOCKET`, status 101 once accepted (or the
        status it was refused with), its whole duration; uvicorn's own lines for it are
        filtered out."""
        start = time.perf_counter()
        request_id = self.request_id(scope)
        rid = request_id.decode("ascii")
        status = 500
        accepted: float | None = None

        async def observed_send(message: Message) -> None:
            nonlocal status, accepted
            kind = message["type"]
            if kind == "websocket.accept":
                status, accepted = 101, time.perf_counter()
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id)]
            elif kind == "websocket.close" and accepted is None:
                status = 403
            elif kind == "websocket.http.response.start":
                status = message["status"]
            await send(message)

        try:
            await app(scope, receive, observed_send)
        finally:
            if self.log_format != "off" and status >= self.least_status:
                log_scope = {**scope, "method": "WEBSOCKET"}
                end = time.perf_counter()
                self._log(
                    log_scope, rid, _route(scope, status), status, start, end, accepted, False
                )

    def _log(
        self,
        scope: Scope,
        rid: str,
        route: str,
        status: int,
        start: float,
        end: float,
        first_byte: float | None,
        disconnected: bool,
    ) -> None:
        client = scope.get("client")
        owner = scope.get("state", {}).get("owner")
        if self.log_format == "json":
            duration = round((end - start) * 1000, 3)
            ttfb = None if first_byte is None else round((first_byte - start) * 1000, 3)
            fields: dict[str, Any] = {
                "time": _timestamp(),
                "request_id": rid,
                "method": scope["method"],
                "path": scope["path"],
                "route": route,
                "status": status,
                "duration_ms": duration,
                "ttfb_ms": ttfb,
                "client": client[0] if client else None,
            }
            if owner is not None:
                fields["owner"] = str(owner)
            if disconnected:
                fields["disconnected"] = True
            _write(orjson.dumps(fields).decode())
            return
        # The text line, written out field by field (the same line a dict of the fields joined
        # as `key=value` gives, ~3× cheaper: once per request): the request id, the status and
        # the durations are plain by construction; what a client chose is quoted when not.
        text = _text_value
        key = (scope["method"], scope["path"], route)
        head = _HEADS.get(key)
        if head is None:
            head = _head(key)
        line = (
            f"time={_timestamp()} request_id={rid} {head} status={status} "
            f"duration_ms={_millis((end - start) * 1000)}"
        )
        if first_byte is not None:
            line += f" ttfb_ms={_millis((first_byte - start) * 1000)}"
        if client:
            line += f" client={text(client[0])}"
        if owner is not None:
            line += f" owner={text(owner)}"
        if disconnected:
            line += " disconnected=True"
        _write(line)


_PLAIN = re.compile(r"[\w./:@%+,\-\[\]()]*")


def _millis(value: float) -> str:
    """`str(round(value, 3))` for a non-negative `value` under 1e16, at half its cost: both
    round the exact binary value to 3 decimals correctly, the zeros after the last digit
    dropped (`1.5`, `0.0`)."""
    text = f"{value:.3f}".rstrip("0")
    return text + "0" if text[-1] == "." else text


_HEADS: dict[tuple[str, str, str], str] = {}


def _head(key: tuple[str, str, str]) -> str:
    """The text line's `method=... path=... route=...`, remembered for the first 4096 short
    paths (most requests name a few fixed paths)."""
    method, path, route = key
    head = f"method={_text_value(method)} path={_text_value(path)} route={_route_text(route)}"
    if len(_HEADS) < 4096 and len(path) <= 256:
        _HEADS[key] = head
    return head


_ROUTE_TEXT: dict[str, str] = {}


def _route_text(route: str) -> str:
    """`_text_value` of a route template, remembered (a few dozen templates, and `(refused)`)."""
    found = _ROUTE_TEXT.get(route)
    if found is None:
        found = _text_value(route)
        if len(_ROUTE_TEXT) < 1024:
            _ROUTE_TEXT[route] = found
    return found


_TEXT: dict[str, str] = {}


def _text_value(value: Any) -> str:
    """A value as the text format writes it: bare when plainly safe, else a JSON string. A
    request path decoded from `%0a` (a newline), a space or a quote must not forge a field or a
    whole log line. Remembered for the methods, paths and clients seen most (the first 4096
    short ones: a regex match per field was a fifth of the line's cost)."""
    text = str(value)
    found = _TEXT.get(text)
    if found is not None:
        return found
    found = text if _PLAIN.fullmatch(text) and text else orjson.dumps(text).decode()
    if len(_TEXT) < 4096 and len(text) <= 256:
        _TEXT[text] = found
    return found
