"""PDF documents as the text a chat-completions model can read.

Claude Code's Read sends a `.pdf` as a `document` block; the OpenAI doors carry files as
`input_file` / `file` parts. Chat-completions servers take neither, so each door turns a PDF
into its text here (pypdf, pure Python): a header naming the document and its pages, each page
after a `--- page N ---` marker, a note where a page has no text layer (a scan), and a cap on
the text a request may carry (`MAX_TEXT_CHARS`) and on the pages read (`MAX_PAGES`), with a
note saying what was left out. What a caller sends is hostile: a file that is not a readable
PDF raises `DocumentError` with the reason, never a traceback.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging

MAX_TEXT_CHARS = 200_000
"""Text kept from one document (about 50,000 tokens): the rest is named, not sent."""
MAX_PAGES = 500
"""Pages read from one document."""

PDF_MEDIA_TYPE = "application/pdf"


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
    """The PDF's text, page by page (module docstring). Raises `DocumentError`."""
    from pypdf import PdfReader  # imported on first use: most requests carry no PDF
    from pypdf.errors import PyPdfError

    if not is_pdf(data):
        raise DocumentError("it is not a PDF (no %PDF- header)")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged file is reported below
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("it is encrypted with a password")
        pages = reader.pages
        count = len(pages)
        name = f"{title}, " if title else ""
        lines = [f"[document: {name}PDF, {count} page{'s' if count != 1 else ''}]"]
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
                return "\n".join(lines)
            used += len(text)
            lines += [f"--- page {number} ---", text]
        if count > MAX_PAGES:
            lines.append(f"[document truncated: pages {MAX_PAGES + 1}-{count} are left out]")
        return "\n".join(lines)
    except DocumentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise DocumentError(f"it is not a readable PDF ({type(exc).__name__}: {exc})") from None
