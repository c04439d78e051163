"""A PDF's text as the model reads it (`toolwire/documents.py`): page markers, a note for a
page without a text layer, the size cap, and a clear error for what is not a readable PDF."""

from __future__ import annotations

import pytest

from tests.pdfs import make_pdf
from toolwire.documents import DocumentError, memory_key, pdf_text, recall
from toolwire.store.owner import current_owner


def test_pages_are_marked_and_a_page_without_text_says_so() -> None:
    text = pdf_text(make_pdf(["Revenue grew 12%", None, "Signed: the board"]), "q3.pdf")
    assert text.splitlines() == [
        "[document: q3.pdf, PDF, 3 pages]",
        "--- page 1 ---",
        "Revenue grew 12%",
        "--- page 2 ---",
        "[page 2 has no text layer (a scanned image or a drawing): its content cannot be read "
        "as text]",
        "--- page 3 ---",
        "Signed: the board",
    ]


def test_text_past_the_cap_is_cut_and_the_cut_is_named() -> None:
    pages = [f"page {n} " + "word " * 40 for n in range(1, 6)]
    text = pdf_text(make_pdf(pages), max_chars=300)
    assert "--- page 2 ---" in text and "--- page 3 ---" not in text
    assert text.endswith(
        "[document truncated: its text goes on past 300 characters; pages 2-5 are cut or left out]"
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"hello, not a pdf", "not a PDF"),
        (b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage", "not a readable PDF"),
    ],
)
def test_what_is_not_a_readable_pdf_is_a_document_error(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentError, match=reason):
        pdf_text(data)


def test_a_pdf_read_for_one_key_is_not_remembered_for_another() -> None:
    """The remembered text is per API key: another key's request reads the PDF itself, so how
    fast it is answered says nothing of what other keys sent."""
    data = make_pdf(["only for key a"])
    token = current_owner.set("key_a")
    try:
        pdf_text(data)
        assert recall(memory_key(data)) is not None
        current_owner.set("key_b")
        assert recall(memory_key(data)) is None
    finally:
        current_owner.reset(token)
