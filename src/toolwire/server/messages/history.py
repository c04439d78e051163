"""A Messages request's `system` and `messages` -> the loop's transcript: text, images, PDF
documents, tool uses and their results, thinking blocks replayed from their sealed signatures."""

from __future__ import annotations

from typing import Any

import orjson

from toolwire.documents import DocumentError, decode_base64, pdf_text
from toolwire.sealed import ReasoningSeal
from toolwire.server.http.compat import unknown_value
from toolwire.server.messages.fields import expect_object, expect_string, invalid
from toolwire.server.messages.server_tools import server_tool_history
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.wire.chat import ChatPart

BILLING_PREFIX = "x-anthropic-billing-header"
"""Claude Code's attribution block, first in `system` and different per version and entry
point: moved after the stable system text so the prompt's cacheable prefix stays the same."""
USER_BLOCKS = ("text", "image", "document", "search_result", "tool_result")
ASSISTANT_BLOCKS = (
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
)


class ThinkingSeal(ReasoningSeal):
    """Signatures of `thinking` blocks (`sealed.py` `ReasoningSeal`): a block coming back in
    history is replayed to the upstream from its signature, so a forged or altered block (or
    one signed for another key, or by Anthropic) carries no reasoning: it is dropped, never
    replayed. With `display: "omitted"` the text is not shown, yet still goes back to the
    upstream."""

    def __init__(self, secret: bytes) -> None:
        super().__init__(secret, label=b"toolwire anthropic thinking v1")


