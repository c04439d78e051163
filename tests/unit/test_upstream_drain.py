"""`drain_buffered` against aiohttp's own `readany`: the same bytes, and the reader left in the
same state (its counters, its HTTP chunk ends, its flow control), on aiohttp's private layout
that it reads (`upstream/transport.py`). Fails first if an aiohttp upgrade moves that layout."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from toolwire.upstream.aiohttp_sender import _CAN_DRAIN, drain_buffered

pytestmark = pytest.mark.skipif(not _CAN_DRAIN, reason="aiohttp's layout is not the one known")


class _Protocol:
    """What a StreamReader asks of its connection: pausing and resuming reads, counted."""

    connected = True

    def __init__(self) -> None:
        self.paused = False
        self.resumed = 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False
        self.resumed += 1


def _reader(pieces: list[bytes], limit: int) -> tuple[aiohttp.StreamReader, _Protocol]:
    """A chunked body's reader holding `pieces`, one HTTP chunk each, as aiohttp's parser
    feeds them."""
    protocol = _Protocol()
    reader = aiohttp.StreamReader(protocol, limit, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    reader.begin_http_chunk_receiving()
    for piece in pieces:
        reader.feed_data(piece)
        reader.end_http_chunk_receiving()
    return reader, protocol


def _state(reader: aiohttp.StreamReader) -> tuple[object, ...]:
    splits = reader._http_chunk_splits
    return (reader._size, reader._cursor, len(reader._buffer), list(splits or ()))


@pytest.mark.parametrize("limit", [16, 1 << 16])
async def test_drain_reads_what_readany_reads_and_leaves_the_same_state(limit: int) -> None:
    pieces = [b'data: {"n": %d}\n\n' % n for n in range(300)]
    reference, seen = _reader(pieces, limit)
    drained, ours = _reader(pieces, limit)
    # the small limit: past its high-water mark, the connection paused
    assert seen.paused == ours.paused == (limit == 16)

    expected = await reference.readany()
    got = drain_buffered(drained, await drained.read(1))

    assert got == expected == b"".join(pieces)
    assert _state(drained) == _state(reference)
    # reading resumes when the buffer empties, whether once or once a piece
    assert not ours.paused and ours.resumed >= 1
    assert not seen.paused and seen.resumed >= 1


async def test_drain_after_a_partial_read_keeps_the_offset_right() -> None:
    pieces = [b"abcdef", b"ghi", b"jklmnop"]
    reference, _ = _reader(pieces, 1 << 16)
    drained, _ = _reader(pieces, 1 << 16)
    assert await reference.read(2) == await drained.read(2) == b"ab"

    expected = await reference.readany()
    got = drain_buffered(drained, await drained.read(1))

    assert got == expected == b"cdefghijklmnop"
    assert _state(drained) == _state(reference)
    # more after the drain reads on from where it left
    for reader in (reference, drained):
        reader.feed_data(b"qr")
        reader.end_http_chunk_receiving()
    assert await reference.readany() == await drained.readany() == b"qr"
    assert _state(drained) == _state(reference)
