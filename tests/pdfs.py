"""Real PDF files for tests, made with pypdf: pages with a text layer, and pages without one
(what a scan looks like to a text extractor)."""

from __future__ import annotations

import io

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def make_pdf(pages: list[str | None]) -> bytes:
    """One page per entry: its text in Helvetica (one line per line), or None for a page with
    no text at all."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        if text is None:
            continue
        lines = [
            line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            for line in text.split("\n")
        ]
        body = "BT /F1 11 Tf 72 720 Td 14 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
        stream = DecodedStreamObject()
        stream.set_data(body.encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
