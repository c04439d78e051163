"""PDFs read off the event loop, before a door translates the request that carries them.

The doors translate synchronously on the event loop, and reading a PDF is pure-Python work that
takes seconds for a long one (`documents.read_pdf`). So each door first awaits `read_ahead` on
the request's parts: every PDF they carry is read here, off the loop, and remembered
(`documents.remember`); the translator's `pdf_text` then finds it read.

Where it is read depends on its size. A small PDF is read in a thread: little work, few objects.
A large one (over `THREAD_BYTES`) is read in a worker process: in a thread, a long parse still
holds the interpreter lock between switches, and the objects it makes trigger full garbage
collections of the whole server's heap, which stop the loop as well (measured: a 500-page,
235 KiB PDF read in a thread of the test process held `/health` for 0.4-1.3 s in one gen-2
collection; read in a process, 0.04-0.1 s). A worker process that dies (a file built to
exhaust memory) takes nothing else down: its PDF is reported as unreadable, the others it was
given are read again in a fresh worker.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from toolwire.documents import (
    MAX_TEXT_CHARS,
    DocumentError,
    PdfText,
    decode_base64,
    is_pdf,
    memory_key,
    pdf_data_url,
    read_pdf,
    recall,
    remember,
)

THREAD_BYTES = 64 * 1024
"""PDFs up to this size are read in a thread; larger ones in a worker process."""
READERS = 2
"""Threads, and processes, reading PDFs: more PDFs wait their turn; the loop never does."""
STOPPED_THE_READER = (
    "reading it stopped toolwire's PDF reader process (a file built to exhaust memory?)"
)
#: Where the doors carry a file's data: Messages `source.data`, Responses `input_file`
#: `file_data` / `file_url`, chat `file.file_data`.
_DATA_KEYS = frozenset({"data", "file_data", "file_url"})
_PDF_BASE64 = "JVBERi0"  # "%PDF-", base64-encoded
_PDF_BASE64_BYTES = _PDF_BASE64.encode()

_threads: ThreadPoolExecutor | None = None
_processes: ProcessPoolExecutor | None = None


def may_hold_pdf(raw: bytes) -> bool:
    """Whether a request body could carry a PDF (`read_ahead`'s own test on `raw`): a door
    asks first, so a body without one costs no coroutine."""
    return _PDF_BASE64_BYTES in raw


async def read_ahead(*parts: object, raw: bytes | None = None) -> None:
    """Read, off the loop, every PDF these request parts carry (any JSON shape: a door's body,
    items, messages) and not yet remembered. What cannot be decoded is left for the
    translator to report in the door's words. `raw`: the request body the parts were parsed
    from, when the parts are all it holds: without a PDF's base64 opening in it (every PDF
    the doors read starts so, data URLs included) nothing is walked."""
    if raw is not None and _PDF_BASE64_BYTES not in raw:
        return
    found = {memory_key(data): data for data in _pdfs_in(parts)}
    unread = [(key, data) for key, data in found.items() if recall(key) is None]
    if unread:
        results = await asyncio.gather(*(_read_off_loop(data) for _, data in unread))
        for (key, _), read in zip(unread, results, strict=True):
            remember(key, read)


async def _read_off_loop(data: bytes) -> PdfText | str:
    loop = asyncio.get_running_loop()
    if len(data) <= THREAD_BYTES:
        return await loop.run_in_executor(_thread_pool(), read_pdf, data, MAX_TEXT_CHARS)
    for _ in range(2):  # a worker that died may have been reading another request's PDF
        pool = _process_pool()
        try:
            return await loop.run_in_executor(pool, read_pdf, data, MAX_TEXT_CHARS)
        except BrokenProcessPool:
            _discard(pool)
    return STOPPED_THE_READER


def _thread_pool() -> Executor:
    global _threads
    if _threads is None:
        _threads = ThreadPoolExecutor(READERS, thread_name_prefix="pdf-reader")
    return _threads


def _process_pool() -> ProcessPoolExecutor:
    """Started on the first large PDF; `spawn`, since the server runs threads (a fork could
    copy a lock another thread holds)."""
    global _processes
    if _processes is None:
        _processes = ProcessPoolExecutor(
            READERS, mp_context=multiprocessing.get_context("spawn"), initializer=_watch_parent
        )
    return _processes


def _watch_parent() -> None:
    """In a worker process: exit once the server that started it is gone. A worker holds both
    ends of its task queue, so a server killed (or gone without shutting its pool down) would
    otherwise leave it waiting forever."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _discard(pool: ProcessPoolExecutor) -> None:
    global _processes
    if _processes is pool:
        _processes = None
    pool.shutdown(wait=False, cancel_futures=True)


def _pdfs_in(parts: object) -> Iterator[bytes]:
    """The PDFs under the keys where the doors carry a file's data (base64 or a data URL).
    Iterative: a deeply nested body is walked, not a recursion limit hit."""
    stack = [parts]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _DATA_KEYS and isinstance(item, str):
                    data = _pdf_of(item)
                    if data is not None:
                        yield data
                elif isinstance(item, dict | list | tuple):
                    stack.append(item)
        elif isinstance(value, list | tuple):
            stack.extend(item for item in value if isinstance(item, dict | list | tuple))


def _pdf_of(text: str) -> bytes | None:
    try:
        if text.startswith("data:"):
            return pdf_data_url(text)
        if text.startswith(_PDF_BASE64):
            data = decode_base64(text)
            return data if is_pdf(data) else None
    except DocumentError:
        pass  # the translator reports it
    return None
