"""The Responses and Conversations operations in `/openapi.json` (`server/http/openapi.py`)."""

from __future__ import annotations

from toolwire.server.http.openapi import API, LIST_QUERY, ApiSpec, Operation
from toolwire.server.responses.prepare.request import CreateResponse
from toolwire.server.responses.schemas.conversations import (
    AddItems,
    CreateConversation,
    UpdateConversation,
)
from toolwire.server.responses.schemas.objects import (
    Conversation,
    ConversationDeleted,
    Item,
    ItemList,
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
)


def register(spec: ApiSpec = API) -> None:
    """The Responses and Conversations operations (once per spec)."""
    spec.ensure(*OPERATIONS)
