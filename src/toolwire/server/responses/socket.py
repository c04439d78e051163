"""WebSocket mode of `/v1/responses`: one socket, many responses, one after another.

A thin door onto the same service and driver as HTTP. The client sends `response.create`
messages (the body of `POST /v1/responses` plus `"type": "response.create"`; `stream` is
implied, `background` is not offered); each runs through `ResponsesService.events`, and its
stream events go back as JSON text messages, exactly as the SSE door sends them, up to the
terminal `response.completed` / `.incomplete` / `.failed`. Messages that arrive while a response
runs wait their turn: a socket runs one response at a time, in order. A `stream_id` (OpenAI's
lanes) is echoed on its request's events, but lanes are not run in parallel here.

The socket remembers its last finished response in memory (`LocalResponse`): continuing from it
with `previous_response_id` needs no store, so `store: false` chains work on the socket that
made them (and nowhere else). A request that fails (or a response that fails) forgets it, as
OpenAI evicts it, so a client cannot continue from state it did not see succeed.

A request refused before its response starts (bad body, unknown `previous_response_id`, …) is
one `error` message in the WebSocket envelope, `{"type": "error", "status", "error": {type,
code, message, param}}`, and the socket stays open. A run that fails after
`response.created` ends with `response.failed` (its `error` inside), as the one terminal
message of that turn.

The messages read from every socket of the process and not yet answered share one budget of
memory (`max_socket_queue_bytes`, `Inbox`): with no room left a socket is not read, and one that
holds none of it is closed with 1013 (try again later) after `socket_queue_wait` seconds; a
message bigger than `max_body_bytes` closes its socket with 1009 before it is read. How many
sockets one API key may hold is the gate's (`server/gate/shares.py`).

A socket stays open at most `max_socket_seconds` (default 60 minutes, as OpenAI's); then it
sends `websocket_connection_limit_reached` and closes, and the client opens a new one.

Authentication, the Origin / Host checks and the size limit apply to the upgrade request and
each message in the ASGI middleware (`server/gate/auth.py`, `server/gate/guards.py`,
`server/gate/limits.py`); the key is checked again before each `response.create` runs (a revoked key
gets one `invalid_api_key` error and the socket closes, 1008); the JSON depth and item counts here,
per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from toolwire.errors import InvalidRequestError, ToolwireError
from toolwire.server.gate.auth import owner_of
from toolwire.server.gate.limits import Limits, parse_limited_json
from toolwire.server.gate.quotas import admit, admit_storage
from toolwire.server.responses.budget import ByteBudget
from toolwire.server.responses.service import LocalResponse, Prepared, ResponsesService
from toolwire.upstream.fleet.affinity import session_of
from toolwire.wire.items import ResponseObject, SocketError, StreamEvent

log = logging.getLogger("toolwire.server")

CREATE = "response.create"
_FINISHED = frozenset({"response.completed", "response.incomplete"})
#: Messages read ahead while a response runs; past this the socket is not read until the
#: current response ends (the client's sends back up, as on any full socket). With the one
#: being read, a socket holds at most QUEUED + 2 messages (each under the body limit).
QUEUED = 2


@dataclass(slots=True, frozen=True)
class Queued:
    """A message read from a socket, and the bytes of the budget it holds until answered."""

    data: str | bytes
    size: int


class Inbox:
    """One socket's messages read and not yet answered: at most `QUEUED` waiting, each holding
    its size (the memory it takes) of the process's budget (`ByteBudget`, shared by every
    socket) until it has been answered. With no room in the budget the socket is not read
    (its client's sends back up); a socket whose own messages hold room waits for them to be
    answered, one holding none gives up after `wait` seconds (`put` is False: the socket is
    closed, 1013)."""

    def __init__(self, budget: ByteBudget, wait: float) -> None:
        self.queue: asyncio.Queue[Queued] = asyncio.Queue(QUEUED)
        self.budget = budget
        self.wait = wait
        self.held = 0

    async def put(self, data: str | bytes) -> bool:
        size = sys.getsizeof(data)  # the memory it holds, not its length
        if not await self.budget.take(size, None if self.held else self.wait):
            return False
        self.held += size
        try:
            await self.queue.put(Queued(data, size))
        except BaseException:
            self.done(size)
            raise
        return True

    async def get(self) -> Queued:
        return await self.queue.get()

    def done(self, size: int) -> None:
        """A message answered (or dropped): its room is free again."""
        self.held -= size
        self.budget.give(size)

    def drop(self) -> None:
        """The socket is gone: what was read and never answered gives its room back."""
        while not self.queue.empty():
            self.done(self.queue.get_nowait().size)


class ResponsesSocket:
    """The WebSocket door of `/v1/responses`: `.endpoint` is the `WebSocketRoute` endpoint."""

    def __init__(self, service: ResponsesService, limits: Limits) -> None:
        self.service = service
        self.limits = limits
        self.open = 0
        #: the messages read from every socket and not yet answered, together
        self.queued = ByteBudget(limits.max_socket_queue_bytes)

    async def endpoint(self, websocket: WebSocket) -> None:
        if self.open >= self.limits.max_sockets:
            # Refused before it is accepted: the client sees a failed handshake (HTTP 403 from
            # uvicorn), and memory stays bounded however many sockets are opened.
            await websocket.close(code=1013, reason="too many WebSockets open; try again")
            return
        self.open += 1
        try:
            await self._serve(websocket)
        finally:
            self.open -= 1

    async def _serve(self, websocket: WebSocket) -> None:
        await websocket.accept()
        session = _Session(self, websocket)
        inbox = Inbox(self.queued, self.limits.socket_queue_wait)
        worker = asyncio.create_task(session.work(inbox))
        reader = asyncio.create_task(self._read(websocket, inbox))
        try:
            # Either the client leaves (the reader ends), or sending to it failed (the worker
            # ends): the other one stops; a response still running is cancelled, as when an
            # SSE client disconnects.
            await asyncio.wait({worker, reader}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (worker, reader):
                task.cancel()
            await asyncio.gather(worker, reader, return_exceptions=True)
            inbox.drop()
            if websocket.application_state is WebSocketState.CONNECTED:
                with contextlib.suppress(Exception):
                    await websocket.close()

    async def _read(self, websocket: WebSocket, inbox: Inbox) -> None:
        """Client messages into `inbox`, until the client goes; when the process's queued
        messages leave no room (`Inbox`), the socket is not read, then closed with 1013 (try
        again later)."""
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            if not await inbox.put(data):
                log.warning("WebSocket closed: queued messages of all sockets are at the limit")
                await websocket.close(code=1013, reason="server busy: try again later")
                return


class _Session:
    """One socket's state: its owner and its last finished response."""

    def __init__(self, door: ResponsesSocket, websocket: WebSocket) -> None:
        self.door = door
        self.websocket = websocket
        self.owner = owner_of(websocket)
        self.session = session_of(websocket.headers)  # a routing hint (upstream/fleet/)
        self.last: LocalResponse | None = None
        #: the `stream_id` of the request being answered, echoed on its events
        self.lane: str | None = None

    async def work(self, inbox: Inbox) -> None:
        """Answer the socket's messages in order, until the socket has been open
        `max_socket_seconds`: then `websocket_connection_limit_reached` (a response running
        at that moment finishes first), and the socket closes."""
        deadline = time.monotonic() + self.door.limits.max_socket_seconds
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                try:
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        queued = await inbox.get()
                except TimeoutError:
                    await self.send(_error_event(_LIMIT_REACHED))
                    return
                try:
                    if not await self.answer(queued.data, deadline):
                        return
                finally:
                    inbox.done(queued.size)  # answered: its room is free again
                self.lane = None  # what follows (the time limit) belongs to no request

    async def answer(self, raw: str | bytes, deadline: float) -> bool:
        """One message answered; False when the socket is done (its time is up, its key
        revoked)."""
        if time.monotonic() >= deadline:
            await self.send(_error_event(_LIMIT_REACHED))
            return False
        if not await self.key_still_valid():
            await self.send(_error_event(_KEY_REVOKED, status=401))
            await self.websocket.close(code=1008, reason="invalid_api_key")
            return False
        try:
            await self.turn(raw)
        except ToolwireError as exc:
            self.last = None
            await self.send(_error_event(exc))
        except (WebSocketDisconnect, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("unhandled error in a WebSocket response")
            self.last = None
            await self.send(
                _error_event(
                    ToolwireError(f"internal error: {type(exc).__name__}", code="internal_error")
                )
            )
        return True

    async def key_still_valid(self) -> bool:
        """The key the socket was opened with is still accepted (`server/gate/auth.py`)."""
        check = getattr(self.websocket.state, "key_check", None)
        return check is None or bool(await check())

    async def turn(self, raw: str | bytes) -> None:
        """One `response.create`: prepared, run, streamed. A refusal raises (`work` sends it
        as one `error` message)."""
        self.last, local = None, self.last  # any failure from here on forgets it
        self.lane = None
        store = self.door.service.store
        await store.quotas.count_request(self.owner)  # every message counts: 429 when spent
        message = parse_limited_json(raw, self.door.limits)
        if isinstance(message, dict):
            lane = message.pop("stream_id", None)
            if lane is not None and not isinstance(lane, str):
                raise InvalidRequestError("stream_id must be a string.", param="stream_id")
            self.lane = lane
        body = _create_body(message)
        prepared = await self.door.service.prepare(
            body, owner=self.owner, local=local, session=self.session
        )
        await admit(store, self.owner, body, prepared.request.max_output_tokens)
        if prepared.request.store:
            await admit_storage(store, self.owner, body)
        await self.run(prepared)

    async def run(self, prepared: Prepared) -> None:
        final: ResponseObject | None = None
        started = False
        dropped = 0
        async with contextlib.aclosing(self.door.service.events(prepared)) as events:
            async for event in events:
                kind = event["type"]
                if kind == "response.created":
                    started = True
                elif kind == "error" and started:
                    # `response.failed` follows with the error inside: one terminal message
                    # per turn, and no gap in the sequence numbers.
                    dropped += 1
                    continue
                if dropped:
                    event = event.copy()
                    event["sequence_number"] = event["sequence_number"] - dropped
                if kind in _FINISHED:
                    final = event["response"]
                await self.send(event)
        if final is not None:
            self.last = LocalResponse.of(prepared, final)

    async def send(self, event: StreamEvent | SocketError) -> None:
        if self.lane is not None:
            event = event.copy()
            event["stream_id"] = self.lane
        await self.websocket.send_text(orjson.dumps(event).decode())


def _create_body(message: Any) -> dict[str, Any]:
    """A `response.create` message → the body `ResponsesService.prepare` takes."""
    if not isinstance(message, dict):
        raise InvalidRequestError("A WebSocket message must be a JSON object.", code="invalid_json")
    kind = message.pop("type", None)
    if kind != CREATE:
        shown = "no type" if kind is None else f"type {kind!r}"
        raise InvalidRequestError(
            f"Unsupported client event ({shown}): this socket accepts '{CREATE}' messages.",
            param="type",
            code="unknown_event_type",
        )
    message.pop("stream", None)  # implied: every response on a socket streams
    if message.get("background"):
        raise InvalidRequestError(
            "background is not supported in WebSocket mode; use POST /v1/responses for "
            "background responses.",
            param="background",
            code="unsupported_parameter",
        )
    message.pop("background", None)
    if message.pop("generate", True) is False:
        raise InvalidRequestError(
            "generate: false (a warm-up that runs no model) is not supported by toolwire; "
            "send the request when it should run.",
            param="generate",
            code="unsupported_parameter",
        )
    return message


def _error_event(exc: ToolwireError, *, status: int | None = None) -> SocketError:
    """The WebSocket error envelope; its `code` is always a string. An unknown
    `previous_response_id` is status 400 here, as OpenAI documents it (the HTTP door answers
    the same)."""
    body = exc.to_body()["error"]
    assert isinstance(body, dict)
    code = exc.code or exc.error_type
    if status is None:
        status = 400 if code == "previous_response_not_found" else exc.status
    return {"type": "error", "status": status, "error": {**body, "code": code}}


_LIMIT_REACHED = InvalidRequestError(
    "Responses websocket connection limit reached; open a new WebSocket connection to "
    "continue (a store: false response cannot be continued on it: start a new chain).",
    code="websocket_connection_limit_reached",
)
_KEY_REVOKED = ToolwireError(
    "The API key this WebSocket was opened with is no longer valid (revoked); the socket "
    "closes. Open a new one with a valid key.",
    code="invalid_api_key",
    error_type="invalid_request_error",
)
