"""A Gemini `generateContent` request -> the loop's `LoopRequest`.

Hand-written rather than a pydantic model, as the Anthropic door's: Gemini CLI ships weekly and
sends fields ahead of the published reference (`thinkingLevel`, `responseJsonSchema` with
Gemini's upper-case type names), which must be accepted, while a field the door acts on with a
value it cannot serve is a 400 naming the field and the values it knows. Google's REST API
reads each field in lowerCamelCase or snake_case (the proto JSON mapping; its own curl examples
use `system_instruction`), and so does this door (`_get`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from toolwire.errors import InvalidRequestError
from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.sealed import ReasoningSeal
from toolwire.server.gemini.schema import json_schema
from toolwire.server.http.compat import known_value, unknown_value
from toolwire.tools.base import Tool
from toolwire.tools.readable import to_text
from toolwire.tools.web import FETCH, SEARCH, WebTools
from toolwire.transcript import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Transcript,
    UserMessage,
)
from toolwire.upstream.base import Sampling
from toolwire.upstream.model_map import map_model
from toolwire.wire.chat import ChatPart

FAMILIES = ("flash-lite", "flash", "pro")
"""Gemini model families, as a requested name contains them (`flash-lite` before `flash`)."""

#: Google's own tools toolwire serves, inside the loop, with the operator's web backends
#: (`tools/web.py`): search grounding (Gemini CLI's `google_web_search`) and URL context (its
#: `web_fetch`). The model reads what they found; the answer is its text.
WEB_TOOLS = {"googleSearch": SEARCH, "googleSearchRetrieval": SEARCH, "urlContext": FETCH}
#: Google's other tools (run on Google's servers): refused by name, as toolwire does not serve
#: them; the gateway's tools (workspace, MCP) run inside the loop instead.
GOOGLE_TOOLS = (
    "codeExecution",
    "computerUse",
    "fileSearch",
    "googleMaps",
    "retrieval",
    "enterpriseWebSearch",
    "mcpServers",
)
MODES: dict[str, str] = {
    "AUTO": "auto",
    "MODE_UNSPECIFIED": "auto",
    "VALIDATED": "auto",  # calls checked against their schema: the loop always does
    "ANY": "required",
    "NONE": "none",
}
MIME_TYPES = ("text/plain", "application/json")
ROLES = ("user", "model", "function")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/heic", "image/heif")


@dataclass(slots=True, frozen=True)
class GeminiSettings:
    """How the door maps requested models, and what it knows of the upstream's window."""

    models: Mapping[str, str] = field(default_factory=dict)
    """Requested name (`gemini-2.5-pro`) or family (`pro`, `flash`, `flash-lite`, `default`)
    -> upstream model. Unmapped names go to the server's default model (`--model`)."""
    context_window: int | None = None
    """The upstream's context window in tokens (None: asked of the upstream)."""
    keepalive_interval: float = 10.0
    """Seconds without an event after which a stream sends a blank line, so proxies do not
    take a slow model or a long server-side tool for a dead connection."""
    web: WebTools = field(default_factory=WebTools)
    """What serves `googleSearch` and `urlContext` (`tools/web.py`; shared with the Messages
    door's `web_search` / `web_fetch`)."""

    def upstream_model(self, requested: str, default: str | None) -> str:
        return map_model(requested, self.models, FAMILIES, default)


class ThoughtSeal(ReasoningSeal):
    """`thoughtSignature`s this door issues: the turn's reasoning, sealed for the key
    (`sealed.py`). One coming back on a part of a `model` turn replays the reasoning to the
    upstream with that turn; any other (Gemini's own, Gemini CLI's placeholder
    `skip_thought_signature_validator`, another key's, an altered one) replays nothing."""

    def __init__(self, secret: bytes) -> None:
        super().__init__(secret, label=b"toolwire gemini thought v1")


@dataclass(slots=True)
class GeminiCall:
    request: LoopRequest
    model: str
    """The name in the path: echoed as `modelVersion`, as Google does."""
    show_thoughts: bool
    """`thinkingConfig.includeThoughts`: reasoning becomes `thought` parts."""
    prompt_tokens: int = 0


