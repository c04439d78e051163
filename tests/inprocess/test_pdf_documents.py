"""PDFs on every door that takes documents: the upstream (a chat-completions server, which
reads no files) receives the PDF's text with page markers, instead of the request failing.
Anthropic `document` blocks (what Claude Code's Read sends for a `.pdf`), Responses
`input_file` parts, chat `file` parts."""

from __future__ import annotations

import base64
from typing import Any

from tests.inprocess_gateway import AppGateway
from tests.pdfs import make_pdf
from toolwire.testing import Reply

PDF = make_pdf(["Invoice 1042\nTotal due: 310 EUR", None])
B64 = base64.b64encode(PDF).decode()


def user_text(gw: AppGateway) -> str:
    """Every text the upstream's last request carried in user messages."""
    texts = []
    for message in gw.upstream.chat_requests[-1].body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [p["text"] for p in content if p.get("type") == "text"]
    return "\n".join(texts)


def assert_pdf_read(text: str) -> None:
    assert "--- page 1 ---\nInvoice 1042\nTotal due: 310 EUR" in text
    assert "[page 2 has no text layer" in text
    assert B64[:40] not in text  # the bytes themselves never reach the model


async def test_a_claude_code_pdf_document_becomes_its_text(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="310 EUR"))
    document: dict[str, Any] = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": B64},
        "title": "invoice.pdf",
    }
    response = await gw.http.post(
        "/v1/messages",
        json={
            "model": "m",
            "max_tokens": 100,
            "messages": [
                {"role": "user", "content": [document, {"type": "text", "text": "How much?"}]}
            ],
        },
    )
    assert response.status_code == 200, response.text
    text = user_text(gw)
    assert text.startswith("[document: invoice.pdf, PDF, 2 pages]")
    assert_pdf_read(text)


async def test_a_document_that_is_not_a_pdf_is_a_400_naming_it(gw: AppGateway) -> None:
    broken = {"type": "base64", "media_type": "application/pdf", "data": "bm90IGEgcGRm"}
    response = await gw.http.post(
        "/v1/messages",
        json={
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": [{"type": "document", "source": broken}]}],
        },
    )
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "messages[0].content[0]" in message and "not a PDF" in message
    assert not gw.upstream.requests


async def test_a_responses_input_file_pdf_becomes_its_text(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="310 EUR"))
    await gw.client.responses.create(
        model="m",
        input=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_file",
                        "filename": "invoice.pdf",
                        "file_data": f"data:application/pdf;base64,{B64}",
                    },
                    {"type": "input_text", "text": "How much?"},
                ],
            }
        ],
    )
    assert_pdf_read(user_text(gw))


async def test_a_chat_file_part_pdf_becomes_its_text(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="310 EUR"))
    await gw.client.chat.completions.create(
        model="m",
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {
                            "filename": "invoice.pdf",
                            "file_data": f"data:application/pdf;base64,{B64}",
                        },
                    },
                    {"type": "text", "text": "How much?"},
                ],
            }
        ],
    )
    text = user_text(gw)
    assert "[document: invoice.pdf, PDF, 2 pages]" in text
    assert_pdf_read(text)
