"""`/ui`: a static page (plain HTML, JS and CSS from `static/`, no build step) and the JSON it
reads under `/ui/api/`. The page sends `Authorization: Bearer <key>` with every call, from a key
the user pastes (kept in sessionStorage); the listings keep to what that key owns
(`request.state.owner`, set by the API-key middleware when keys are on). Approvals are answered
through `POST /v1/responses`, as any client would.
"""

from __future__ import annotations

import time
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from toolwire.errors import InvalidRequestError, NotFoundError
from toolwire.server.http import ORJSONResponse
from toolwire.store.timelines import TimelineStore
from toolwire.wire.timeline import PendingApproval

STATIC = Path(__file__).parent / "static"
_NO_CACHE = {"cache-control": "no-cache"}


def _owner(request: Request) -> str | None:
    owner = getattr(request.state, "owner", None)
    return None if owner is None else str(owner)


#: Query integers are checked against these bounds (a database integer is 64-bit: a larger
#: one would be a server error, not the client's 400).
LIMIT_RANGE = (1, 500)
TIME_RANGE = (0, 2**62)


def _int(
    request: Request, name: str, default: int | None = None, bounds: tuple[int, int] = TIME_RANGE
) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequestError(f"{name} must be an integer", param=name) from None
    low, high = bounds
    if not low <= number <= high:
        raise InvalidRequestError(f"{name} must be between {low} and {high}", param=name)
    return number


def ui_routes(timelines: TimelineStore) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=_NO_CACHE)

    async def list_responses(request: Request) -> Response:
        limit = _int(request, "limit", 50, LIMIT_RANGE) or 50
        rows = await timelines.list_responses(
            owner=_owner(request),
            status=request.query_params.get("status") or None,
            model=request.query_params.get("model") or None,
            since=_int(request, "since"),
            until=_int(request, "until"),
            limit=limit,
        )
        asked = [rid for row in rows for rid in row["approval_requests"]]
        decided = await timelines.decided(asked)
        for row in rows:
            row["pending_approvals"] = [r for r in row["approval_requests"] if r not in decided]
        return ORJSONResponse({"object": "list", "data": rows})

    async def one_response(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        body = await timelines.get_response(response_id, _owner(request))
        if body is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        entries = await timelines.get(response_id) or []
        asked = [
            item["id"]
            for item in body.get("output") or []
            if item.get("type") == "mcp_approval_request"
        ]
        decided = await timelines.decided(asked)
        return ORJSONResponse(
            {
                "response": body,
                "timeline": entries,
                "pending_approvals": [a for a in asked if a not in decided],
            }
        )

    async def pending_approvals(request: Request) -> Response:
        since = _int(request, "since", int(time.time()) - 7 * 86400)
        rows = await timelines.list_responses(owner=_owner(request), since=since, limit=200)
        asked = [rid for row in rows for rid in row["approval_requests"]]
        decided = await timelines.decided(asked)
        waiting: list[PendingApproval] = []
        for row in rows:
            open_ids = [a for a in row["approval_requests"] if a not in decided]
            if not open_ids:
                continue
            body = await timelines.get_response(row["id"], _owner(request))
            if body is None:
                continue
            for item in body["output"]:
                if item.get("type") == "mcp_approval_request" and item.get("id") in open_ids:
                    waiting.append(
                        {
                            "response_id": row["id"],
                            "created_at": row["created_at"],
                            "model": body["model"],
                            "approval_request_id": item["id"],
                            "name": item.get("name"),
                            "server_label": item.get("server_label"),
                            "arguments": item.get("arguments"),
                            "tools": body["tools"] or [],
                        }
                    )
        return ORJSONResponse({"object": "list", "data": waiting})

    async def list_conversations(request: Request) -> Response:
        limit = _int(request, "limit", 50, LIMIT_RANGE) or 50
        rows = await timelines.list_conversations(owner=_owner(request), limit=limit)
        return ORJSONResponse({"object": "list", "data": rows})

    async def conversation(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        rows = await timelines.conversation_responses(conversation_id, _owner(request))
        return ORJSONResponse({"id": conversation_id, "responses": rows})

    return [
        Route("/ui", page, methods=["GET"]),
        Route("/ui/", page, methods=["GET"]),
        Route("/ui/api/responses", list_responses, methods=["GET"]),
        Route("/ui/api/responses/{response_id}", one_response, methods=["GET"]),
        Route("/ui/api/approvals", pending_approvals, methods=["GET"]),
        Route("/ui/api/conversations", list_conversations, methods=["GET"]),
        Route("/ui/api/conversations/{conversation_id}", conversation, methods=["GET"]),
        Mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static"),
    ]
