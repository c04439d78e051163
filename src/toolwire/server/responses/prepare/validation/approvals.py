"""Approval responses in a request's input matched to the requests they answer, before the run:
a stale id (no such request in this conversation) or a forged one (not issued by this gateway,
for this key, with these arguments: `ApprovalSigner`) is a 400 here; the run receives only
decisions on requests this gateway issued (`ApprovalDecisions`)."""

from __future__ import annotations

from toolwire.errors import InvalidRequestError
from toolwire.loop.approvals import ApprovalDecisions, ApprovalSigner
from toolwire.loop.items import call_from_item
from toolwire.wire.items import Item


def approval_decisions(
    history: list[Item],
    input_items: list[Item],
    signer: ApprovalSigner,
    owner: str | None = None,
) -> ApprovalDecisions:
    """Approval responses in the input -> decisions on pending requests, and the calls to run.

    The request may be in the history or, for inline history, earlier in the input itself. A
    response to a request already answered in this history, or a second response to the same
    request, runs nothing. One that matches no request here is a stale id, and one whose
    request this gateway did not issue (for this key, with these arguments) is forged: 400s.
    """
    if not any(item.get("type") == "mcp_approval_response" for item in input_items):
        return ApprovalDecisions()  # nothing to match: the history need not be walked
    requests = {
        i["id"]: i
        for i in [*history, *input_items]
        if i.get("type") == "mcp_approval_request" and isinstance(i.get("id"), str)
    }
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
        assert request_id is not None  # required on a response, checked at the door
        request = requests.get(request_id)
        if request is None:
            raise InvalidRequestError(
                f"approval_request_id {request_id!r} matches no approval request in this "
                "conversation (a stale or foreign id)",
                param=f"input[{position}].approval_request_id",
            )
        if not signer.verify(request, owner):
            raise InvalidRequestError(
                f"approval_request_id {request_id!r} was not issued by this gateway for this "
                "key, or its request was altered; nothing was run",
                param=f"input[{position}].approval_request_id",
                code="invalid_approval_request",
            )
        if request_id in answered or request_id in found.decisions:
            continue
        found.decisions[request_id] = item["approve"]
        found.calls.append(
            call_from_item(request_id, request["name"], request.get("arguments", ""))
        )
    return found
