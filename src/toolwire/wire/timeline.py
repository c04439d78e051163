"""Typed shape of a run's timeline entry: what `/ui` shows of a run, stored with its response.

Pure data: a `TypedDict` (open, `total=False`: each entry `type` carries its own subset),
since entries are JSON objects written once per event on the run's path and stored as JSON.
"""

from __future__ import annotations

from typing import TypedDict


class TimelineCall(TypedDict, total=False):
    """A call named inside an entry (a model turn's calls, calls returned, approvals)."""

    name: str
    call_id: str
    target: str
    arguments: str
    approval_request_id: str
    server_label: str


class TimelineEntry(TypedDict, total=False):
    type: str
    t: float
    """Seconds since the run started."""
    at: float
    model: str
    approval_request_id: str | None
    approve: bool
    server_label: str
    count: int
    error: str | None
    iteration: int
    tools_offered: bool
    ttft: float
    duration: float
    input_tokens: int
    output_tokens: int
    finish_reason: str | None
    text: str
    calls: list[TimelineCall]
    requests: list[TimelineCall]
    name: str
    call_id: str
    arguments: str
    ok: bool
    output: str
    kind: str
    path: str
    """Where in a call's arguments (`arguments_repaired`: `$.limit`)."""
    cause: str
    attempt: int
    delay: float
    format: str
    action: str
    snippet: str
    reason: str
    status: str
    message: str | None
    code: str | None
    """On `finished`: the error's code (None without an error)."""
    upstream: str
    """On a `model_call`: the model server a fleet's router sent it to."""
    routed: str
    """On a `model_call`: why the router chose it (`Routed.reason`)."""


class PendingApproval(TypedDict):
    """An approval request still waiting for a decision, as `/ui` lists it."""

    response_id: str
    created_at: int
    model: str | None
    approval_request_id: str
    name: str | None
    server_label: str | None
    arguments: str | None
    tools: object
    """The response's tools as echoed (the client's JSON)."""
