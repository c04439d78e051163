"""HTTP plumbing every route shares: reading a JSON body, answering JSON, OpenAI list pages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import orjson
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from toolwire.errors import InvalidRequestError, ToolwireError
from toolwire.wire.items import Item, ItemList

T = TypeVar("T")


class ClientDisconnected(ToolwireError):
    """The client hung up before its answer was ready (nginx's 499; nobody reads it)."""

    status = 499


#: How long a non-streaming request runs before a task watches for its client leaving.
WATCH_AFTER = 0.25


class DisconnectWatch:
    """Cancels the request's task when its client leaves (`http.disconnect`), watching only
    once the request has run `WATCH_AFTER` seconds: most requests end sooner, and a task made
    and cancelled per request was ~2% of a proxied chat request. A client that leaves earlier
    is noticed then (its disconnect waits to be received). Shared by `until_disconnected` and
    `EventStreamResponse` (server/http/streaming.py); `stop` it when the request ends."""

    __slots__ = ("_loop", "_receive", "_task", "_timer", "_watcher", "gone")

    def __init__(self, receive: Callable[[], Awaitable[Any]]) -> None:
        self._loop = loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None
        self._task = task
        self._receive = receive
        self._watcher: asyncio.Task[None] | None = None
        self._timer = self._loop.call_later(WATCH_AFTER, self._start)
        self.gone = False

    def _start(self) -> None:
        self._watcher = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        try:
            while (await self._receive())["type"] != "http.disconnect":
                pass
        except Exception:  # a receive that cannot tell: never cancel on a guess
            return
        self.gone = True
        self._task.cancel()

    def ours(self) -> bool:
        """Called on a `CancelledError`: whether it was only the client leaving (then it is
        taken back); False when another cancellation (a shutdown, an outer timeout) came too:
        that one goes on."""
        return self.gone and self._task.uncancel() == 0

    def stop(self) -> None:
        self._timer.cancel()
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()


async def until_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """Await `work` (a non-streaming run) unless the client disconnects first: then the work
    is cancelled, as a streaming run is when its client leaves, so the driver records the
    run as cancelled and stops calling the upstream and tools. Call after the body is read:
    the next ASGI message can then only be `http.disconnect`.

    The work runs in the request's own task, and one watcher (`DisconnectWatch`) cancels it
    (it was one task for the work and one for the watcher, both raced by `asyncio.wait`: ~5%
    of a proxied request in the profile)."""
    watch = DisconnectWatch(request.receive)
    try:
        return await work
    except asyncio.CancelledError:
        if not watch.ours():
            raise
        raise ClientDisconnected("the client disconnected; the response was cancelled") from None
    finally:
        watch.stop()


class ORJSONResponse(JSONResponse):
    def __init__(
        self,
        content: Any,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        background: BackgroundTask | None = None,
    ) -> None:
        if (
            status_code != 200
            or headers is not None
            or media_type is not None
            or background is not None
        ):
            super().__init__(content, status_code, headers, media_type, background)
            return
        # An answer with nothing but its body: the headers `init_headers` would give, in its
        # order, without its checks (~1% of a proxied chat request).
        self.status_code = 200
        self.background = None
        self.body = body = self.render(content)
        self.raw_headers = [(b"content-length", b"%d" % len(body)), _JSON_TYPE]

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


_JSON_TYPE = (b"content-type", b"application/json")


async def read_body(request: Request) -> bytes:
    """`await request.body()` without Starlette's async generator (its creation, `aclosing`
    and the event loop's bookkeeping of every async generator were ~2% of a proxied chat
    request, for a body that comes in one message). The request is left as `body()` leaves
    it: a later `body()` or `read_body` answers the same bytes, a disconnect raises
    `ClientDisconnect`, a stream already consumed is Starlette's to refuse."""
    kept: bytes | None = request.__dict__.get("_body")
    if kept is not None:
        return kept
    if request._stream_consumed:
        return await request.body()
    chunks: list[bytes] = []
    receive = request.receive
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        elif kind == "http.disconnect":
            request._is_disconnected = True
            raise ClientDisconnect()
    request._stream_consumed = True
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    request._body = body
    return body


async def read_json(request: Request) -> Any:
    raw = await read_body(request)
    if not raw:
        raise InvalidRequestError("the request body is empty; expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from None


#: OpenAI's `IncludeEnum`: what a list of items may be asked to include. toolwire returns
#: items whole, so a valid value changes nothing; an unknown one is refused as OpenAI does.
INCLUDABLE = frozenset(
    {
        "file_search_call.results",
        "web_search_call.results",
        "web_search_call.action.sources",
        "message.input_image.image_url",
        "computer_call_output.output.image_url",
        "code_interpreter_call.outputs",
        "reasoning.encrypted_content",
        "message.output_text.logprobs",
    }
)


def paginate(items: list[Item], request: Request) -> ItemList:
    """OpenAI list pagination: `order` (asc|desc), `after`, `limit` (1-100, default 20), and
    `include` (checked against OpenAI's values; items are returned whole either way)."""
    for name in ("include", "include[]"):
        for value in request.query_params.getlist(name):
            if value not in INCLUDABLE:
                raise InvalidRequestError(
                    f"Invalid value: {value[:100]!r}. include must be one of: "
                    f"{', '.join(sorted(INCLUDABLE))}.",
                    param="include",
                    code="invalid_value",
                )
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order must be asc or desc", param="order")
    try:
        limit = int(request.query_params.get("limit", "20"))
    except ValueError:
        raise InvalidRequestError("limit must be an integer", param="limit") from None
    if not 1 <= limit <= 100:
        raise InvalidRequestError("limit must be between 1 and 100", param="limit")
    ordered = items if order == "asc" else list(reversed(items))
    after = request.query_params.get("after")
    if after:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise InvalidRequestError(f"after: no item with id '{after}'", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > limit,
    }


async def started(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`frames` with its first frame already awaited, so that what fails before it raises here,
    before any status line is sent."""
    try:
        first = await anext(frames)
    except StopAsyncIteration:
        first = b""
    except BaseException:
        await frames.aclose()  # type: ignore[attr-defined]
        raise

    async def rest() -> AsyncIterator[bytes]:
        try:
            if first:
                yield first
            async for frame in frames:
                yield frame
        finally:
            await frames.aclose()  # type: ignore[attr-defined]

    return rest()
