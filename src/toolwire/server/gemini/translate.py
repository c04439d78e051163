"""A Gemini `generateContent` request -> the loop's `LoopRequest`.

Hand-written rather than a pydantic model, as the Anthropic door's: Gemini CLI ships weekly and
sends fields ahead of the published reference (`thinkingLevel`, `responseJsonSchema` with
Gemini's upper-case type names), which must be accepted, while a field the door acts on with a
value it cannot serve is a 400 naming the field and the values it knows. Google's REST API
reads each field in lowerCamelCase or snake_case (the proto JSON mapping; its own curl examples
use `system_instruction`), and so does this door (`read_field`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolwire.loop.state import LoopRequest, LoopSettings
from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.gemini.contents import ThoughtSeal, contents_transcript, system_transcript
from toolwire.server.gemini.fields import (
    camel_case,
    expect_list,
    expect_object,
    integer_field,
    invalid,
    number_field,
    read_field,
)
from toolwire.server.gemini.schema import json_schema
from toolwire.server.http.compat import known_value, unknown_value
from toolwire.tools.base import Tool
from toolwire.tools.web import FETCH, SEARCH, WebTools
from toolwire.transcript import (
    ToolSpec,
)
from toolwire.upstream.base import NO_HINTS, RoutingHints, Sampling
from toolwire.upstream.model_map import map_model

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


@dataclass(slots=True)
class GeminiCall:
    request: LoopRequest
    model: str
    """The name in the path: echoed as `modelVersion`, as Google does."""
    show_thoughts: bool
    """`thinkingConfig.includeThoughts`: reasoning becomes `thought` parts."""
    prompt_tokens: int = 0


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
    session: str | None = None
    """The client's session id (a header), a routing hint for a fleet."""
    routes: bool = False
    """The upstream routes over several model servers: the request carries routing hints
    (the client's `session`, the server a `thoughtSignature` came from)."""


def translate(body: Any, context: Context, *, stream: bool) -> GeminiCall:
    body = expect_object(body, "")
    if not context.model:
        raise invalid("the model name is empty", "model")
    contents = read_field(body, "contents")
    if contents is None:
        raise invalid("contents is required", "contents")
    served: list[str] = []  # the model servers of the signatures toolwire issued, in order
    transcript = contents_transcript(contents, context.seal, context.owner, served)
    system = system_transcript(read_field(body, "systemInstruction"))
    specs, web = _tools(read_field(body, "tools"))
    specs, choice = _tool_config(read_field(body, "toolConfig"), specs)
    config = read_field(body, "generationConfig")
    sampling, show = _generation(
        expect_object(config, "generationConfig") if config is not None else {}
    )
    # safetySettings, cachedContent, labels and the rest: accepted (docs/gemini.md).
    request = LoopRequest(
        model=context.settings.upstream_model(context.model, context.default_model),
        input=system + transcript,
        tools=[*context.server_tools, *(context.settings.web.tool(name) for name in web)],
        client_tools=specs,
        tool_choice=choice,
        sampling=sampling,
        # Stream from the upstream only when the client streams (as the chat door does); a
        # whole answer shows no call before its end (a fleet can replace a failed turn unseen).
        settings=replace(context.loop_settings, stream=stream, live_calls=stream),
        routing=(
            RoutingHints(served[-1] if served else None, context.session)
            if context.routes
            else NO_HINTS
        ),
    )
    return GeminiCall(request, context.model, show)


def count_request(body: Any, context: Context) -> GeminiCall:
    """A `countTokens` body: `contents`, or a whole `generateContentRequest`."""
    body = expect_object(body, "")
    inner = read_field(body, "generateContentRequest")
    if inner is not None:
        inner = expect_object(inner, "generateContentRequest")
        if read_field(body, "contents") is not None:
            raise invalid(
                "give contents or generateContentRequest, not both", "generateContentRequest"
            )
        return translate(inner, context, stream=False)
    return translate(body, context, stream=False)


# -- contents --------------------------------------------------------------------------------


# -- tools -----------------------------------------------------------------------------------


def _tools(value: Any) -> tuple[list[ToolSpec], list[str]]:
    """The client's functions, and the web tools of Google's it asked for that toolwire
    serves (`WEB_TOOLS`: run inside the loop)."""
    if value is None:
        return [], []
    specs: list[ToolSpec] = []
    web: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(expect_list(value, "tools")):
        at = f"tools[{n}]"
        tool = expect_object(raw, at)
        for key in tool:
            camel = camel_case(key)
            if camel == "functionDeclarations":
                continue
            if camel in WEB_TOOLS:  # its settings (dynamic retrieval, ...): not acted on
                if WEB_TOOLS[camel] not in web:
                    web.append(WEB_TOOLS[camel])
                continue
            label = "Google's own tool" if camel in GOOGLE_TOOLS else "the tool kind"
            raise invalid(
                f"{label} {camel!r} is not served by toolwire (functionDeclarations are; the "
                "gateway's own tools run inside the loop)",
                f"{at}.{camel}",
            )
        declarations = expect_list(
            read_field(tool, "functionDeclarations") or [], f"{at}.functionDeclarations"
        )
        for m, declaration in enumerate(declarations):
            spec = _declaration(
                expect_object(declaration, f"{at}.functionDeclarations[{m}]"),
                f"{at}.functionDeclarations[{m}]",
            )
            if spec.name in seen:
                raise invalid(
                    f"function names must be unique ({spec.name!r})",
                    f"{at}.functionDeclarations[{m}].name",
                )
            seen.add(spec.name)
            specs.append(spec)
    return specs, web