def _text_blocks(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise invalid(f"{where}: expected a string or a list of text blocks", where)
    texts = []
    for n, block in enumerate(value):
        block = expect_object(block, f"{where}[{n}]")
        if block.get("type") != "text":
            raise invalid(f"{where}[{n}].type: only text blocks are allowed here", where)
        texts.append(expect_string(block.get("text"), f"{where}[{n}].text"))
    return texts


def system_transcript(value: Any) -> Transcript:
    if value is None:
        return []
    texts = _text_blocks(value, "system")
    billing = [t for t in texts if t.startswith(BILLING_PREFIX)]
    stable = [t for t in texts if not t.startswith(BILLING_PREFIX)]
    text = "\n\n".join([*stable, *billing])
    return [SystemMessage(text)] if text else []


def messages_transcript(
    value: Any, seal: ThinkingSeal, owner: str | None, served: list[str] | None = None
) -> Transcript:
    """`served`: gets the model servers named by the signed thinking blocks, in order (a
    fleet's routing hint: where the session's prefix is)."""
    if not isinstance(value, list) or not value:
        raise invalid("messages: must be a non-empty list", "messages")
    transcript: Transcript = []
    names: dict[str, str] = {}  # tool_use id -> tool name, for the results that answer them
    for index, raw in enumerate(value):
        where = f"messages[{index}]"
        message = expect_object(raw, where)
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise invalid(f"{where}.content: expected a string or a list of blocks", where)
        blocks = [expect_object(b, f"{where}.content[{n}]") for n, b in enumerate(content)]
        if role == "user":
            transcript.extend(_user(blocks, where, names))
        elif role == "assistant":
            transcript.append(_assistant(blocks, where, names, seal, owner, served))
        elif role == "system":
            # Claude Code sends these mid-conversation; many chat templates accept a system
            # message only first, so the text joins the user turn it sits beside.
            text = "\n\n".join(_text_blocks(content, f"{where}.content"))
            last = transcript[-1] if transcript else None
            if isinstance(last, UserMessage):
                parts = _parts(last.content)
                parts.append({"type": "text", "text": text})
                last.content = parts
            else:
                transcript.append(UserMessage([{"type": "text", "text": text}]))
        else:
            raise invalid(f"{where}.role: must be user, assistant or system", f"{where}.role")
    return transcript


def _parts(content: str | list[ChatPart]) -> list[ChatPart]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> Transcript:
    """Tool results first (each a tool message, as chat-completions servers expect right after
    the calls), then the rest of the turn as one user message."""
    results: Transcript = []
    parts: list[ChatPart] = []
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        kind = block.get("type")
        if kind == "tool_result":
            results.append(_tool_result(block, at, names))
        else:
            parts.extend(_user_part(block, at))
    if parts:
        results.append(UserMessage(parts))
    return results


def _user_part(block: dict[str, Any], at: str) -> list[ChatPart]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text", "text": expect_string(block.get("text"), f"{at}.text")}]
    if kind == "image":
        return [{"type": "image_url", "image_url": {"url": _image_url(block, at)}}]
    if kind == "document":
        return [{"type": "text", "text": _document_text(block, at)}]
    if kind == "search_result":  # a client-supplied search result: its text, with its source
        texts = _text_blocks(block.get("content"), f"{at}.content")
        title, source = block.get("title"), block.get("source")
        head = f"[search result: {title} <{source}>]\n" if title or source else ""
        return [{"type": "text", "text": head + "\n".join(texts)}]
    if kind in ASSISTANT_BLOCKS:
        raise invalid(f"{at}.type: {kind} blocks belong in assistant messages", f"{at}.type")
    raise unknown_value(f"{at}.type", kind, USER_BLOCKS)


def _image_url(block: dict[str, Any], at: str) -> str:
    source = expect_object(block.get("source"), f"{at}.source")
    kind = source.get("type")
    if kind == "base64":
        media = expect_string(source.get("media_type"), f"{at}.source.media_type")
        if media not in ("image/jpeg", "image/png", "image/gif", "image/webp"):
            raise invalid(
                f"{at}.source.media_type: must be image/jpeg, image/png, image/gif or image/webp",
                f"{at}.source.media_type",
            )
        return f"data:{media};base64,{expect_string(source.get('data'), f'{at}.source.data')}"
    if kind == "url":
        url = expect_string(source.get("url"), f"{at}.source.url")
        if not url.startswith(("https://", "http://")):
            raise invalid(f"{at}.source.url: must be an http(s) URL", f"{at}.source.url")
        return url
    raise invalid(
        f"{at}.source.type: {kind!r} is not served here (base64 or url; toolwire has no Files API)",
        f"{at}.source.type",
    )


def _document_text(block: dict[str, Any], at: str) -> str:
    """Plain-text documents reach any upstream as text; a base64 PDF (what Claude Code's Read
    sends for a `.pdf`) as its text, page by page (`toolwire/documents.py`). toolwire fetches
    no document for a caller (`url`) and has no Files API (`file`): a 400 that says so."""
    source = expect_object(block.get("source"), f"{at}.source")
    kind = source.get("type")
    title = block.get("title") if isinstance(block.get("title"), str) else None
    head = f"[document: {title}]\n" if title else ""
    if kind == "text":
        return head + expect_string(source.get("data"), f"{at}.source.data")
    if kind == "content":
        return head + "\n".join(_text_blocks(source.get("content"), f"{at}.source.content"))
    if kind == "base64":
        data = expect_string(source.get("data"), f"{at}.source.data")
        try:
            return pdf_text(decode_base64(data), title)
        except DocumentError as exc:
            raise invalid(f"{at}: the document cannot be read: {exc}", f"{at}.source") from None
    if kind == "url":
        raise invalid(
            f"{at}.source: toolwire does not fetch documents for a caller; send the PDF as "
            "base64 (source.type: base64)",
            f"{at}.source.type",
        )
    if kind == "file":
        raise invalid(f"{at}.source: toolwire has no Files API", f"{at}.source.type")
    raise unknown_value(f"{at}.source.type", kind, ("base64", "text", "content", "url", "file"))


def _tool_result(block: dict[str, Any], at: str, names: dict[str, str]) -> ToolMessage:
    call_id = expect_string(block.get("tool_use_id"), f"{at}.tool_use_id")
    content = block.get("content")
    texts: list[str] = []
    images: list[ChatPart] = []
    if content is None:
        pass
    elif isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for n, part in enumerate(content):
            part = expect_object(part, f"{at}.content[{n}]")
            if part.get("type") == "image":
                url = _image_url(part, f"{at}.content[{n}]")
                images.append({"type": "image_url", "image_url": {"url": url}})
            elif part.get("type") == "tool_reference":  # a tool search's answer (Claude Code)
                texts.append(f"[tool loaded: {part.get('tool_name')}]")
            else:
                texts.extend(p["text"] for p in _user_part(part, f"{at}.content[{n}]"))
    else:
        raise invalid(f"{at}.content: expected a string or a list of blocks", f"{at}.content")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise invalid(f"{at}.is_error: must be a boolean", f"{at}.is_error")
    text = "\n".join(texts)
    if is_error:
        text = "Error: " + text if text else "Error: the tool failed"
    return ToolMessage(call_id, names.get(call_id, ""), text, images)


def _assistant(
    blocks: list[dict[str, Any]],
    where: str,
    names: dict[str, str],
    seal: ThinkingSeal,
    owner: str | None,
    served: list[str] | None = None,
) -> AssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(blocks):
        at = f"{where}.content[{n}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(expect_string(block.get("text"), f"{at}.text"))
        elif kind == "tool_use":
            call_id = expect_string(block.get("id"), f"{at}.id")
            name = expect_string(block.get("name"), f"{at}.name")
            arguments = expect_object(block.get("input"), f"{at}.input")
            names[call_id] = name
            calls.append(
                ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode(), index=n)
            )
        elif kind == "thinking":
            expect_string(block.get("thinking"), f"{at}.thinking")
            opened = seal.open_signed(block.get("signature"), owner)
            if opened is not None and opened[0]:  # one toolwire did not sign is dropped
                reasoning.append(opened[0])
                if opened[1] and served is not None:
                    served.append(opened[1])
        elif kind == "redacted_thinking":
            expect_string(block.get("data"), f"{at}.data")  # never issued here: nothing to replay
        elif kind in ("server_tool_use", "web_search_tool_result", "web_fetch_tool_result"):
            texts.extend(server_tool_history(block))  # what toolwire's server tools answered
        else:
            raise unknown_value(f"{at}.type", kind, ASSISTANT_BLOCKS)
    return AssistantMessage("".join(texts), calls, "\n".join(reasoning))