def _invalid(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(f"{param}: {message}" if param else message, param=param or None)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _get(obj: Mapping[str, Any], name: str) -> Any:
    """A field by its lowerCamelCase name, or by its snake_case one."""
    value = obj.get(name)
    return obj.get(_snake(name)) if value is None else value


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid("expected an object", where)
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid("expected a list", where)
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _invalid("expected a string", where)
    return value


def _number(config: Mapping[str, Any], name: str, low: float, high: float | None) -> float | None:
    value = _get(config, name)
    if value is None:
        return None
    where = f"generationConfig.{name}"
    bounded = high is None or value <= high
    if isinstance(value, bool) or not isinstance(value, int | float) or value < low or not bounded:
        limit = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise _invalid(f"must be a number {limit}", where)
    return float(value)


def _integer(config: Mapping[str, Any], name: str, low: int) -> int | None:
    value = _get(config, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _invalid(f"must be an integer of at least {low}", f"generationConfig.{name}")
    return value


@dataclass(slots=True, frozen=True)
class Context:
    """What a request is translated with beside its body."""

    model: str
    """The name in the path (`models/{model}:generateContent`)."""
    settings: GeminiSettings
    default_model: str | None
    seal: ThoughtSeal
    owner: str | None
    server_tools: Sequence[Tool]
    loop_settings: LoopSettings


def translate(body: Any, context: Context, *, stream: bool) -> GeminiCall:
    body = _obj(body, "")
    if not context.model:
        raise _invalid("the model name is empty", "model")
    contents = _get(body, "contents")
    if contents is None:
        raise _invalid("contents is required", "contents")
    transcript = _contents(contents, context.seal, context.owner)
    system = _system(_get(body, "systemInstruction"))
    specs, web = _tools(_get(body, "tools"))
    specs, choice = _tool_config(_get(body, "toolConfig"), specs)
    config = _get(body, "generationConfig")
    sampling, show = _generation(_obj(config, "generationConfig") if config is not None else {})
    # safetySettings, cachedContent, labels and the rest: accepted (docs/gemini.md).
    request = LoopRequest(
        model=context.settings.upstream_model(context.model, context.default_model),
        input=system + transcript,
        tools=[*context.server_tools, *(context.settings.web.tool(name) for name in web)],
        client_tools=specs,
        tool_choice=choice,
        sampling=sampling,
        # Stream from the upstream only when the client streams (as the chat door does).
        settings=replace(context.loop_settings, stream=stream),
    )
    return GeminiCall(request, context.model, show)


def count_request(body: Any, context: Context) -> GeminiCall:
    """A `countTokens` body: `contents`, or a whole `generateContentRequest`."""
    body = _obj(body, "")
    inner = _get(body, "generateContentRequest")
    if inner is not None:
        inner = _obj(inner, "generateContentRequest")
        if _get(body, "contents") is not None:
            raise _invalid(
                "give contents or generateContentRequest, not both", "generateContentRequest"
            )
        return translate(inner, context, stream=False)
    return translate(body, context, stream=False)


# -- contents --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Calls:
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


def _contents(value: Any, seal: ThoughtSeal, owner: str | None) -> Transcript:
    if not isinstance(value, list) or not value:
        raise _invalid("must be a non-empty list", "contents")
    transcript: Transcript = []
    calls = _Calls()
    for index, raw in enumerate(value):
        where = f"contents[{index}]"
        content = _obj(raw, where)
        role = content.get("role") or "user"
        parts = _get(content, "parts")
        if not isinstance(parts, list) or not parts:
            raise _invalid("must be a non-empty list of parts", f"{where}.parts")
        parts = [_obj(p, f"{where}.parts[{n}]") for n, p in enumerate(parts)]
        if role in ("user", "function"):  # `function`: the API's older role for results
            transcript.extend(_user(parts, where, calls))
        elif role == "model":
            transcript.append(_model(parts, where, index, calls, seal, owner))
        else:
            raise unknown_value(f"{where}.role", role, ROLES)
    return transcript


def _user(parts: list[dict[str, Any]], where: str, calls: _Calls) -> Transcript:
    """Function responses first (each a tool message, as chat-completions servers expect
    right after the calls), then the rest of the turn as one user message."""
    results: Transcript = []
    content: list[ChatPart] = []
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        _signature(part, at)  # a user turn's replays nothing, but is still a string
        response = _get(part, "functionResponse")
        if response is not None:
            results.append(_function_response(_obj(response, f"{at}.functionResponse"), at, calls))
        elif _get(part, "functionCall") is not None:
            raise _invalid("a functionCall belongs in a model turn", f"{at}.functionCall")
        else:
            content.extend(_user_part(part, at))
    if content:
        results.append(UserMessage(content))
    return results


def _user_part(part: dict[str, Any], at: str) -> list[ChatPart]:
    text = part.get("text")
    if text is not None:
        return [{"type": "text", "text": _string(text, f"{at}.text")}]
    inline = _get(part, "inlineData")
    if inline is not None:
        return [_inline(_obj(inline, f"{at}.inlineData"), f"{at}.inlineData")]
    data = _get(part, "fileData")
    if data is not None:
        return [_file(_obj(data, f"{at}.fileData"), f"{at}.fileData")]
    code = _code_text(part, at)
    return [{"type": "text", "text": code}] if code else []  # a part of no kind toolwire reads


def _inline(blob: dict[str, Any], at: str) -> ChatPart:
    mime = _string(_get(blob, "mimeType"), f"{at}.mimeType").lower()
    data = _string(blob.get("data"), f"{at}.data")
    if mime in IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if mime.startswith("text/") or mime in ("application/json", "application/xml"):
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise _invalid("is not base64 of UTF-8 text", f"{at}.data") from None
        return {"type": "text", "text": text}
    raise _invalid(
        f"{mime} cannot be passed to this upstream (a chat-completions server reads text and "
        f"images: {', '.join(IMAGE_TYPES)}, text/*)",
        f"{at}.mimeType",
    )


def _file(data: dict[str, Any], at: str) -> ChatPart:
    uri = _string(_get(data, "fileUri"), f"{at}.fileUri")
    mime = _get(data, "mimeType")
    if uri.startswith(("https://", "http://")) and (mime is None or mime in IMAGE_TYPES):
        return {"type": "image_url", "image_url": {"url": uri}}
    raise _invalid(
        "only http(s) image URLs are served (toolwire has no Files API); send the data "
        "inline (inlineData) instead",
        f"{at}.fileUri",
    )


def _code_text(part: dict[str, Any], at: str) -> str:
    """Gemini's own code execution, in a history that came from Gemini: kept as text."""
    code = _get(part, "executableCode")
    if isinstance(code, dict):
        language = str(code.get("language") or "").lower().replace("language_unspecified", "")
        return f"```{language}\n{code.get('code') or ''}\n```"
    result = _get(part, "codeExecutionResult")
    if isinstance(result, dict):
        return f"Code execution ({result.get('outcome')}):\n{result.get('output') or ''}"
    return ""


def _function_response(response: dict[str, Any], at: str, calls: _Calls) -> ToolMessage:
    name = _string(response.get("name"), f"{at}.functionResponse.name")
    call_id = response.get("id")
    if call_id is not None:
        call_id = _string(call_id, f"{at}.functionResponse.id")
    result = response.get("response")
    if result is not None:
        _obj(result, f"{at}.functionResponse.response")
    images: list[ChatPart] = []
    for n, raw in enumerate(_list(response.get("parts") or [], f"{at}.functionResponse.parts")):
        where = f"{at}.functionResponse.parts[{n}]"
        inline = _get(_obj(raw, where), "inlineData")
        if inline is not None:
            images.append(_inline(_obj(inline, f"{where}.inlineData"), f"{where}.inlineData"))
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
    calls: _Calls,
    seal: ThoughtSeal,
    owner: str | None,
) -> AssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    made: list[ToolCall] = []
    calls.open = []  # calls of an earlier turn left unanswered are answered by nothing now
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        replayed = seal.open(_signature(part, at), owner)
        if replayed:  # a signature toolwire did not issue for this key replays nothing
            reasoning.append(replayed)
        call = _get(part, "functionCall")
        text = part.get("text")
        if call is not None:
            made.append(_function_call(_obj(call, f"{at}.functionCall"), at, turn, n, calls))
        elif _get(part, "functionResponse") is not None:
            raise _invalid("a functionResponse belongs in a user turn", f"{at}.functionResponse")
        elif text is not None:
            if part.get("thought") is not True:  # thought summaries are not replayed as text
                texts.append(_string(text, f"{at}.text"))
        else:
            texts.append(_code_text(part, at))
    return AssistantMessage("".join(texts), made, "\n".join(reasoning))


def _signature(part: dict[str, Any], at: str) -> str | None:
    signature = _get(part, "thoughtSignature")
    return None if signature is None else _string(signature, f"{at}.thoughtSignature")


def _function_call(call: dict[str, Any], at: str, turn: int, n: int, calls: _Calls) -> ToolCall:
    name = _string(call.get("name"), f"{at}.functionCall.name")
    args = call.get("args")
    arguments = _obj(args, f"{at}.functionCall.args") if args is not None else {}
    call_id = call.get("id")
    if call_id is None or call_id == "":
        call_id = f"call_{turn}_{n}"
    call_id = _string(call_id, f"{at}.functionCall.id")
    calls.open.append((call_id, name))
    return ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode(), index=n)


