"""toolwire's own operations, registered with the default `ApiSpec` (`server/http/openapi.py`)."""

from __future__ import annotations

from toolwire.server.chat.schemas import ChatCompletionRequest
from toolwire.server.http.openapi import API, LIST_QUERY, ApiSpec, Operation, Query
from toolwire.server.operator.schemas import (
    UiApprovalList,
    UiConversationList,
    UiConversationRuns,
    UiKeyList,
    UiMe,
    UiModelList,
    UiOverview,
    UiRun,
    UiRunList,
    UiUpstreamList,
)
from toolwire.server.responses.prepare.request import CreateResponse
from toolwire.server.responses.schemas.conversations import (
    AddItems,
    CreateConversation,
    UpdateConversation,
)
from toolwire.server.responses.schemas.objects import (
    ChatCompletion,
    ChatCompletionChunk,
    Conversation,
    ConversationDeleted,
    Health,
    Item,
    ItemList,
    ModelList,
    OpenAPIDocument,
    ResponseDeleted,
    ResponseObject,
    ResponseStreamEvent,
)

RESPONSES = "Responses"
CONVERSATIONS = "Conversations"
RESPONSE = "/v1/responses/{response_id}"
CONVERSATION = "/v1/conversations/{conversation_id}"
UPSTREAM = (502, 504)

OPERATIONS = (
    Operation(
        "post",
        "/v1/responses",
        "createResponse",
        "Create a response: run the tool loop",
        RESPONSES,
        ResponseObject,
        body=CreateResponse,
        stream_event=ResponseStreamEvent,
        errors=(404, 424, *UPSTREAM),
        description=(
            'With `"stream": true` the answer is `text/event-stream`: one `event: TYPE` / '
            "`data: JSON` frame per ResponseStreamEvent. With `background: true` it is the "
            "queued response. The same path also takes a WebSocket upgrade (WebSocket mode, "
            "which OpenAPI cannot describe): each `response.create` message sent runs a "
            "response and each ResponseStreamEvent comes back as a text message; errors are "
            "`error` messages (docs/server.md)."
        ),
    ),
    Operation(
        "get",
        RESPONSE,
        "getResponse",
        "Retrieve a response",
        RESPONSES,
        ResponseObject,
        errors=(404,),
    ),
    Operation(
        "delete",
        RESPONSE,
        "deleteResponse",
        "Delete a response",
        RESPONSES,
        ResponseDeleted,
        errors=(404,),
    ),
    Operation(
        "post",
        RESPONSE + "/cancel",
        "cancelResponse",
        "Cancel a background response",
        RESPONSES,
        ResponseObject,
        errors=(400, 404),
    ),
    Operation(
        "get",
        RESPONSE + "/input_items",
        "listInputItems",
        "List a response's input items",
        RESPONSES,
        ItemList,
        errors=(404,),
        query=LIST_QUERY,
    ),
    Operation(
        "post",
        "/v1/conversations",
        "createConversation",
        "Create a conversation",
        CONVERSATIONS,
        Conversation,
        body=CreateConversation,
        body_required=False,
    ),
    Operation(
        "get",
        CONVERSATION,
        "getConversation",
        "Retrieve a conversation",
        CONVERSATIONS,
        Conversation,
        errors=(404,),
    ),
    Operation(
        "post",
        CONVERSATION,
        "updateConversation",
        "Update a conversation's metadata",
        CONVERSATIONS,
        Conversation,
        body=UpdateConversation,
        errors=(404,),
    ),
    Operation(
        "delete",
        CONVERSATION,
        "deleteConversation",
        "Delete a conversation",
        CONVERSATIONS,
        ConversationDeleted,
        errors=(404,),
    ),
    Operation(
        "get",
        CONVERSATION + "/items",
        "listConversationItems",
        "List a conversation's items",
        CONVERSATIONS,
        ItemList,
        errors=(404,),
        query=LIST_QUERY,
    ),
    Operation(
        "post",
        CONVERSATION + "/items",
        "createConversationItems",
        "Add items to a conversation",
        CONVERSATIONS,
        ItemList,
        body=AddItems,
        errors=(404,),
    ),
    Operation(
        "get",
        CONVERSATION + "/items/{item_id}",
        "getConversationItem",
        "Retrieve a conversation item",
        CONVERSATIONS,
        Item,
        errors=(404,),
    ),
    Operation(
        "delete",
        CONVERSATION + "/items/{item_id}",
        "deleteConversationItem",
        "Delete a conversation item (answers the conversation)",
        CONVERSATIONS,
        Conversation,
        errors=(404,),
    ),
    Operation(
        "post",
        "/v1/chat/completions",
        "createChatCompletion",
        "Chat completions through the hardening proxy",
        "Chat",
        ChatCompletion,
        body=ChatCompletionRequest,
        stream_event=ChatCompletionChunk,
        errors=(422, 424, *UPSTREAM),
        description=(
            'With `"stream": true` the answer is `text/event-stream`: `data: ChatCompletionChunk` '
            "frames, then `data: [DONE]`."
        ),
    ),
    Operation(
        "get",
        "/v1/models",
        "listModels",
        "List the upstream's models",
        "Models",
        ModelList,
        errors=UPSTREAM,
    ),
    Operation("get", "/health", "health", "Liveness", "Server", Health, public=True),
    Operation(
        "get", "/openapi.json", "openapi", "This document", "Server", OpenAPIDocument, public=True
    ),
)


