"""Typed shapes of the Responses API's items, content parts, usage and response object.

Pure data, no code: `TypedDict`s, because these values *are* JSON objects that flow as dicts
from the door to the store and back out (stored, echoed, streamed) — a TypedDict costs nothing
at run time (no copying, no validation on the hot path) while mypy checks every key and value
type the code reads or writes. Validation of what a client sent happens once, at the door;
after it, code holds these types.

`Item` is open (`total=False`): one shape for every item kind, naming every field the kinds
toolwire reads or writes, by name and type; `type` says which kind it is, and which fields it
carries is OpenAI's rule for that kind (checked at the door,
`server/responses/prepare/validation/items.py`). Values typed `object` are JSON toolwire passes
through without reading (tool definitions, a computer call's action, annotations).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Annotation(TypedDict, total=False):
    """An `output_text` annotation (`url_citation`, `file_citation`, …)."""

    type: str
    url: str
    title: str
    start_index: int
    end_index: int
    file_id: str
    filename: str
    index: int
    container_id: str


class ContentPart(TypedDict, total=False):
    """A message's content part (`input_text`, `output_text`, `input_image`, `input_file`,
    `input_audio`, `refusal`), a reasoning item's `reasoning_text` / `summary_text`, or a
    tool output's part."""

    type: str
    text: str
    annotations: list[Annotation]
    logprobs: list[object]
    image_url: str | None
    file_id: str | None
    filename: str | None
    file_data: str | None
    file_url: str | None
    detail: str | None
    refusal: str
    input_audio: object


class McpListedTool(TypedDict):
    """A tool as an `mcp_list_tools` item shows it."""

    name: str
    description: str | None
    input_schema: dict[str, object]
    """A JSON Schema: arbitrary JSON, passed on."""
    annotations: dict[str, object] | None


ToolOutput = str | list[ContentPart] | dict[str, object] | None
"""What a call's output item carries: text, content parts, or (computer, shell) an object."""


class Item(TypedDict, total=False):
    """An input or output item (`message`, `function_call`, `function_call_output`,
    `reasoning`, `mcp_call`, `mcp_list_tools`, `mcp_approval_request`, `compaction`, …)."""

    id: str
    type: str
    status: str | None
    role: str
    content: list[ContentPart]
    summary: list[ContentPart]
    encrypted_content: str | None
    call_id: str
    """(null only in a `tool_search_*` item, which toolwire keeps and never reads)"""
    name: str
    namespace: str | None
    arguments: str
    input: str
    output: ToolOutput
    error: str | None
    server_label: str
    approval_request_id: str | None
    approve: bool
    reason: str | None
    tools: list[McpListedTool] | list[dict[str, object]]
    """An `mcp_list_tools` item's listing; the tool definitions an `additional_tools` or
    `tool_search_output` item carries (the client's JSON, kept and never read)."""
    action: dict[str, object]
    """A computer/shell/search call's action: OpenAI's JSON, passed on."""
    execution: str
    environment: object
    pending_safety_checks: list[object]
    acknowledged_safety_checks: list[object] | None
    max_output_length: int | None
    created_by: str


class InputTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class UsageObject(TypedDict):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ErrorObject(TypedDict):
    code: str
    message: str


class IncompleteDetails(TypedDict):
    reason: str
    message: NotRequired[str]
    toolwire_reason: NotRequired[str]
    """toolwire's own stop reason, when it says more than OpenAI's `reason` (`errors.py`)."""


class ResponseObject(TypedDict):
    """The response object. Fields toolwire decides are typed; fields it echoes from the
    request (`tools`, `text`, `reasoning`, `metadata`, …) are the client's JSON (`object`)."""

    id: str
    object: str
    created_at: int
    status: str
    background: object
    completed_at: int | None
    conversation: object
    error: ErrorObject | None
    incomplete_details: IncompleteDetails | None
    instructions: object
    max_output_tokens: object
    max_tool_calls: object
    metadata: object
    model: str
    output: list[Item]
    parallel_tool_calls: object
    previous_response_id: object
    prompt: object
    prompt_cache_key: object
    prompt_cache_retention: object
    presence_penalty: object
    frequency_penalty: object
    reasoning: object
    safety_identifier: object
    service_tier: object
    store: object
    temperature: object
    text: object
    tool_choice: object
    tools: object
    top_logprobs: object
    top_p: object
    truncation: object
    usage: UsageObject | None
    user: NotRequired[object]


class StreamEvent(TypedDict, total=False):
    """A Responses stream event (`response.created`, `response.output_text.delta`, …, `error`):
    `type` and `sequence_number`, then the fields its type carries."""

    type: str
    sequence_number: int
    response: ResponseObject
    item: Item
    output_index: int
    item_id: str
    content_index: int
    summary_index: int
    delta: str
    text: str
    part: ContentPart
    logprobs: list[object]
    arguments: str
    name: str
    input: str
    code: str | None
    message: str | None
    param: str | None
    stream_id: str
    """WebSocket mode: the lane (`stream_id`) a multiplexed socket's event belongs to."""


class ConversationObject(TypedDict):
    id: str
    object: str
    created_at: int
    metadata: dict[str, str]


class ItemList(TypedDict):
    """A page of items (`GET /v1/responses/{id}/input_items`, a conversation's items)."""

    object: str
    data: list[Item]
    first_id: str | None
    last_id: str | None
    has_more: bool


class SocketError(TypedDict):
    """WebSocket mode's error envelope: `{"type": "error", "status": …, "error": {…}}`."""

    type: str
    status: int
    error: dict[str, object]
    stream_id: NotRequired[str]