def _system(value: Any) -> Transcript:
    if value is None:
        return []
    if isinstance(value, str):
        return [SystemMessage(value)] if value else []
    content = _obj(value, "systemInstruction")
    parts = _list(_get(content, "parts") or [], "systemInstruction.parts")
    texts = []
    for n, part in enumerate(parts):
        at = f"systemInstruction.parts[{n}]"
        text = _obj(part, at).get("text")
        if text is None:
            raise _invalid("only text parts are read here", at)
        texts.append(_string(text, f"{at}.text"))
    text = "\n".join(texts)
    return [SystemMessage(text)] if text else []


# -- tools -----------------------------------------------------------------------------------


def _tools(value: Any) -> tuple[list[ToolSpec], list[str]]:
    """The client's functions, and the web tools of Google's it asked for that toolwire
    serves (`WEB_TOOLS`: run inside the loop)."""
    if value is None:
        return [], []
    specs: list[ToolSpec] = []
    web: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(_list(value, "tools")):
        at = f"tools[{n}]"
        tool = _obj(raw, at)
        for key in tool:
            camel = _camel(key)
            if camel == "functionDeclarations":
                continue
            if camel in WEB_TOOLS:  # its settings (dynamic retrieval, ...): not acted on
                if WEB_TOOLS[camel] not in web:
                    web.append(WEB_TOOLS[camel])
                continue
            label = "Google's own tool" if camel in GOOGLE_TOOLS else "the tool kind"
            raise _invalid(
                f"{label} {camel!r} is not served by toolwire (functionDeclarations are; the "
                "gateway's own tools run inside the loop)",
                f"{at}.{camel}",
            )
        declarations = _list(_get(tool, "functionDeclarations") or [], f"{at}.functionDeclarations")
        for m, declaration in enumerate(declarations):
            spec = _declaration(
                _obj(declaration, f"{at}.functionDeclarations[{m}]"),
                f"{at}.functionDeclarations[{m}]",
            )
            if spec.name in seen:
                raise _invalid(
                    f"function names must be unique ({spec.name!r})",
                    f"{at}.functionDeclarations[{m}].name",
                )
            seen.add(spec.name)
            specs.append(spec)
    return specs, web


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _declaration(declaration: dict[str, Any], at: str) -> ToolSpec:
    name = declaration.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid("a non-empty string is required", f"{at}.name")
    description = declaration.get("description")
    schema = _get(declaration, "parametersJsonSchema")
    if schema is None:
        schema = declaration.get("parameters")
    if schema is None:
        parameters: dict[str, Any] = {"type": "object", "properties": {}}
    else:
        parameters = json_schema(_obj(schema, f"{at}.parameters"))
    return ToolSpec(name, description if isinstance(description, str) else "", parameters)