_TIME = {"type": "integer", "minimum": 0, "maximum": 2**62}
_UI_LIMIT = {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}
_SINCE = Query("since", _TIME, "Only responses created at or after (Unix s).")
_UNTIL = Query("until", _TIME, "Only responses created at or before (Unix s).")
_OFFSET = Query("offset", {"type": "integer", "minimum": 0, "maximum": 2**31, "default": 0})
_KEY = Query(
    "key",
    {"type": "string"},
    "Operator keys: only this key's rows (a key id, or `none`: from before the first key).",
)
#: `/metrics` and `/ui` (server/operator/observability.py): served by `toolwire serve`, not by a
# bare
#: `create_app`; each app's document lists only what it serves.
OBSERVE_OPERATIONS = (
    Operation(
        "get",
        "/metrics",
        "metrics",
        "Prometheus metrics",
        "Observability",
        None,
        ok_media="text/plain; version=0.0.4",
        errors=(403,),
        description="Request, upstream, tool-call, repair and leak counters and histograms "
        "(docs/operations.md). Operator keys only when keys are in use (403 for a tenant's).",
    ),
    Operation(
        "get",
        "/ui",
        "uiPage",
        "The run inspector page",
        "Observability",
        None,
        ok_media="text/html",
        public=True,
        description="A static page (no data): it asks for an API key and reads `/ui/api/`. "
        "Its scripts and styles are served under `/ui/static/`.",
    ),
    Operation(
        "get",
        "/ui/",
        "uiPageSlash",
        "The run inspector page",
        "Observability",
        None,
        ok_media="text/html",
        public=True,
    ),
    Operation(
        "get",
        "/ui/api/responses",
        "uiListResponses",
        "Recent responses",
        "Observability",
        UiRunList,
        query=(
            Query("limit", _UI_LIMIT),
            _OFFSET,
            Query("status", {"type": "string"}),
            Query("model", {"type": "string"}),
            _KEY,
            Query("q", {"type": "string"}, "Text searched in the input and the response."),
            _SINCE,
            _UNTIL,
        ),
    ),
    Operation("get", "/ui/api/me", "uiMe", "Who this key is", "Observability", UiMe),
    Operation(
        "get",
        "/ui/api/overview",
        "uiOverview",
        "What toolwire did over a time range",
        "Observability",
        UiOverview,
        query=(_SINCE, _UNTIL, _KEY),
    ),
    Operation("get", "/ui/api/models", "uiModels", "Models in use", "Observability", UiModelList),
    Operation(
        "get",
        "/ui/api/keys",
        "uiKeys",
        "Keys, their limits and usage (operator keys only)",
        "Observability",
        UiKeyList,
        errors=(403,),
    ),
    Operation(
        "get",
        "/ui/api/upstreams",
        "uiUpstreams",
        "A fleet's model servers: circuit, load, errors, latency (operator keys only)",
        "Observability",
        UiUpstreamList,
        errors=(403,),
    ),
    Operation(
        "get",
        "/ui/api/responses/{response_id}",
        "uiGetResponse",
        "One response and its run timeline",
        "Observability",
        UiRun,
        errors=(404,),
    ),
    Operation(
        "get",
        "/ui/api/approvals",
        "uiPendingApprovals",
        "Unanswered approval requests",
        "Observability",
        UiApprovalList,
        query=(_SINCE,),
    ),
    Operation(
        "get",
        "/ui/api/conversations",
        "uiListConversations",
        "Recent conversations",
        "Observability",
        UiConversationList,
        query=(Query("limit", _UI_LIMIT), _OFFSET, _KEY),
    ),
    Operation(
        "get",
        "/ui/api/conversations/{conversation_id}",
        "uiConversation",
        "One conversation's items and responses",
        "Observability",
        UiConversationRuns,
        errors=(404,),
    ),
)


def register_builtin(spec: ApiSpec = API) -> None:
    """Register toolwire's own operations (once per spec)."""
    if not any(op.operation_id == "createResponse" for op in spec.operations):
        spec.register(*OPERATIONS, *OBSERVE_OPERATIONS)
