"""A Gemini request's `contents` and `systemInstruction` -> the loop's transcript: text, images,
function calls and responses (ids paired by position where the client sent none), thought
signatures replayed from their seal."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolwire.documents import PDF_MEDIA_TYPE, DocumentError, decode_base64, pdf_text
from toolwire.sealed import ReasoningSeal
from toolwire.server.gemini.fields import (
    expect_list,
    expect_object,
    expect_string,
    invalid,
    read_field,
)
from toolwire.server.http.compat import unknown_value
from toolwire.tools.readable import to_text
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Transcript,
    UserMessage,
)
from toolwire.wire.chat import ChatPart

ROLES = ("user", "model", "function")


IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/heic", "image/heif")


class ThoughtSeal(ReasoningSeal):
    """`thoughtSignature`s this door issues: the turn's reasoning, sealed for the key
    (`sealed.py`). One coming back on a part of a `model` turn replays the reasoning to the
    upstream with that turn; any other (Gemini's own, Gemini CLI's placeholder
    `skip_thought_signature_validator`, another key's, an altered one) replays nothing."""

    def __init__(self, secret: bytes) -> None:
        super().__init__(secret, label=b"toolwire gemini thought v1")


@dataclass(slots=True)
class CallIds:
    """The calls of the model turn before, by id, for the `functionResponse`s that answer
    them (Gemini's calls may come without ids: those get one here and are answered by name,
    in order)."""

    open: list[tuple[str, str]] = field(default_factory=list)

    def answer(self, call_id: str | None, name: str) -> str:
        for index, (open_id, open_name) in enumerate(self.open):
            if open_id == call_id or (call_id is None and open_name == name):
                del self.open[index]
                return open_id
        return call_id or f"call_{name}_{len(self.open)}"


def contents_transcript(
    value: Any, seal: ThoughtSeal, owner: str | None, served: list[str] | None = None
) -> Transcript:
    """`served`: gets the model servers named by the signatures toolwire issued, in order (a
    fleet's routing hint: where the session's prefix is)."""
    if not isinstance(value, list) or not value:
        raise invalid("must be a non-empty list", "contents")
    transcript: Transcript = []
    calls = CallIds()
    for index, raw in enumerate(value):
        where = f"contents[{index}]"
        content = expect_object(raw, where)
        role = content.get("role") or "user"
        parts = read_field(content, "parts")
        if not isinstance(parts, list) or not parts:
            raise invalid("must be a non-empty list of parts", f"{where}.parts")
        parts = [expect_object(p, f"{where}.parts[{n}]") for n, p in enumerate(parts)]
        if role in ("user", "function"):  # `function`: the API's older role for results
            transcript.extend(_user(parts, where, calls))
        elif role == "model":
            transcript.append(_model(parts, where, index, calls, seal, owner, served))
        else:
            raise unknown_value(f"{where}.role", role, ROLES)
    return transcript


def _user(parts: list[dict[str, Any]], where: str, calls: CallIds) -> Transcript:
    """Function responses first (each a tool message, as chat-completions servers expect
    right after the calls), then the rest of the turn as one user message."""
    results: Transcript = []
    content: list[ChatPart] = []
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        _signature(part, at)  # a user turn's replays nothing, but is still a string
        response = read_field(part, "functionResponse")
        if response is not None:
            results.append(
                _function_response(expect_object(response, f"{at}.functionResponse"), at, calls)
            )
        elif read_field(part, "functionCall") is not None:
            raise invalid("a functionCall belongs in a model turn", f"{at}.functionCall")
        else:
            content.extend(_user_part(part, at))
    if content:
        results.append(UserMessage(content))
    return results


def _user_part(part: dict[str, Any], at: str) -> list[ChatPart]:
    text = part.get("text")
    if text is not None:
        return [{"type": "text", "text": expect_string(text, f"{at}.text")}]
    inline = read_field(part, "inlineData")
    if inline is not None:
        return [_inline(expect_object(inline, f"{at}.inlineData"), f"{at}.inlineData")]
    data = read_field(part, "fileData")
    if data is not None:
        return [_file(expect_object(data, f"{at}.fileData"), f"{at}.fileData")]
    code = _code_text(part, at)
    return [{"type": "text", "text": code}] if code else []  # a part of no kind toolwire reads


def _inline(blob: dict[str, Any], at: str) -> ChatPart:
    mime = expect_string(read_field(blob, "mimeType"), f"{at}.mimeType").lower()
    data = expect_string(blob.get("data"), f"{at}.data")
    if mime in IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if mime.startswith("text/") or mime in ("application/json", "application/xml"):
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise invalid("is not base64 of UTF-8 text", f"{at}.data") from None
        return {"type": "text", "text": text}
    if mime == PDF_MEDIA_TYPE:  # what Gemini CLI's read tool sends for a .pdf
        try:
            return {"type": "text", "text": pdf_text(decode_base64(data))}
        except DocumentError as exc:
            raise invalid(f"the PDF cannot be read: {exc}", f"{at}.data") from None
    raise invalid(
        f"{mime} cannot be passed to this upstream (a chat-completions server reads text and "
        f"images: {', '.join(IMAGE_TYPES)}, text/*; PDFs become their text)",
        f"{at}.mimeType",
    )


def _file(data: dict[str, Any], at: str) -> ChatPart:
    uri = expect_string(read_field(data, "fileUri"), f"{at}.fileUri")
    mime = read_field(data, "mimeType")
    if uri.startswith(("https://", "http://")) and (mime is None or mime in IMAGE_TYPES):
        return {"type": "image_url", "image_url": {"url": uri}}
    raise invalid(
        "only http(s) image URLs are served (toolwire has no Files API); send the data "
        "inline (inlineData) instead",
        f"{at}.fileUri",
    )


def _code_text(part: dict[str, Any], at: str) -> str:
    """Gemini's own code execution, in a history that came from Gemini: kept as text."""
    code = read_field(part, "executableCode")
    if isinstance(code, dict):
        language = str(code.get("language") or "").lower().replace("language_unspecified", "")
        return f"```{language}\n{code.get('code') or ''}\n```"
    result = read_field(part, "codeExecutionResult")
    if isinstance(result, dict):
        return f"Code execution ({result.get('outcome')}):\n{result.get('output') or ''}"
    return ""


def _function_response(response: dict[str, Any], at: str, calls: CallIds) -> ToolMessage:
    name = expect_string(response.get("name"), f"{at}.functionResponse.name")
    call_id = response.get("id")
    if call_id is not None:
        call_id = expect_string(call_id, f"{at}.functionResponse.id")
    result = response.get("response")
    if result is not None:
        expect_object(result, f"{at}.functionResponse.response")
    images: list[ChatPart] = []
    for n, raw in enumerate(
        expect_list(response.get("parts") or [], f"{at}.functionResponse.parts")
    ):
        where = f"{at}.functionResponse.parts[{n}]"
        inline = read_field(expect_object(raw, where), "inlineData")
        if inline is not None:
            images.append(
                _inline(expect_object(inline, f"{where}.inlineData"), f"{where}.inlineData")
            )
    return ToolMessage(calls.answer(call_id, name), name, _result_text(result), images)


def _result_text(result: dict[str, Any] | None) -> str:
    """What the model reads of a function's `response`: Gemini's `output` / `error`
    convention (what Gemini CLI sends) as the bare text, anything else as readable lines."""
    if not result:
        return ""
    if set(result) == {"output"} and isinstance(result["output"], str):
        return str(result["output"])
    if set(result) == {"error"} and isinstance(result["error"], str):
        return "Error: " + str(result["error"])
    return to_text(result)


def _model(
    parts: list[dict[str, Any]],
    where: str,
    turn: int,
    calls: CallIds,
    seal: ThoughtSeal,
    owner: str | None,
    served: list[str] | None = None,
) -> AssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    made: list[ToolCall] = []
    calls.open = []  # calls of an earlier turn left unanswered are answered by nothing now
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        opened = seal.open_signed(_signature(part, at), owner)
        if opened is not None and opened[0]:  # one toolwire did not issue replays nothing
            reasoning.append(opened[0])
            if opened[1] and served is not None:
                served.append(opened[1])
        call = read_field(part, "functionCall")
        text = part.get("text")
        if call is not None:
            made.append(
                _function_call(expect_object(call, f"{at}.functionCall"), at, turn, n, calls)
            )
        elif read_field(part, "functionResponse") is not None:
            raise invalid("a functionResponse belongs in a user turn", f"{at}.functionResponse")
        elif text is not None:
            if part.get("thought") is not True:  # thought summaries are not replayed as text
                texts.append(expect_string(text, f"{at}.text"))
        else:
            texts.append(_code_text(part, at))
    return AssistantMessage("".join(texts), made, "\n".join(reasoning))


def _signature(part: dict[str, Any], at: str) -> str | None:
    signature = read_field(part, "thoughtSignature")
    return None if signature is None else expect_string(signature, f"{at}.thoughtSignature")


def _function_call(call: dict[str, Any], at: str, turn: int, n: int, calls: CallIds) -> ToolCall:
    name = expect_string(call.get("name"), f"{at}.functionCall.name")
    args = call.get("args")
    arguments = expect_object(args, f"{at}.functionCall.args") if args is not None else {}
    call_id = call.get("id")
    if call_id is None or call_id == "":
        call_id = f"call_{turn}_{n}"
    call_id = expect_string(call_id, f"{at}.functionCall.id")
    calls.open.append((call_id, name))
    return ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode(), index=n)


def system_transcript(value: Any) -> Transcript:
    if value is None:
        return []
    if isinstance(value, str):
        return [SystemMessage(value)] if value else []
    content = expect_object(value, "systemInstruction")
    parts = expect_list(read_field(content, "parts") or [], "systemInstruction.parts")
    texts = []
    for n, part in enumerate(parts):
        at = f"systemInstruction.parts[{n}]"
        text = expect_object(part, at).get("text")
        if text is None:
            raise invalid("only text parts are read here", at)
        texts.append(expect_string(text, f"{at}.text"))
    text = "\n".join(texts)
    return [SystemMessage(text)] if text else []