def _tool_config(value: Any, specs: list[ToolSpec]) -> tuple[list[ToolSpec], Any]:
    """(the tools offered, the upstream's `tool_choice`). `ANY` with `allowedFunctionNames`
    offers only those (one name: that function is required)."""
    if value is None:
        return specs, None
    config = _get(_obj(value, "toolConfig"), "functionCallingConfig")
    if config is None:
        return specs, None
    config = _obj(config, "toolConfig.functionCallingConfig")
    mode = known_value(
        "toolConfig.functionCallingConfig.mode", config.get("mode", "AUTO"), tuple(MODES)
    )
    choice = MODES[mode]
    allowed = _get(config, "allowedFunctionNames")
    where = "toolConfig.functionCallingConfig.allowedFunctionNames"
    if allowed is None or choice != "required":
        return specs, choice
    names = _list(allowed, where)
    known = {spec.name for spec in specs}
    for name in names:
        if name not in known:
            raise _invalid(f"no function named {name!r} in tools", where)
    if len(names) == 1:
        return specs, {"type": "function", "name": names[0]}
    return [spec for spec in specs if spec.name in names], choice


# -- generationConfig ------------------------------------------------------------------------


def _generation(config: dict[str, Any]) -> tuple[Sampling, bool]:
    """(sampling, show thoughts)."""
    extra: dict[str, object] = {}
    top_k = _integer(config, "topK", 0)
    if top_k is not None:
        extra["top_k"] = top_k
    for name, upstream in (
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
    ):
        penalty = _number(config, name, -2, 2)
        if penalty is not None:
            extra[upstream] = penalty
    seed = _get(config, "seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise _invalid("must be an integer", "generationConfig.seed")
        extra["seed"] = seed
    stops = _get(config, "stopSequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise _invalid("must be a list of non-empty strings", "generationConfig.stopSequences")
        if stops:
            extra["stop"] = list(stops)
    candidates = _get(config, "candidateCount")
    if candidates is not None and candidates != 1:  # toolwire answers one candidate
        raise unknown_value("generationConfig.candidateCount", candidates, ("1",))
    modalities = _get(config, "responseModalities")
    if modalities is not None:
        for modality in _list(modalities, "generationConfig.responseModalities"):
            known_value("generationConfig.responseModalities", modality, ("TEXT",))
    return (
        Sampling(
            temperature=_number(config, "temperature", 0, 2),
            top_p=_number(config, "topP", 0, 1),
            max_output_tokens=_integer(config, "maxOutputTokens", 1),
            response_format=_response_format(config),
            extra_body=extra or None,
        ),
        _thinking(config),
    )


def _response_format(config: dict[str, Any]) -> dict[str, object] | None:
    mime = _get(config, "responseMimeType")
    schema = _get(config, "responseJsonSchema")
    if schema is None:
        schema = _get(config, "responseSchema")
    if mime is not None:
        known_value("generationConfig.responseMimeType", mime, MIME_TYPES)
    if schema is not None:
        shape = json_schema(_obj(schema, "generationConfig.responseJsonSchema"))
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": shape}}
    if mime == "application/json":
        return {"type": "json_object"}
    return None


def _thinking(config: dict[str, Any]) -> bool:
    """Whether thoughts are shown (`includeThoughts`; Gemini shows none unless asked).
    `thinkingBudget` and `thinkingLevel` are accepted with any value: open servers have no
    common field for them, and the upstream decides how much it reasons."""
    value = _get(config, "thinkingConfig")
    if value is None:
        return False
    thinking = _obj(value, "generationConfig.thinkingConfig")
    include = _get(thinking, "includeThoughts")
    if include is not None and not isinstance(include, bool):
        raise _invalid("must be a boolean", "generationConfig.thinkingConfig.includeThoughts")
    return include is True
