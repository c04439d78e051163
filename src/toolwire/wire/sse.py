"""Server-sent events framing, both ways.

Hand-written rather than httpx-sse / sse-starlette: the decoder must be incremental over raw byte
chunks split anywhere (the hot path of every streamed turn, benchmarked in
`benchmarks/assembler.py`), and the encoder is two lines; neither library exposes a pure codec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str | None = None
    id: str | None = None


class SSEEventTooLarge(ValueError):
    """An event (or a line still without its end) grew past the decoder's `max_event_bytes`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a stream event is larger than {limit} bytes")
        self.limit = limit


class SSEDecoder:
    """Turns byte chunks, split at arbitrary boundaries, into complete SSE events.

    With `max_event_bytes`, an unfinished line or an event's data past that size raises
    `SSEEventTooLarge`, so a peer that never ends a line costs at most that much memory.
    """

    __slots__ = ("_buffer", "_data", "_event", "_id", "_limit", "_size")

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._limit = max_event_bytes
        self._size = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by `chunk`. Whole events of one `data:` line (what every
        model server sends) are cut out of the read with `bytes.find` and decoded once; the
        rest (several lines, `event:` / `id:` fields, comments, CR line ends, an event
        split in the middle of its lines) goes line by line."""
        if self._data or self._event is not None or self._id is not None or b"\r" in chunk:
            return self._feed_lines(chunk)
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            return self._feed_lines(chunk)
        limit = self._limit
        cut = buffer.rfind(b"\n\n")
        if cut < 0:
            if limit is not None and len(buffer) > limit:
                self._buffer = b""  # an unfinished event this big: checked line by line
                return self._feed_lines(buffer)
            self._buffer = buffer
            return []
        rest = buffer[cut + 2 :]
        events: list[SSEEvent] = []
        lines = False
        # One decode for all the read's whole events: a line end never falls inside a
        # UTF-8 sequence, so this is what decoding line by line gives.
        for block in buffer[:cut].decode("utf-8", errors="replace").split("\n\n"):
            if not lines and block.startswith("data: ") and "\n" not in block:
                if limit is not None and len(block) - 6 > limit:
                    self._buffer = b""
                    raise SSEEventTooLarge(limit)
                events.append(SSEEvent(block[6:]))
            else:
                events += self._lines((block + "\n\n").encode())
                lines = self._id is not None  # the last event id applies to what follows
        if limit is not None and len(rest) > limit:
            self._buffer = b""
            return events + self._feed_lines(rest)
        self._buffer = rest
        return events

    def feed_data(self, chunk: bytes) -> list[str]:
        """The `data` of each event completed by `chunk`, for a reader of nothing else (a model
        server's stream). A read of only whole one-line `data:` events, the rest buffered,
        is checked for that in bulk and cut with one `split`, no event objects made: ~0.2 µs
        less an event than `feed`, which every other read goes through."""
        if self._data or self._event is not None or self._id is not None:
            return [event.data for event in self.feed(chunk)]
        buffer = self._buffer + chunk if self._buffer else chunk
        cut = buffer.rfind(b"\n\n")
        limit = self._limit
        if (
            cut < 0
            or not buffer.startswith(b"data: ")
            or b"\r" in buffer
            or (limit is not None and (cut > limit or len(buffer) - cut - 2 > limit))
        ):
            return [event.data for event in self.feed(chunk)]
        text = buffer[6:cut].decode("utf-8", errors="replace")
        datas = text.split("\n\ndata: ")
        # every event one `data: ` line: no line end but those between the events
        if text.count("\n") != 2 * len(datas) - 2:
            return [event.data for event in self.feed(chunk)]
        self._buffer = buffer[cut + 2 :]
        return datas

    def _feed_lines(self, chunk: bytes) -> list[SSEEvent]:
        if self._limit is not None and len(self._buffer) + len(chunk) > self._limit:
            self._check(chunk)
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            # Normalise CRLF and lone CR; a CR at the very end may be half of a CRLF.
            if buffer.endswith(b"\r"):
                self._buffer = b"\r"
                buffer = buffer[:-1]
            else:
                self._buffer = b""
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if self._buffer:
                end = buffer.rfind(b"\n")
                self._buffer = buffer[end + 1 :] + self._buffer
                buffer = buffer[: end + 1]
                return self._lines(buffer)
        end = buffer.rfind(b"\n")
        if end < 0:
            self._buffer = buffer
            return []
        self._buffer = buffer[end + 1 :]
        return self._lines(buffer[: end + 1])

    def _check(self, chunk: bytes) -> None:
        """Raise if the unfinished line would pass the limit (only called when it might)."""
        assert self._limit is not None
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end >= 0:
            pending = len(chunk) - end - 1
        else:  # the line began in the buffer, after its last line end (`feed` keeps those)
            start = max(self._buffer.rfind(b"\n"), self._buffer.rfind(b"\r"))
            pending = len(self._buffer) - start - 1 + len(chunk)
        if pending > self._limit:
            self._buffer = b""
            raise SSEEventTooLarge(self._limit)

    def _lines(self, block: bytes) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for raw in block.split(b"\n")[:-1]:
            if not raw:
                if self._data:
                    events.append(SSEEvent("\n".join(self._data), self._event, self._id))
                self._data = []
                self._event = None
                self._size = 0
                continue
            line = raw.decode("utf-8", errors="replace")
            if line[0] == ":":
                continue
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
                if self._limit is not None:
                    self._size += len(value)
                    if self._size > self._limit:
                        self._data = []
                        raise SSEEventTooLarge(self._limit)
            elif name == "event":
                self._event = value
            elif name == "id":
                self._id = value
        return events

    def close(self) -> list[SSEEvent]:
        """Flush what a stream that ended without a final blank line still held."""
        events = self.feed(b"\n\n") if (self._buffer or self._data) else []
        self._buffer = b""
        return events


def encode_event(data: bytes, event: str | None = None) -> bytes:
    """One SSE frame; `data` must already be a single line (JSON is)."""
    if event is None:
        return b"data: " + data + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


DONE_FRAME = b"data: [DONE]\n\n"


class FramedEvent(dict[str, Any]):
    """A stream event that carries its own SSE frame, made from a pre-encoded template as the
    event was (the per-chunk deltas: `server/responses/stream.py`). The SSE door sends `frame`
    as it is, byte for byte what `encode_event(orjson.dumps(event), event["type"])` gives;
    every other reader sees the plain dict it also is."""

    __slots__ = ("frame",)

    frame: bytes


def delta_template(kind: str, fields: bytes, tail: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """The constant parts of a delta event's frame: (up to the sequence number, from it up to
    the delta's JSON string, after it). `fields`: the JSON of the fields between the
    sequence number and `delta`, each followed by a comma (`"item_id":"fc_1","output_index":0,`);
    `tail`: those after it, each after a comma."""
    head = (
        b"event: " + kind.encode() + b'\ndata: {"type":"' + kind.encode() + b'","sequence_number":'
    )
    return head, b"," + fields + b'"delta":', tail + b"}\n\n"
