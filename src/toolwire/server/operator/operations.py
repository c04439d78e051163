"""`/metrics` and `/ui`'s operations in `/openapi.json` (`server/http/openapi.py`)."""

from __future__ import annotations

from toolwire.server.http.openapi import API, ApiSpec, Operation, Query
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


def register(spec: ApiSpec = API) -> None:
    spec.ensure(*OBSERVE_OPERATIONS)
