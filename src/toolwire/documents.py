"""PDF documents as the text a chat-completions model can read.

Claude Code's Read sends a `.pdf` as a `document` block; the OpenAI doors carry files as
`input_file` / `file` parts. Chat-completions servers take neither, so each door turns a PDF
into its text here (pypdf, pure Python): a header naming the document and its pages, each page
after a `--- page N ---` marker, a note where a page has no text layer (a scan), and a cap on
the text a request may carry (`MAX_TEXT_CHARS`) and on the pages read (`MAX_PAGES`), with a
note saying what was left out. What a caller sends is hostile: a file that is not a readable
PDF raises `DocumentError` with the reason, never a traceback.

Reading a PDF is seconds of pure-Python work (500 short pages: ~1.2 s), and the doors translate
synchronously on the event loop. So each door first awaits `pdf_readers.read_ahead` on the
request's parts, which reads every PDF they carry off the loop (`read_pdf`) and remembers the
result here (a small LRU keyed by the file's digest); the translator's `pdf_text` then finds it
read. The memory also spares an agent's next turns, which send the same document again with the
whole history. A PDF that was not read ahead (a door that does not ask for it) is read where
`pdf_text` is called, as before.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
from collections import OrderedDict
from dataclasses import dataclass

from toolwire.store.owner import current_owner, owner_key

MAX_TEXT_CHARS = 200_000
"""Text kept from one document (about 50,000 tokens): the rest is named, not sent."""
MAX_PAGES = 500
"""Pages read from one document."""

PDF_MEDIA_TYPE = "application/pdf"
REMEMBERED = 64
"""PDFs whose text is remembered (each at most `MAX_TEXT_CHARS`: ~13 MB in all)."""


class DocumentError(ValueError):
    """The document cannot be read as a PDF (the message says why)."""


def is_pdf(data: bytes) -> bool:
    return data.lstrip()[:5] == b"%PDF-"


def decode_base64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raise DocumentError("its data is not valid base64") from None


def pdf_data_url(url: str) -> bytes | None:
    """The bytes of a `data:application/pdf;base64,...` URL, else None."""
    head, _, data = url.partition(",")
    if not head.startswith("data:") or ";base64" not in head:
        return None
    if head[5:].split(";")[0].lower() != PDF_MEDIA_TYPE:
        return None
    return decode_base64(data)


def pdf_text(data: bytes, title: str | None = None, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The PDF's text, page by page (module docstring): as it was read ahead, else read now.
    Raises `DocumentError`."""
    if not is_pdf(data):
        raise DocumentError("it is not a PDF (no %PDF- header)")
    key = memory_key(data, max_chars)
    read = recall(key)
    if read is None:
        read = read_pdf(data, max_chars)
        remember(key, read)
    if isinstance(read, str):
        raise DocumentError(read)
    name = f"{title}, " if title else ""
    header = f"[document: {name}PDF, {read.pages} page{'s' if read.pages != 1 else ''}]"
    return "\n".join((header, *read.lines))


@dataclass(frozen=True, slots=True)
class PdfText:
    pages: int
    lines: tuple[str, ...]
    """What follows the header: page markers, pages, notes."""


MemoryKey = tuple[bytes, int, str]
#: the file's digest, the cap and the API key that sent it -> its text, or why it cannot be
#: read. Per key: another key's request must not learn, by how fast it is answered, that the
#: same PDF was sent recently. Touched on the event loop only (the readers return what they
#: read; the loop remembers it).
_memory: OrderedDict[MemoryKey, PdfText | str] = OrderedDict()


def memory_key(data: bytes, max_chars: int = MAX_TEXT_CHARS) -> MemoryKey:
    """The file, the cap, and the current request's owner (`store/owner.py`)."""
    return hashlib.blake2b(data, digest_size=16).digest(), max_chars, owner_key(current_owner.get())


def recall(key: MemoryKey) -> PdfText | str | None:
    read = _memory.get(key)
    if read is not None:
        _memory.move_to_end(key)
    return read


def remember(key: MemoryKey, read: PdfText | str) -> None:
    _memory[key] = read
    _memory.move_to_end(key)
    while len(_memory) > REMEMBERED:
        _memory.popitem(last=False)


def read_pdf(data: bytes, max_chars: int = MAX_TEXT_CHARS) -> PdfText | str:
    """The PDF's page-by-page text, or why it cannot be read. Pure: it runs in reader threads
    and processes as well as on the loop. Any failure of the reader on this input means the
    input is not a readable PDF (pypdf raises many kinds on malformed files)."""
    from pypdf import PdfReader  # imported on first use: most requests carry no PDF

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged file is reported below
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "it is encrypted with a password"
        pages = reader.pages
        count = len(pages)
        lines: list[str] = []
        used = 0
        for number in range(1, min(count, MAX_PAGES) + 1):
            text = (pages[number - 1].extract_text() or "").strip()
            if not text:
                text = (
                    f"[page {number} has no text layer (a scanned image or a drawing): "
                    "its content cannot be read as text]"
                )
            if used + len(text) > max_chars:
                lines.append(f"--- page {number} ---")
                lines.append(text[: max(0, max_chars - used)])
                lines.append(
                    f"[document truncated: its text goes on past {max_chars:,} characters; "
                    f"pages {number}-{count} are cut or left out]"
                )
                return PdfText(count, tuple(lines))
            used += len(text)
            lines += [f"--- page {number} ---", text]
        if count > MAX_PAGES:
            lines.append(f"[document truncated: pages {MAX_PAGES + 1}-{count} are left out]")
        return PdfText(count, tuple(lines))
    except Exception as exc:  # hostile input: any failure of the reader is the answer
        return f"it is not a readable PDF ({type(exc).__name__}: {exc})"
