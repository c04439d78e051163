"""An event stream answered from the request's own task, watching for the client's disconnect.

Starlette's `StreamingResponse` under an ASGI server of spec 2.3 (uvicorn's) opens an anyio task
group per response: one task streams, the request's task listens for the disconnect, and the
first to finish cancels the other through the group's cancel scope. That machinery was ~5% of a
short `/v1/responses` stream. Here the request's task streams and one plain watcher task waits
for `http.disconnect` and cancels it (as `until_disconnected` does for a JSON answer), started
only once the stream has run `WATCH_AFTER` seconds (most streams end sooner; a client that
leaves earlier is noticed then): the same outcome, a client gone mid-stream stops the body
iterator (its `finally` blocks run, the run is cancelled), and the response ends without an
error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolwire.server.http.helpers import DisconnectWatch


class EventStreamResponse(Response):
    """`text/event-stream` from `content`, one ASGI body message per chunk it yields; the
    headers are `StreamingResponse`'s for the same arguments (no content length)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterable[bytes],
        headers: Mapping[str, str] | None = None,
        media_type: str = "text/event-stream",
    ) -> None:
        """`media_type`: another one for a stream that is not SSE (the Gemini door's JSON
        array without `alt=sse`)."""
        self.media_type = media_type
        self.body_iterator = content
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = DisconnectWatch(receive)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watch.ours():  # the client left: the response ends, not the server
                raise
        finally:
            watch.stop()
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:  # its `finally` now, not when it is collected
                await close()