def _declaration(declaration: dict[str, Any], at: str) -> ToolSpec:
    name = declaration.get("name")
    if not isinstance(name, str) or not name:
        raise invalid("a non-empty string is required", f"{at}.name")
    description = declaration.get("description")
    schema = read_field(declaration, "parametersJsonSchema")
    if schema is None:
        schema = declaration.get("parameters")
    if schema is None:
        parameters: dict[str, Any] = {"type": "object", "properties": {}}
    else:
        parameters = json_schema(expect_object(schema, f"{at}.parameters"))
    return ToolSpec(name, description if isinstance(description, str) else "", parameters)


def _tool_config(value: Any, specs: list[ToolSpec]) -> tuple[list[ToolSpec], Any]:
    """(the tools offered, the upstream's `tool_choice`). `ANY` with `allowedFunctionNames`
    offers only those (one name: that function is required)."""
    if value is None:
        return specs, None
    config = read_field(expect_object(value, "toolConfig"), "functionCallingConfig")
    if config is None:
        return specs, None
    config = expect_object(config, "toolConfig.functionCallingConfig")
    mode = known_value(
        "toolConfig.functionCallingConfig.mode", config.get("mode", "AUTO"), tuple(MODES)
    )
    choice = MODES[mode]
    allowed = read_field(config, "allowedFunctionNames")
    where = "toolConfig.functionCallingConfig.allowedFunctionNames"
    if allowed is None or choice != "required":
        return specs, choice
    names = expect_list(allowed, where)
    known = {spec.name for spec in specs}
    for name in names:
        if name not in known:
            raise invalid(f"no function named {name!r} in tools", where)
    if len(names) == 1:
        return specs, {"type": "function", "name": names[0]}
    return [spec for spec in specs if spec.name in names], choice


# -- generationConfig ------------------------------------------------------------------------


def _generation(config: dict[str, Any]) -> tuple[Sampling, bool]:
    """(sampling, show thoughts)."""
    extra: dict[str, object] = {}
    top_k = integer_field(config, "topK", 0)
    if top_k is not None:
        extra["top_k"] = top_k
    for name, upstream in (
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
    ):
        penalty = number_field(config, name, -2, 2)
        if penalty is not None:
            extra[upstream] = penalty
    seed = read_field(config, "seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise invalid("must be an integer", "generationConfig.seed")
        extra["seed"] = seed
    stops = read_field(config, "stopSequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise invalid("must be a list of non-empty strings", "generationConfig.stopSequences")
        if stops:
            extra["stop"] = list(stops)
    candidates = read_field(config, "candidateCount")
    if candidates is not None and candidates != 1:  # toolwire answers one candidate
        raise unknown_value("generationConfig.candidateCount", candidates, ("1",))
    modalities = read_field(config, "responseModalities")
    if modalities is not None:
        for modality in expect_list(modalities, "generationConfig.responseModalities"):
            known_value("generationConfig.responseModalities", modality, ("TEXT",))
    return (
        Sampling(
            temperature=number_field(config, "temperature", 0, 2),
            top_p=number_field(config, "topP", 0, 1),
            max_output_tokens=integer_field(config, "maxOutputTokens", 1, MAX_OUTPUT_TOKENS),
            response_format=_response_format(config),
            extra_body=extra or None,
        ),
        _thinking(config),
    )


def _response_format(config: dict[str, Any]) -> dict[str, object] | None:
    mime = read_field(config, "responseMimeType")
    schema = read_field(config, "responseJsonSchema")
    if schema is None:
        schema = read_field(config, "responseSchema")
    if mime is not None:
        known_value("generationConfig.responseMimeType", mime, MIME_TYPES)
    if schema is not None:
        shape = json_schema(expect_object(schema, "generationConfig.responseJsonSchema"))
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": shape}}
    if mime == "application/json":
        return {"type": "json_object"}
    return None


def _thinking(config: dict[str, Any]) -> bool:
    """Whether thoughts are shown (`includeThoughts`; Gemini shows none unless asked).
    `thinkingBudget` and `thinkingLevel` are accepted with any value: open servers have no
    common field for them, and the upstream decides how much it reasons."""
    value = read_field(config, "thinkingConfig")
    if value is None:
        return False
    thinking = expect_object(value, "generationConfig.thinkingConfig")
    include = read_field(thinking, "includeThoughts")
    if include is not None and not isinstance(include, bool):
        raise invalid("must be a boolean", "generationConfig.thinkingConfig.includeThoughts")
    return include is True
