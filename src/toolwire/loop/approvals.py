"""Approvals: which calls waited for a human, which decisions the caller sent, and which of those
may still run. The driver claims each decision once (through an `ApprovalLedger`) before it runs
or denies anything, so a replayed or duplicated approval never runs a tool twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import InvalidRequestError
from toolwire.loop.items import call_from_item
from toolwire.transcript import ToolCall

ALREADY_USED = "this approval was already used; the call did not run again"
DENIED = "the user denied approval for this call; it did not run"


@dataclass(slots=True)
class ApprovalDecisions:
    """Decisions in a request's input on requests pending in its history."""

    decisions: dict[str, bool] = field(default_factory=dict)
    """approval_request_id -> approve."""
    calls: list[ToolCall] = field(default_factory=list)
    """The calls those requests asked about, in input order: run (or denied) first."""


def approval_decisions(
    history: list[dict[str, Any]], input_items: list[dict[str, Any]]
) -> ApprovalDecisions:
    """Approval responses in the input -> decisions on pending requests, and the calls to run.

    A response to a request already answered in this history, or a second response to the same
    request, runs nothing. One that matches no request here is a stale id: a 400.
    """
    requests = {i["id"]: i for i in history if i.get("type") == "mcp_approval_request"}
    answered = {
        i.get("approval_request_id")
        for i in history
        if i.get("type") in ("mcp_call", "mcp_approval_response")
    }
    found = ApprovalDecisions()
    for position, item in enumerate(input_items):
        if item.get("type") != "mcp_approval_response":
            continue
        request_id = item["approval_request_id"]
        request = requests.get(request_id)
        if request is None:
            raise InvalidRequestError(
                f"approval_request_id {request_id!r} matches no approval request in this "
                "conversation (a stale or foreign id)",
                param=f"input[{position}].approval_request_id",
            )
        if request_id in answered or request_id in found.decisions:
            continue
        found.decisions[request_id] = item["approve"]
        found.calls.append(
            call_from_item(request_id, request["name"], request.get("arguments", ""))
        )
    return found
