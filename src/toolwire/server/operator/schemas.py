"""The JSON the `/ui` page reads under `/ui/api/` (see `server/operator/ui/routes.py`), for the
OpenAPI
document. These answers are toolwire's own (not OpenAI's): they may gain fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class UiStoredResponse(BaseModel):
    """A response as the store holds it (OpenAI's `Response` object: the Responses door
    documents it in full)."""

    model_config = ConfigDict(extra="allow", title="UiStoredResponse")
    id: str
    object: Literal["response"]
    status: str
    output: list[dict[str, Any]]


class UiRunSummary(BaseModel):
    """One stored response, as the run list shows it."""

    model_config = ConfigDict(extra="allow", title="UiRunSummary")
    id: str
    created_at: int
    status: str
    model: str | None = None
    conversation_id: str | None = None
    previous_response_id: str | None = None
    usage: dict[str, Any] | None = None
    approval_requests: list[str]
    pending_approvals: list[str]
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None


class UiRunList(BaseModel):
    """Recent responses, newest first."""

    model_config = ConfigDict(extra="allow", title="UiRunList")
    object: Literal["list"]
    data: list[UiRunSummary]
    total: int
    """How many responses match the filters in all (not the size of this page)."""
    offset: int
    limit: int
    has_more: bool


class UiRun(BaseModel):
    """One response with its run timeline (model calls, tool calls, repairs, timings)."""

    model_config = ConfigDict(extra="allow", title="UiRun")
    response: UiStoredResponse
    timeline: list[dict[str, Any]]
    pending_approvals: list[str]


class UiPendingApproval(BaseModel):
    model_config = ConfigDict(extra="allow", title="UiPendingApproval")
    response_id: str
    created_at: int
    model: str | None = None
    approval_request_id: str
    name: str | None = None
    server_label: str | None = None
    arguments: str | None = None
    tools: list[dict[str, Any]]


class UiApprovalList(BaseModel):
    """Approval requests of the last week that nobody has answered."""

    model_config = ConfigDict(extra="allow", title="UiApprovalList")
    object: Literal["list"]
    data: list[UiPendingApproval]


class UiConversationSummary(BaseModel):
    model_config = ConfigDict(extra="allow", title="UiConversationSummary")
    id: str
    created_at: int
    metadata: dict[str, Any]


class UiConversationList(BaseModel):
    """Recent conversations."""

    model_config = ConfigDict(extra="allow", title="UiConversationList")
    object: Literal["list"]
    data: list[UiConversationSummary]


class UiConversationRun(BaseModel):
    model_config = ConfigDict(extra="allow", title="UiConversationRun")
    id: str
    created_at: int
    status: str


class UiConversationRuns(BaseModel):
    """The responses of one conversation, oldest first."""

    model_config = ConfigDict(extra="allow", title="UiConversationRuns")
    id: str
    responses: list[UiConversationRun]


class UiMe(BaseModel):
    """Who the presented key is: an operator sees every tenant (`/ui`, `/metrics`)."""

    model_config = ConfigDict(extra="allow", title="UiMe")
    operator: bool
    key_id: str | None = None
    key_name: str | None = None
    keys_in_use: bool
    upstream: str


class UiOverview(BaseModel):
    """What toolwire did over a time range: totals, per model and upstream, and time series
    (repairs, leaks recovered and given up, malformed calls refused, upstream retries and
    failures, tokens, latency percentiles)."""

    model_config = ConfigDict(extra="allow", title="UiOverview")
    since: int
    until: int
    bucket_seconds: int
    total: dict[str, Any]
    by_model: list[dict[str, Any]]
    series: dict[str, list[Any]]


class UiModelList(BaseModel):
    model_config = ConfigDict(extra="allow", title="UiModelList")
    object: Literal["list"]
    data: list[str]


class UiKey(BaseModel):
    model_config = ConfigDict(extra="allow", title="UiKey")
    id: str
    name: str
    prefix: str
    operator: bool
    created_at: int
    revoked_at: int | None = None
    limits: dict[str, Any]
    usage: dict[str, Any] | None = None


class UiKeyList(BaseModel):
    """Every key with its limits and what it used of them (operator keys only)."""

    model_config = ConfigDict(extra="allow", title="UiKeyList")
    object: Literal["list"]
    data: list[UiKey]


class UiUpstream(BaseModel):
    """One model server of a fleet, as this process sees it."""

    model_config = ConfigDict(extra="allow", title="UiUpstream")
    name: str
    url: str
    state: Literal["closed", "half_open", "open"]
    outstanding: int
    calls: int
    failures: int
    error_rate: float
    ttft: float | None = None
    models: list[str] | None = None
    weight: float
    last_error: str | None = None


class UiUpstreamList(BaseModel):
    """The model servers of a fleet (operator keys only); empty with a single upstream."""

    model_config = ConfigDict(extra="allow", title="UiUpstreamList")
    upstreams: list[UiUpstream]
