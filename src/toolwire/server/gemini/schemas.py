"""The Gemini door in `/openapi.json`: its request bodies, answers and error, as models.

They describe what `translate.py` accepts (which checks each field by hand, so that what Gemini
CLI sends ahead of the published reference is accepted): open where the door is open (parts,
`thinkingConfig`, `safetySettings`, extra fields, snake_case spellings), bounded where it
refuses (`temperature`, `topP`, `topK`, `maxOutputTokens`, roles, `mode`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from toolwire.server.gate.limits import MAX_OUTPUT_TOKENS
from toolwire.server.http.openapi import API, ApiSpec, Operation, Query


class Part(BaseModel):
    """One part: `text` (`thought: true` for a thought), `inlineData` (images; text),
    `fileData` (http(s) image URLs), `functionCall`, `functionResponse`; a
    `thoughtSignature` on any of them."""

    model_config = ConfigDict(extra="allow", title="GeminiPart")
    text: str | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None
    inlineData: dict[str, Any] | None = None
    fileData: dict[str, Any] | None = None
    functionCall: dict[str, Any] | None = None
    functionResponse: dict[str, Any] | None = None


class Content(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiContent")
    role: Literal["user", "model", "function"] | None = None
    parts: list[Part] = Field(min_length=1)


class FunctionDeclaration(BaseModel):
    """`parameters` (Gemini's OpenAPI subset, upper-case types) or `parametersJsonSchema`."""

    model_config = ConfigDict(extra="allow", title="GeminiFunctionDeclaration")
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parametersJsonSchema: dict[str, Any] | None = None


class Tool(BaseModel):
    """Function declarations; `googleSearch` and `urlContext` (served by the operator's web
    backends). Google's other tools (`codeExecution`, `fileSearch`...) are refused by name."""

    model_config = ConfigDict(extra="allow", title="GeminiTool")
    functionDeclarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiFunctionCallingConfig")
    mode: Literal["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"] | None = None
    allowedFunctionNames: list[str] | None = None


class ToolConfig(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiToolConfig")
    functionCallingConfig: FunctionCallingConfig | None = None


class ThinkingConfig(BaseModel):
    """`includeThoughts` shows reasoning as thought parts; `thinkingBudget` and
    `thinkingLevel` are accepted and passed on to nothing."""

    model_config = ConfigDict(extra="allow", title="GeminiThinkingConfig")
    includeThoughts: bool | None = None
    thinkingBudget: Any = None
    """Not acted on: any value."""
    thinkingLevel: Any = None
    """Not acted on: any value."""


class GenerationConfig(BaseModel):
    """`responseMimeType` `application/json` with `responseSchema` or `responseJsonSchema`:
    structured output. `candidateCount` 1 only."""

    model_config = ConfigDict(extra="allow", title="GeminiGenerationConfig")
    temperature: float | None = Field(default=None, ge=0, le=2)
    topP: float | None = Field(default=None, ge=0, le=1)
    topK: int | None = Field(default=None, ge=0)
    maxOutputTokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    candidateCount: int | None = None
    stopSequences: list[str] | None = None
    presencePenalty: float | None = Field(default=None, ge=-2, le=2)
    frequencyPenalty: float | None = Field(default=None, ge=-2, le=2)
    seed: int | None = None
    responseMimeType: str | None = None
    responseSchema: dict[str, Any] | None = None
    responseJsonSchema: dict[str, Any] | None = None
    thinkingConfig: ThinkingConfig | None = None


class GenerateContentRequest(BaseModel):
    """Also accepted (docs/gemini.md): `safetySettings`, `cachedContent`, `labels`, any field
    added later, and every field's snake_case spelling."""

    model_config = ConfigDict(extra="allow", title="GeminiGenerateContentRequest")
    contents: list[Content] = Field(min_length=1)
    systemInstruction: Content | str | None = None
    tools: list[Tool] | None = None
    toolConfig: ToolConfig | None = None
    generationConfig: GenerationConfig | None = None
    safetySettings: Any = None
    """Accepted with any value: open servers have no safety filters to set."""
    cachedContent: Any = None
    """Accepted with any value: the upstream's own prefix cache serves an unchanged prefix."""


class CountTokensRequest(BaseModel):
    """`contents`, or a whole `generateContentRequest`."""

    model_config = ConfigDict(extra="allow", title="GeminiCountTokensRequest")
    contents: list[Content] | None = Field(default=None, min_length=1)
    generateContentRequest: dict[str, Any] | None = None


class Candidate(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiCandidate")
    content: Content | dict[str, Any]
    finishReason: (
        Literal[
            "STOP",
            "MAX_TOKENS",
            "SAFETY",
            "OTHER",
            "MALFORMED_FUNCTION_CALL",
            "TOO_MANY_TOOL_CALLS",
        ]
        | None
    ) = None
    finishMessage: str | None = None
    index: int | None = None


class UsageMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiUsageMetadata")
    promptTokenCount: int
    candidatesTokenCount: int
    totalTokenCount: int
    thoughtsTokenCount: int | None = None
    cachedContentTokenCount: int | None = None


class GenerateContentResponse(BaseModel):
    """The answer (or one stream chunk): `text` parts, `functionCall` parts (repaired
    `args`), `thought` parts, a toolwire-issued `thoughtSignature`."""

    model_config = ConfigDict(extra="allow", title="GeminiGenerateContentResponse")
    candidates: list[Candidate]
    usageMetadata: UsageMetadata | None = None
    modelVersion: str
    responseId: str


class StreamedResponses(RootModel[list[GenerateContentResponse]]):
    """Without `alt=sse`: one JSON array of the chunks, written as they come."""

    model_config = ConfigDict(title="GeminiStreamedResponses")


class CountTokensResponse(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiCountTokensResponse")
    totalTokens: int
    promptTokensDetails: list[dict[str, Any]] | None = None


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiModel")
    name: str
    displayName: str | None = None
    inputTokenLimit: int | None = None
    outputTokenLimit: int | None = None
    supportedGenerationMethods: list[str] | None = None


class ModelList(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiModelList")
    models: list[Model]


class GeminiErrorObject(BaseModel):
    model_config = ConfigDict(extra="allow", title="GeminiErrorObject")
    code: int
    message: str
    status: str


class GeminiError(BaseModel):
    """Every error on the Gemini door: `{"error": {code, message, status}}`."""

    model_config = ConfigDict(extra="allow", title="GeminiError")
    error: GeminiErrorObject


KEY = Query("key", {"type": "string"}, "The API key (or the `x-goog-api-key` header).")
ALT = Query(
    "alt",
    {"type": "string", "enum": ["json", "sse"], "default": "json"},
    "`sse`: server-sent events (what Gemini CLI and the SDKs ask for); else one JSON array.",
)
_ERRORS = (404, 429, 503, 504)
_DESCRIPTION = (
    "Google's Gemini API (v1beta; the same under /v1); keys as `x-goog-api-key` or `?key=`. "
    "Errors are Google's shape. See docs/gemini.md."
)


def _operations(prefix: str, suffix: str) -> tuple[Operation, ...]:
    path = f"{prefix}/models/{{model}}"
    return (
        Operation(
            "post",
            f"{path}:generateContent",
            f"generateContent{suffix}",
            "Gemini: run the tool loop (Gemini CLI's door)",
            "Gemini",
            GenerateContentResponse,
            body=GenerateContentRequest,
            errors=_ERRORS,
            query=(KEY,),
            error=GeminiError,
            description=_DESCRIPTION,
        ),
        Operation(
            "post",
            f"{path}:streamGenerateContent",
            f"streamGenerateContent{suffix}",
            "Gemini: run the tool loop, streamed",
            "Gemini",
            StreamedResponses,
            body=GenerateContentRequest,
            stream_event=GenerateContentResponse,
            errors=_ERRORS,
            query=(ALT, KEY),
            error=GeminiError,
            description=_DESCRIPTION,
        ),
        Operation(
            "post",
            f"{path}:countTokens",
            f"countTokens{suffix}",
            "Gemini: count a request's prompt tokens",
            "Gemini",
            CountTokensResponse,
            body=CountTokensRequest,
            errors=_ERRORS,
            query=(KEY,),
            error=GeminiError,
        ),
    )


OPERATIONS = (
    *_operations("/v1beta", ""),
    *_operations("/v1", "V1"),
    Operation(
        "get",
        "/v1beta/models",
        "listGeminiModels",
        "Gemini: the models a request may name",
        "Gemini",
        ModelList,
        errors=(429,),
        query=(
            Query("pageSize", {}, "Accepted with any value; every model is on one page."),
            Query("pageToken", {}, "Accepted with any value; every model is on one page."),
            KEY,
        ),
        error=GeminiError,
    ),
    Operation(
        "get",
        "/v1beta/models/{model}",
        "getGeminiModel",
        "Gemini: one model, with its token limits",
        "Gemini",
        Model,
        errors=(404, 429),
        query=(KEY,),
        error=GeminiError,
    ),
    Operation(
        "get",
        "/v1/models/{model}",
        "getGeminiModelV1",
        "Gemini: one model (what the SDK asks under /v1)",
        "Gemini",
        Model,
        errors=(404, 429),
        query=(KEY,),
        error=GeminiError,
        description="Answers a Gemini client's request (a key as `x-goog-api-key` or `?key=`); "
        "any other gets 404 (OpenAI's model retrieval is not served).",
    ),
)


def register(spec: ApiSpec = API) -> None:
    """Register the door's operations (once per spec)."""
    spec.ensure(*OPERATIONS)
